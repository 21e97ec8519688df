"""adares: contextual-bandit rightsizing of VMs and containers on replayed traces."""

__version__ = "0.1.0"
