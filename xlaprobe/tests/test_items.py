"""Comma-separated option values: an empty or repeated item is refused, not dropped."""

import pytest

from xlaprobe.errors import InvalidArgument
from xlaprobe.items import split_items
from xlaprobe.releases.program import parse_releases


def test_items_are_stripped_in_order():
    assert split_items(" b, a ,c", "--x") == ["b", "a", "c"]
    assert split_items("", "--x") == [] and split_items(" ", "--x") == []


@pytest.mark.parametrize("text, message", [
    ("a,,b", "an empty item in --x 'a,,b'"),
    ("a,", "an empty item in --x 'a,'"),
    (" , ", "an empty item in --x ' , '"),
    ("a,b,a", "--x lists 'a' twice"),
])
def test_empty_and_repeated_items_are_refused(text, message):
    with pytest.raises(InvalidArgument) as info:
        split_items(text, "--x")
    assert str(info.value) == message


def test_release_lists_follow_the_rule():
    assert parse_releases("0.4.33, 0.5.3") == ["0.4.33", "0.5.3"]
    with pytest.raises(InvalidArgument, match="an empty item in --releases"):
        parse_releases("0.4.33,,0.4.35")  # ran a bisection over three releases before
    with pytest.raises(InvalidArgument, match="lists '0.4.33' twice"):
        parse_releases("0.4.33,0.4.33")
    with pytest.raises(InvalidArgument, match="empty --releases list"):
        parse_releases("")
