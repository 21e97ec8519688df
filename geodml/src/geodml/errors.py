"""Errors geodml raises for bad input; the CLI turns them into one line on stderr and exit 2."""


class GeodmlError(ValueError):
    """Bad user input: unknown name, malformed spec or file, impossible configuration."""


class SovereigntyError(GeodmlError):
    """An operation would move a sovereign data center's raw rows out of its region."""
