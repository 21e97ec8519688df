"""geodml: geo-distributed training that moves models instead of data.

Implements the setting of Cano et al., "Towards Geo-Distributed Machine Learning" (2016) and
Cano, Weimer, Mahajan, Curino, Fumarola, Krishnamurthy (IEEE Data Eng. Bull. 2017): K data centers
each hold a partition of the training rows; algorithms either centralize the raw rows or exchange
model-sized messages over a simulated WAN whose bytes, seconds and dollars are accounted exactly.
"""

__version__ = "0.1.0"
