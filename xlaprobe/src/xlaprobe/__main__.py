"""``python -m xlaprobe``: the command line (as the ``xlaprobe`` script)."""

from xlaprobe.cli.commands import main

main()
