"""A finding without an artifact names a command that checks its program again: a fuzz program
is the target ``fuzz:SEED`` (regenerated from its seed), a name that is no target says so."""

import numpy as np
import pytest

from xlaprobe.checking import judge
from xlaprobe.errors import InvalidArgument
from xlaprobe.outcome import Outcome, OutcomeKind
from xlaprobe.program import Program, Provenance
from xlaprobe.sources.generator import generate
from xlaprobe.sources.targets import TargetKind, parse_target, resolve, resolve_finding
from xlaprobe.store import Store


def _stored_wrong(tmp_path, name):
    """A store holding one xla finding (2x where x was right) of a program named `name`, stored
    without its artifact."""
    program = Program.from_function(lambda x: x * 2, (np.arange(3, dtype=np.float32),),
                                    Provenance("fuzz", name, 7))
    outcomes = [Outcome("xla", OutcomeKind.RAN, (np.arange(3) * 4.0,)),
                Outcome("reference", OutcomeKind.RAN, (np.arange(3) * 2.0,))]
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.record_check(judge(program, ["xla", "reference"], outcomes))
        (finding,) = store.stored_findings()
    return db, finding.id


def test_fuzz_finding_hint_is_a_command_that_works(tmp_path):
    db, finding_id = _stored_wrong(tmp_path, "fuzz:7")
    with pytest.raises(InvalidArgument) as err:
        resolve_finding(str(finding_id), "", db)
    assert "rerun xlaprobe check fuzz:7 --configs xla,reference" in str(err.value)
    target = resolve("fuzz:7")  # the hint's target: the generator's program of seed 7
    assert parse_target("fuzz:7").kind is TargetKind.FUZZ
    assert str(target.program.jaxpr) == str(generate(7).jaxpr)
    assert target.program.provenance.name == "fuzz:7"


def test_steered_finding_hint_names_no_command(tmp_path):
    db, finding_id = _stored_wrong(tmp_path, "steer:7:mutate")
    with pytest.raises(InvalidArgument) as err:
        resolve_finding(str(finding_id), "", db)
    assert "xlaprobe check" not in str(err.value)
    assert "steer:7:mutate names no target to check again" in str(err.value)


@pytest.mark.parametrize("text", ["fuzz:", "fuzz:x", "fuzz:-1", "fuzz:99999999999999999999",
                                  "fuzz:\u0661",  # an Arabic-Indic 1, which \d matches
                                  f"fuzz:{2 ** 62 + 1}"])
def test_a_malformed_or_too_large_fuzz_seed_is_refused_before_any_run(text):
    # A seed beyond 2**62 once ran a whole check and then crashed storing it (SQLite integer).
    with pytest.raises(InvalidArgument, match="give fuzz:SEED with a seed from 0 to "):
        parse_target(text)
    assert parse_target(f"fuzz:{2 ** 62}").text == f"fuzz:{2 ** 62}"


def test_a_steered_program_name_as_a_target_says_why_it_is_none():
    with pytest.raises(InvalidArgument, match="names a steered program .* no seed regenerates"):
        parse_target("steer:12:special")
