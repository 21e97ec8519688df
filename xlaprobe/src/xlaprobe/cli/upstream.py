"""``xlaprobe upstream ID``: a ready-to-file upstream issue for a finding."""

from __future__ import annotations

import sys
from pathlib import Path

from xlaprobe.cli.paths import check_out_file, write_text_atomic
from xlaprobe.upstream import draft, gather, to_json_text


def upstream_command(finding_id: int, *, out: Path | None, db: Path, run: bool,
                     json_output: bool) -> int:
    """Print (or, with `out`, write) the Markdown issue of finding `finding_id`.

    Returns:
        Exit code: 0 when the reproducer shows the fault (exit 1) or was not run; 1 when it ran
        and did not show it (the draft is still printed or written, with its output).

    Raises:
        InvalidArgument: `out` is a directory or in a missing folder, or cannot be written; no
            store, no such finding, no artifact or reference to draft from.
    """
    if out is not None:
        check_out_file(out, example=f"finding-{finding_id}.md")
    report = draft(gather(db, finding_id), run=run)
    if out is not None:
        write_text_atomic(out, report.markdown)
    if json_output:
        print(to_json_text(report))
    elif out is None:
        print(report.markdown)
    else:
        print(f"wrote {out}: {report.title} (for {report.repository})")
    if report.repro_exit is not None and report.repro_exit != 1:
        print(f"warning: the reproducer exited {report.repro_exit} here, not 1: it does not show "
              "the fault on this machine", file=sys.stderr)
        return 1
    return 0
