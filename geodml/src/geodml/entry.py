"""The console script ``geodml``: imports the CLI inside a handler so that Ctrl-C during the
second of start-up imports also exits 130 with one line instead of a traceback."""

import sys


def main() -> None:
    """Run geodml.cli.main; Ctrl-C while importing it prints one line and exits 130."""
    try:
        from geodml.cli import main as cli_main
    except KeyboardInterrupt:
        print("geodml: interrupted", file=sys.stderr)
        sys.exit(130)
    cli_main()
