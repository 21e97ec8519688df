"""NHWC float32 convolution with a 1x1 identity kernel and width padding (-5, 1): the output is
input column 5 then a zero column; XLA:CPU reads neighbouring data instead. Op by op too."""
import numpy as np
from jax import lax

KIND = "conv_general_dilated"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.13", "0.4.28", "0.4.33", "0.5.3", "0.6.2", "0.7.2", "0.10.1", "0.10.2", "0.11.2")
ALSO_OP_BY_OP = True
HEIGHT, WIDTH, CHANNELS = 15, 6, 8


def program(image, kernel):
    dimension_numbers = lax.ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1),
                                                 out_spec=(0, 3, 1, 2))
    return lax.conv_general_dilated(image, kernel, window_strides=(1, 1),
                                    padding=((0, 0), (-5, 1)), dimension_numbers=dimension_numbers)


def inputs():
    h, w, c = np.meshgrid(np.arange(HEIGHT), np.arange(WIDTH), np.arange(CHANNELS), indexing="ij")
    image = (1000 * h + 10 * w + c).astype(np.float32)[None]   # f32[1, 15, 6, 8], value encodes (h, w, c)
    kernel = np.eye(CHANNELS, dtype=np.float32).reshape(1, 1, CHANNELS, CHANNELS)
    return image, kernel


def expected():
    image, _ = inputs()
    out = np.zeros((1, HEIGHT, 2, CHANNELS), np.float32)
    out[:, :, 0, :] = image[:, :, 5, :]     # cropping 5 columns leaves column 5; the pad adds zeros
    return (out,)
