"""Comma-separated option values (``--releases``, ``tune-corpus PROGRAMS``): one rule for all.

An empty item (``a,,b``, ``a,``) or a repeated one is refused rather than dropped: both are typos
more often than wishes, and the configuration list (`configs.registry.parse_configs`) refuses them
the same way.
"""

from xlaprobe.errors import InvalidArgument


def split_items(text: str, what: str) -> list[str]:
    """The stripped items of a comma-separated list, in order.

    Args:
        text: the option's value, e.g. ``"0.4.33,0.5.3"``.
        what: the option's name for messages, e.g. ``"--releases"``.

    Returns:
        One string per item; ``[]`` when `text` is blank.

    Raises:
        InvalidArgument: an empty item in a non-blank list, or an item listed twice.

    >>> split_items(" 0.4.33, 0.5.3 ", "--releases")
    ['0.4.33', '0.5.3']
    >>> split_items("  ", "--releases")
    []
    """
    if not text.strip():
        return []
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise InvalidArgument(f"an empty item in {what} '{text}'")
    repeated = sorted({item for item in items if items.count(item) > 1})
    if repeated:
        raise InvalidArgument(f"{what} lists {repeated[0]!r} twice")
    return items
