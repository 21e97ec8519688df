"""The Ray backend and seed shards: a campaign on a local Ray cluster stores what the local pool
stores, survives a compiler abort and a killed Ray actor, and a shard reruns alone identically.

Ray is started here (``ray.init(num_cpus=2)``, one cluster for the module) and shut down after.
"""

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from xlaprobe.backends import check_backend, make_pool
from xlaprobe.campaign import Campaign, CampaignState, parse_shard
from xlaprobe.errors import InvalidArgument
from xlaprobe.program import Program, Provenance
from tests.stored import stored_findings

MUTANT = ["xla", "reference", "mutant:swap-subtract-fused"]
CRASH = ["xla", "reference", "mutant:crash-on-sort"]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()



def _checked(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(n for (n,) in conn.execute("SELECT name FROM programs"))


def _campaign(db: Path, configs: list[str], programs: int, **kwargs) -> Campaign:
    campaign = Campaign(db, configs, **kwargs)
    try:
        campaign.run(600.0, max_programs=programs)
    finally:
        campaign.close()
    return campaign


# -- bad input and seed shards (no Ray needed) -----------------------------------------------------

def test_backend_bad_input_is_one_line(monkeypatch):
    with pytest.raises(InvalidArgument, match="--backend must be one of local, ray"):
        check_backend("dask")
    with pytest.raises(InvalidArgument, match="use it with --backend ray"):
        make_pool("local", address="127.0.0.1:6379")
    with pytest.raises(InvalidArgument, match="must be HOST:PORT"):
        check_backend("ray", "nowhere")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(InvalidArgument, match=r"pip install 'xlaprobe\[ray\]'"):
        check_backend("ray")


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, list[str]]:
    from xlaprobe.cli import main
    monkeypatch.setattr(sys, "argv", ["xlaprobe", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err.strip().splitlines()


def test_cli_refuses_ray_when_missing_or_unreachable(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "f.db")
    pytest.importorskip("ray")
    assert _cli(monkeypatch, capsys, "fuzz", "--time", "5s", "--db", db, "--backend", "ray",
                "--address", "127.0.0.1:1") == (2, [
        "xlaprobe: error: cannot reach a Ray cluster at 127.0.0.1:1 (Connection refused); start one with "
        "`ray start --head` or drop --address to run a local one"])
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    assert _cli(monkeypatch, capsys, "fuzz", "--time", "5s", "--db", db, "--backend", "ray") == (
        2, ["xlaprobe: error: --backend ray needs Ray, which is not installed here: pip install "
            "'xlaprobe[ray]'"])
    assert not (tmp_path / "f.db").exists()  # refused before the store or a campaign was made


def test_shards_partition_the_seeds():
    assert parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "-1/2", "1", "a/b", "1/0"):
        with pytest.raises(InvalidArgument, match="--shard must be I/N"):
            parse_shard(bad)
    seen = []
    for index in range(3):
        state = CampaignState(1, ("xla",), 10, 10, shard=(index, 3))
        mine = [s for s in range(10, 22) if not state.is_done(s)]
        assert mine == list(range(10 + index, 22, 3))
        for seed in reversed(mine[:3]):  # out of order, as programs complete
            state.mark_done(seed)
        assert state.next_seed == mine[3]  # skips the other shards' seeds
        restored = CampaignState.from_row((1, "xla", 10, state.next_seed,
                                           json.dumps(state.to_json())))
        assert restored.shard == (index, 3) and restored.next_seed == state.next_seed
        seen += mine
    assert sorted(seen) == list(range(10, 22))


# -- on Ray --------------------------------------------------------------------------------------

def _subtract_program(seed: int) -> Program:
    """One structure (so one fingerprint) that the planted mutant miscompiles; inputs vary."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    return Program.from_function(lambda a, b: (a - b) * 2.0 + 1.0, (x, y),
                                 Provenance("fuzz", f"fuzz:{seed}", seed))


# Slow: Ray's start and two actors' warm-up are ~30 s on an idle 2-core machine, and ray is an
# optional extra (pip install 'xlaprobe[ray]'; run with -m slow).
@pytest.mark.slow
def test_ray_campaign_stores_what_the_local_pool_stores(ray_cluster, tmp_path):
    """The planted mutant is found on both programs, and the Ray campaign stores exactly the
    findings (fingerprints included) and verdicts of the local pool."""
    local = _campaign(tmp_path / "local.db", MUTANT, 2, seed=3, jobs=1, source=_subtract_program)
    on_ray = _campaign(tmp_path / "ray.db", MUTANT, 2, seed=3, jobs=1, backend="ray",
                       source=_subtract_program)
    found = stored_findings(tmp_path / "local.db")
    assert [(name, config, kind) for name, config, kind, _ in found] == [
        ("fuzz:3", "mutant:swap-subtract-fused", "mismatch"),
        ("fuzz:4", "mutant:swap-subtract-fused", "mismatch")]
    assert stored_findings(tmp_path / "ray.db") == found
    assert on_ray.last_summary.verdicts == local.last_summary.verdicts
    stats = on_ray.pool_stats
    # 7 runs per program (3 configurations + 4 honest runs) and, after each numeric finding, the
    # freedom evidence run reference:fma.
    assert (stats.workers_started, stats.tasks, stats.crashes) == (1, 2 * 7 + 2, 0)
    with pytest.raises(InvalidArgument, match="--jobs 3 needs 3 CPUs of the Ray cluster, which "
                       "has 2"):
        make_pool("ray", 3)


@pytest.mark.slow
def test_ray_campaign_of_generated_programs_matches_the_local_pool(ray_cluster, tmp_path):
    """Generated programs, two actors: the same stored findings and verdicts as the local pool."""
    local = _campaign(tmp_path / "local.db", MUTANT, 4, seed=0, jobs=2)
    on_ray = _campaign(tmp_path / "ray.db", MUTANT, 4, seed=0, jobs=2, backend="ray")
    assert stored_findings(tmp_path / "ray.db") == stored_findings(tmp_path / "local.db")
    assert on_ray.last_summary.verdicts == local.last_summary.verdicts
    assert _checked(tmp_path / "ray.db") == [f"fuzz:{s}" for s in range(4)]


def _actor_pids() -> list[int]:
    """Process ids of this user's live Ray actors hosting xlaprobe workers."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    if file.read().startswith(b"ray::NodeWorker") and \
                            os.stat(f"/proc/{entry}").st_uid == os.getuid():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def _sort_on_odd_seeds(seed: int) -> Program:
    """A program with a live sort on odd seeds (``mutant:crash-on-sort`` aborts on it), without
    one on even seeds."""
    import jax.numpy as jnp

    x = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    body = (lambda a: jnp.sort(a) * 2.0) if seed % 2 else (lambda a: a * 2.0 + 1.0)
    return Program.from_function(body, (x,), Provenance("fuzz", f"fuzz:{seed}", seed))


@pytest.mark.slow
def test_ray_campaign_survives_a_compiler_abort_and_a_killed_actor(ray_cluster, tmp_path):
    """Seeds 25 and 27 have a sort: the planted compiler abort kills their worker (a crash
    finding each); an actor killed after the first program is replaced; all 4 programs land."""
    db = tmp_path / "ray.db"
    killed = []

    def kill_an_actor(seed, program, result):
        if not killed:
            pids = _actor_pids()
            assert pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    campaign = Campaign(db, CRASH, seed=24, jobs=2, backend="ray", source=_sort_on_odd_seeds)
    try:
        summary = campaign.run(600.0, max_programs=4, on_program=kill_an_actor)
    finally:
        campaign.close()
    assert summary.programs == 4 and summary.status == "done"
    assert _checked(db) == ["fuzz:24", "fuzz:25", "fuzz:26", "fuzz:27"]
    crashes = [(name, config, kind) for name, config, kind, _ in stored_findings(db)]
    assert crashes == [("fuzz:25", "mutant:crash-on-sort", "crash"),
                       ("fuzz:27", "mutant:crash-on-sort", "crash")]
    assert campaign.pool_stats.crashes == 2
    assert campaign.pool_stats.workers_started >= 3  # the killed actor was replaced
    assert killed and killed[0] not in _actor_pids()


@pytest.mark.slow
def test_shards_rerun_alone_with_identicalstored_findings(ray_cluster, tmp_path):
    """Seeds 0..5 in one campaign (local pool) = shards 0/2 and 1/2 of them on Ray; shard 1/2
    rerun alone in a fresh store finds exactly what it found before."""
    whole = _campaign(tmp_path / "whole.db", MUTANT, 6, seed=0, jobs=1)
    assert whole.state.next_seed == 6
    shard_dbs = []
    for index in (0, 1):
        db = tmp_path / f"shard{index}.db"
        _campaign(db, MUTANT, 3, seed=0, jobs=2, backend="ray", shard=(index, 2))
        assert _checked(db) == [f"fuzz:{s}" for s in range(index, 6, 2)]
        shard_dbs.append(db)
    found = stored_findings(tmp_path / "whole.db")
    assert found and sorted(stored_findings(shard_dbs[0]) + stored_findings(shard_dbs[1])) == found
    _campaign(tmp_path / "again.db", MUTANT, 3, seed=0, jobs=2, backend="ray", shard=(1, 2))
    assert stored_findings(tmp_path / "again.db") == stored_findings(shard_dbs[1])


@pytest.mark.slow
def test_tune_measures_and_guards_on_ray(ray_cluster, tmp_path):
    """`tune --backend ray`: timing runs on an actor's worker (recycled into a fresh process on
    request) and the numerics guard rejects the planted miscompile, as with the local pool."""
    from xlaprobe.ray_pool import RayPool
    from xlaprobe.store import Store
    from xlaprobe.tune.measure import Protocol, measure
    from xlaprobe.tune.search import tune, tune_target
    from xlaprobe.tune.space import SearchSpace

    quick = Protocol(min_rounds=3, max_rounds=4, sample_s=0.002)
    target = tune_target(f"{Path(__file__).parent / 'data' / 'tune_target.py'}:step")
    with RayPool(size=1, timeout_s=300) as pool, Store(tmp_path / "t.db") as store:
        first = measure(pool, target.build({}), {}, {}, protocol=quick)[0]
        assert first is not None and first.rounds >= quick.min_rounds
        pool.recycle("tune")
        again = measure(pool, target.build({}), {}, {}, protocol=quick)[0]
        assert again.pid != first.pid  # a fresh worker process on the actor's node
        space = SearchSpace.for_program(target.knobs, only=["mutant"], plant="swap-subtract-fused")
        result = tune(target, pool, store, strategy="random", budget=1, space=space,
                      protocol=quick, name="guarded")
        assert result.findings == (("mutant=swap-subtract-fused", "mismatch"),)
        assert [(f["config"], f["kind"]) for f in store.findings()] == [
            ("mutant:swap-subtract-fused", "mismatch")]


@pytest.mark.slow
def test_localize_on_ray_names_what_the_local_pool_names(ray_cluster, tmp_path, capsys):
    """`localize --backend ray --jobs 2`: the tiers compile on actors, the pass search tests two
    subsets at a time; the answer is the local one (the real case's fusion pass)."""
    from tests.cases import ROOT, load_present
    from xlaprobe.cli.localize import localize_command

    load_present("dus_shifted_self_update")
    code = localize_command(str(ROOT / "dus_shifted_self_update.py"), "", db=tmp_path / "l.db",
                            json_output=True, jobs=2, backend="ray")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["equation"]["primitive"] == "dynamic_update_slice"
    assert data["pass"]["compiler_pass"] == "fusion" and data["pass"]["disabled"] == ["fusion"]
