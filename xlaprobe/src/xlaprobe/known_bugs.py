"""Bugs already known, by the triage key a campaign gives them, so a hunt counts new ones apart.

A fuzz campaign keys each numeric finding by its first wrong intermediate
(`xlaprobe.localization.first_wrong`: `xlaprobe.triage.localized_key` of that primitive and its
result dtype class), crashes and rejections by their fingerprint. A known bug's key is the key its
regression case gets the same way (measured on the case; `KNOWN_BUGS`).

The key is as coarse as the campaign's: a new bug in float ``log`` counts as known (the key of
log(rsqrt(-0))). A hunt's "new" bugs are therefore a lower bound of what it found that is new;
each still gets triaged by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from xlaprobe.triage import localized_key


@dataclasses.dataclass(frozen=True)
class KnownBug:
    """One known bug.

    Attributes:
        case: its regression case, relative to ``xlaprobe/tests`` (``cases/cbrt_subnormal.py``).
        primitive: the jaxpr primitive of its first wrong intermediate, as
            `xlaprobe.localization.first_wrong` names it on the case (not always the case's
            KIND: int8 square-select-abs goes wrong first at ``lt``); ``""`` where it names none.
        dtypes: that equation's result dtype classes (`xlaprobe.triage.result_dtypes`).
        fingerprint: the finding's fingerprint, the campaign's key where no first wrong
            intermediate is named (crashes, rejections, faults that exposing hides).
    """

    case: str
    primitive: str = ""
    dtypes: tuple[str, ...] = ()
    fingerprint: str = ""

    @property
    def key(self) -> str:
        """The campaign's bug key of it (16 hex digits)."""
        return localized_key(self.primitive, self.dtypes) if self.primitive else self.fingerprint


#: The bugs of ``tests/cases`` and ``tests/fuzz_cases``, keyed as measured on each case under the
#: release it fails on (``tests/test_known_bugs.py`` re-measures those that fail on the installed
#: one); all but fastmath_masked_max, a fault of ``xla:fastmath`` keyed as a float ``sub`` (it
#: would hide new subtraction bugs of ``xla``). Cases the installed release fixed stay: a campaign
#: that meets one has met a regression, and it is still no new bug.
KNOWN_BUGS = (
    KnownBug("cases/cbrt_subnormal.py", "cbrt", ("float",)),
    KnownBug("cases/conv_negative_padding.py", "conv_general_dilated", ("float",)),
    KnownBug("cases/dus_shifted_self_update.py", fingerprint="36e71e1a25f03bfd"),
    KnownBug("cases/int8_square_select_abs.py", "lt", ("bool",)),
    KnownBug("cases/scatter_narrow_index_dtype.py", "scatter-add", ("int",)),
    KnownBug("cases/while_loop_skipped.py", "while", ("int", "int")),
    KnownBug("fuzz_cases/clamp_bool_in_while.py", fingerprint="b09609d5f7fd23b7"),
    KnownBug("fuzz_cases/conv_negative_padding_lhs_dilation.py", "clamp", ("float",)),
    KnownBug("fuzz_cases/dot_bf16_f32_unimplemented.py", fingerprint="d6f496f626a047b0"),
    KnownBug("fuzz_cases/exp2_narrow_float_ln2.py", "exp2", ("float",)),
    KnownBug("fuzz_cases/gather_of_clamped_dynamic_slice.py", "gather", ("float",)),
    KnownBug("fuzz_cases/log_rsqrt_negative_zero.py", "log", ("float",)),
    KnownBug("fuzz_cases/pow_subnormal_base.py", "pow", ("float",)),
    KnownBug("fuzz_cases/reduce_window_negative_padding_abort.py", fingerprint="a521216b9fee240e"),
    KnownBug("fuzz_cases/scatter_mul_int8_window.py", "scatter-mul", ("int",)),
    KnownBug("fuzz_cases/while_one_trip_skipped.py", "while", ("int", "int")),
)


def known_keys() -> dict[str, list[str]]:
    """Bug key -> the cases of the known bugs with that key."""
    keys: dict[str, list[str]] = {}
    for bug in KNOWN_BUGS:
        keys.setdefault(bug.key, []).append(bug.case)
    return keys


def split_bugs(fingerprints: Mapping[str, Any], bugs: Mapping[str, str],
               planted: Collection[str] = ()) -> dict[str, Any]:
    """A campaign's distinct bugs, known apart from new, and a planted mutant's findings apart
    from both.

    Args:
        fingerprints: the campaign's finding fingerprints (`CampaignState.fingerprints`; only
            the keys are read).
        bugs: fingerprint -> first-wrong bug key (``""`` or absent: the fingerprint is its own).
        planted: the fingerprints found under a planted fault (a ``mutant:NAME`` configuration,
            `xlaprobe.triage.planted_fault`): the mutant doing what it was built to do, never a
            bug of XLA, known or new.

    Returns:
        ``{"distinct": N, "known": [record], "new": [record], "mutant": [record]}``, each list
        sorted by key, every record of one shape: ``{"key": bug key, "cases": [regression
        cases of a known bug; [] for the others], "fingerprints": [its fingerprints]}``.
        ``distinct`` counts the known and new bugs (mutant findings are not bugs).

    >>> split = split_bugs({"aaaa": 1, "bbbb": 1}, {}, planted={"bbbb"})
    >>> split["distinct"], split["new"], [r["key"] for r in split["mutant"]]
    (1, [{'key': 'aaaa', 'cases': [], 'fingerprints': ['aaaa']}], ['bbbb'])
    """
    known = known_keys()

    def records(which: Collection[str]) -> list[dict[str, Any]]:
        grouped: dict[str, list[str]] = {}
        for fingerprint in which:
            grouped.setdefault(bugs.get(fingerprint) or fingerprint, []).append(fingerprint)
        return [{"key": key, "cases": known.get(key, []), "fingerprints": grouped[key]}
                for key in sorted(grouped)]

    real = records([f for f in fingerprints if f not in planted])
    return {"distinct": len(real),
            "known": [r for r in real if r["cases"]],
            "new": [r for r in real if not r["cases"]],
            "mutant": records([f for f in fingerprints if f in planted])}
