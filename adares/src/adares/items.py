"""Comma-separated lists of the command line (--policies, --targets, --sweep-margin): one parser,
so all of them refuse the same things."""

from __future__ import annotations

from adares.errors import InputError


def split_items(spec: str, what: str) -> list[str]:
    """The items of a comma-separated ``spec``, blanks stripped; ``[]`` for a blank ``spec``.

    Args:
        spec: what the user wrote, e.g. ``"static,vpa"``.
        what: the option, for the message (``"--policies"``).

    Raises:
        InputError: an empty item (``static,,vpa``, ``1.5,``): a lost item is likelier than a
            stray comma, and skipping it would run something other than what was asked.
    """
    if not spec.strip():
        return []
    items = [s.strip() for s in spec.split(",")]
    if "" in items:
        raise InputError(f"{what} {spec!r}: an empty item (two commas, or a comma at an end)")
    return items
