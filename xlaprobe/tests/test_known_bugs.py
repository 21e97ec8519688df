"""Known bugs are labelled by the key a campaign gives them: each table entry's key is the one its
regression case gets from the same first-wrong localization (re-measured here on the cases that
fail on the installed release), and a campaign's bugs split into known and new."""

import pathlib

import pytest

from xlaprobe.checking import check_program
from xlaprobe.known_bugs import KNOWN_BUGS, KnownBug, known_keys, split_bugs
from xlaprobe.localization.first_wrong import first_wrong_key
from xlaprobe.sources.user import load_case
from xlaprobe.triage import localized_key

TESTS = pathlib.Path(__file__).parent
#: Numeric cases that fail on jaxlib 0.12.0.1 under ``xla`` (the rest need an older release).
FAILING_HERE = ["fuzz_cases/log_rsqrt_negative_zero.py", "fuzz_cases/pow_subnormal_base.py",
                "cases/cbrt_subnormal.py", "fuzz_cases/conv_negative_padding_lhs_dilation.py",
                "fuzz_cases/exp2_narrow_float_ln2.py"]


def test_every_case_of_cases_and_fuzz_cases_is_in_the_table():
    cases = {f"{folder}/{p.name}" for folder in ("cases", "fuzz_cases")
             for p in (TESTS / folder).glob("[a-z]*.py")}
    # fastmath_masked_max is a fault of xla:fastmath only; its first wrong intermediate is a
    # float subtraction, a key that would hide every new float subtraction bug of plain xla.
    assert cases - {bug.case for bug in KNOWN_BUGS} == {"cases/fastmath_masked_max.py"}
    assert {bug.case for bug in KNOWN_BUGS} <= cases


@pytest.mark.parametrize("case", FAILING_HERE[:2])
def test_the_key_of_a_case_failing_here_is_the_tables(case, pool):
    _assert_key(case, pool)


@pytest.mark.slow
@pytest.mark.parametrize("case", FAILING_HERE[2:])
def test_the_key_of_a_case_failing_here_is_the_tables_slow(case, pool):
    _assert_key(case, pool)


def _assert_key(case, pool):
    program = load_case(str(TESTS / case)).program
    result = check_program(program, ["xla", "reference"], pool)
    [finding] = result.findings
    key = first_wrong_key(program, "xla", result, pool)
    assert key == next(b.key for b in KNOWN_BUGS if b.case == case)


def test_bugs_split_into_known_and_new_by_key():
    log_key = localized_key("log", ["float32"])
    fingerprints = {"aaaa": 1, "bbbb": 1, "cccc": 1, "dddd": 1}
    bugs = {"aaaa": log_key, "bbbb": log_key, "cccc": localized_key("sinh", ["bfloat16"])}
    split = split_bugs(fingerprints, bugs)
    assert split["distinct"] == 3  # aaaa and bbbb are one bug; dddd (no key) its own
    assert split["known"] == [{"key": log_key, "cases": ["fuzz_cases/log_rsqrt_negative_zero.py"],
                               "fingerprints": ["aaaa", "bbbb"]}]
    assert [r["key"] for r in split["new"]] == sorted([bugs["cccc"], "dddd"])
    assert all(r["cases"] == [] for r in split["new"]) and split["mutant"] == []
    # A planted mutant's findings are counted apart: never a new bug, even under a new key.
    planted = split_bugs(fingerprints | {"eeee": 1}, bugs, planted={"dddd", "eeee"})
    assert planted["distinct"] == 2 and [r["key"] for r in planted["new"]] == [bugs["cccc"]]
    assert [r["fingerprints"] for r in planted["mutant"]] == [["dddd"], ["eeee"]]
    crash = KnownBug("x.py", fingerprint="0123456789abcdef")
    assert crash.key == "0123456789abcdef" and len(known_keys()) <= len(KNOWN_BUGS)
