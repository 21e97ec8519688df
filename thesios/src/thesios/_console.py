"""The ``thesios`` console script: Ctrl-C while the libraries still import is exit 130 too."""

from __future__ import annotations

import sys


def main() -> None:
    """Import the CLI (numpy, pyarrow, scipy: seconds on a loaded machine) and run it.

    Ctrl-C during the import prints one line and exits with code 130, without a traceback;
    once imported, :func:`thesios.cli.main` handles it the same way.
    """
    try:
        from thesios.cli import main as cli_main
    except KeyboardInterrupt:
        print("thesios: interrupted", file=sys.stderr)
        sys.exit(130)
    cli_main()
