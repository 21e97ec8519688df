"""Errors that the command line reports as one line on stderr with exit code 2."""


class InputError(ValueError):
    """Bad input: unknown name, malformed spec, file or trace. The message is one line."""
