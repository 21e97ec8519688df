"""Scores plus a mask term -1e30 * (1 - mask) (here -0.0), minus their max: under
xla_cpu_enable_fast_math=true reassociation returns the raw scores. Right with default options."""
import numpy as np

KIND = "reduce_max"
FAULTY_CONFIG = "xla:fastmath"
#: Releases measured to compute it wrongly (benchmarks/release_matrix.py; 0.4.13 from the shared
#: cases' table).
FAILS_ON = ("0.4.13", "0.4.28", "0.7.2", "0.10.1", "0.10.2", "0.11.2", "0.12.0.1")
ALSO_OP_BY_OP = False


def program(mask, scores):
    masked = scores + (-1.0 * 1e30 * (1.0 - mask))
    return masked - masked.max()


def inputs():
    return np.float32(1.0), np.array([0.9, 0.6], np.float32)


def expected():
    return (np.array([0.0, 0.6 - 0.9], np.float32),)
