"""What a store holds, read with plain SQL for tests that compare stores (shards against one
campaign, a merge against its sources, Ray against the local pool)."""

import sqlite3
from pathlib import Path


def stored_findings(db: Path) -> list[tuple]:
    """(program name, configuration, kind, fingerprint) of every finding stored in `db`, sorted."""
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(
            "SELECT p.name, f.config, f.kind, f.fingerprint FROM findings f "
            "JOIN checks c ON c.id = f.check_id JOIN programs p ON p.id = c.program_id"))
