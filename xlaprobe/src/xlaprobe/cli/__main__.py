"""``python -m xlaprobe.cli``."""

from xlaprobe.cli.commands import main

main()
