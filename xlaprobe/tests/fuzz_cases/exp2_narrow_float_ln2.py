"""exp2 of bfloat16 (and float16) inputs: JAX lowers lax.exp2 to exp(ln2 * x) with the constant
ln2 rounded to the input's dtype (bfloat16 0.69140625, 0.25% low), so the error grows with |x|:
exp2(10) is 1000 instead of 1024 (an exact power of two, 3 bfloat16 ULPs off), exp2(88.5) is
3.99e26 instead of 4.38e26 (9% low), exp2(-87.5) 5.30e-27 instead of 4.57e-27; float16's ln2
(0.6933594) gives exp2(10) = 1026. float32 is right. jit and op by op alike (the lowering, not an
XLA pass: jax/_src/lax/lax.py ``_exp2_lower``). Found by `xlaprobe fuzz --steer coverage` on
jaxlib 0.12.0.1: a special-value re-run (inputs log(max) and log(tiny) of bfloat16) of a
steered program exp2(x) in bfloat16, reduced by hand."""
import ml_dtypes
import numpy as np
from jax import lax

KIND = "exp2"
FAULTY_CONFIG = "xla"
#: Releases measured to compute it wrongly: the newest of each minor line from 0.4.26, and 0.12.0.1
#: (no release fixed it).
FAILS_ON = ("0.4.26", "0.4.38", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")


def program(x):
    return lax.exp2(x)


def inputs():
    return (np.array([10.0, 7.0, 88.5, -87.5, 1.0, 0.5], ml_dtypes.bfloat16),)


def expected():
    x = inputs()[0].astype(np.float64)
    return (np.exp2(x).astype(ml_dtypes.bfloat16),)
