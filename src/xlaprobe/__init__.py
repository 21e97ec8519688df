"""xlaprobe: differential checking of ML compilers (XLA driven from JAX).

The data flows one way: sources -> Program -> configurations (in isolated workers) -> oracle ->
findings -> store/report. See README.md for the command line.
"""

__version__ = "0.1.0"
