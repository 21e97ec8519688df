"""thesios: full-rate disk I/O traces from sparse samples of many disks (Thesios, ASPLOS 2024)."""

__version__ = "0.1.0"
