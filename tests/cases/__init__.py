"""Regression cases: real XLA:CPU miscompilations present in jaxlib 0.10.2, in case-module format
(``program``, ``inputs``, ``expected``, ``KIND``, ``FAULTY_CONFIG``, ``ALSO_OP_BY_OP``)."""
