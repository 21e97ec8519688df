"""Configuration specs: parsing, round-trips, and one-line errors for bad input."""

import pytest
from hypothesis import given, strategies as st

from xlaprobe.configs.registry import Configuration, parse_configs
from xlaprobe.errors import InvalidArgument


@pytest.mark.parametrize("spec", ["xla", "xla:O0", "xla:fastmath", "eager", "reference",
                                  "reference:native", "xla[xla_cpu_enable_fast_math=true]"])
def test_round_trip(spec):
    config = Configuration.parse(spec)
    assert str(config) == spec
    assert Configuration.parse(str(config)) == config


def test_options_are_sorted_and_list_split_respects_brackets():
    configs = parse_configs("xla[xla_cpu_enable_fast_math=true,xla_backend_optimization_level=1],eager")
    assert [str(c) for c in configs] == [
        "xla[xla_backend_optimization_level=1,xla_cpu_enable_fast_math=true]", "eager"]
    assert configs[0].options == (("xla_backend_optimization_level", "1"),
                                  ("xla_cpu_enable_fast_math", "true"))


@pytest.mark.parametrize("bad, words", [
    ("", "empty"),
    ("xla[", "unbalanced"),
    ("xla]", "unbalanced"),
    ("nosuchkind", "unknown configuration kind"),
    ("xla[fast]", "malformed option"),
    ("xla[a=1,a=2]", "twice"),
    ("xla,xla", "twice"),
    ("xla,,eager", "an empty item in configuration list 'xla,,eager'"),
    ("xla, ,eager", "an empty item"),
    ("xla,", "an empty item"),
    (",", "empty configuration list"),
    ("XLA!", "malformed configuration"),
    ("eager[xla_cpu_enable_fast_math=true]", "eager"),
])
def test_bad_specs_raise_one_line(bad, words):
    with pytest.raises(InvalidArgument) as info:
        parse_configs(bad)
    message = str(info.value)
    assert words in message and "\n" not in message


_BOOL = st.sampled_from(["true", "false"])
_OPTIONS = st.fixed_dictionaries({}, optional={
    "xla_cpu_enable_fast_math": _BOOL, "xla_cpu_fast_math_honor_nans": _BOOL,
    "xla_cpu_fast_math_honor_infs": _BOOL,
    "xla_backend_optimization_level": st.integers(0, 3).map(str)})


@given(_OPTIONS.filter(bool), st.sampled_from([None, "O0", "fastmath"]))
def test_round_trip_property(options, variant):
    config = Configuration("xla", variant, tuple(sorted(options.items())))
    assert Configuration.parse(str(config)) == config
