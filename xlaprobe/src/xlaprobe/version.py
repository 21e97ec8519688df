"""xlaprobe's version (one place; pyproject.toml's ``version`` must equal it, tests check)."""

__version__ = "0.1.0"
