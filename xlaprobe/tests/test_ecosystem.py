"""The third-party zoo (`xlaprobe.sources.ecosystem`): its registry, its builds, and checks.

The default run checks two fast workloads (one needs only JAX, one Flax and optax); the whole
table, Keras and keras-hub included, is ``-m slow`` and skips a workload whose
library is not installed (the ``ecosystem`` extra, see the README)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from xlaprobe.checking import DEFAULT_CONFIGS, check_program
from xlaprobe.errors import InvalidArgument
from xlaprobe.sources import ecosystem, models

CONFIGS = DEFAULT_CONFIGS.split(",")


def test_registry_covers_the_libraries():
    zoo = ecosystem.ECOSYSTEM
    assert len(zoo) >= 15
    libraries = {spec.library for spec in zoo.values()}
    assert {"keras", "keras-hub", "equinox", "dm-haiku", "flax.linen", "flax.nnx", "optax", "jraph",
            "jax.scipy", "jax.random", "jax.scipy.optimize", "jax.experimental.ode",
            "jax.numpy.linalg", "jax.numpy.fft"} <= libraries
    assert not set(zoo) & set(models.MODELS)
    for name, spec in zoo.items():
        assert spec.name == name and spec.kind in ("train_step", "forward")
        assert spec.description and "\n" not in spec.description
        assert models.get_model(name) is spec and models.zoo()[name] is spec
        assert spec.library in ecosystem.REQUIRES or spec.library.startswith("jax")
    assert all(spec.library == "xlaprobe" for spec in models.MODELS.values())


def test_missing_library_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "jraph", None)  # import jraph now raises ImportError
    ecosystem._jraph_gnn.cache_clear()
    try:
        with pytest.raises(InvalidArgument, match=r"needs jraph .*xlaprobe\[ecosystem\]"):
            models.build_program("jraph_gnn")
    finally:
        ecosystem._jraph_gnn.cache_clear()


def test_models_lists_libraries():
    import json

    from typer.testing import CliRunner

    from xlaprobe.cli.commands import app
    run = CliRunner().invoke(app, ["models", "--json"])
    assert run.exit_code == 0, run.output
    listed = {m["name"]: m["library"] for m in json.loads(run.output)}
    assert listed["jax_fft"] == "jax.numpy.fft" and listed["transformer_lm"] == "xlaprobe"
    assert listed["keras_hub_gpt2"] == "keras-hub"  # listed without keras installed


def test_jax_fft_loss_is_the_numpy_spectral_layer():
    """Known answer: the workload's loss recomputed in float64 NumPy from its inputs."""
    import jax
    fn, (params, batch) = models.get_model("jax_fft").build(0)
    loss, new_params = jax.jit(fn)(params, batch)
    p = {k: np.float64(v) for k, v in params.items()}
    x = np.float64(batch["signal"])
    spec = np.fft.rfft(x, axis=-1)[..., :6]
    mixed = np.einsum("bcm,cdm->bdm", spec, p["w_re"] + 1j * p["w_im"])
    full = np.zeros(x.shape[:2] + (x.shape[-1] // 2 + 1,), complex)
    full[..., :6] = mixed
    y = np.fft.irfft(full, n=x.shape[-1], axis=-1) + np.einsum("bcl,cd->bdl", x, p["skip"])
    y = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))  # jax's gelu
    image = np.fft.fftshift(np.fft.fft2(np.float64(batch["image"])))
    filtered = np.fft.ifft2(np.fft.ifftshift(image / (1 + np.exp(-p["mask"]))))
    want = ((y - batch["target"]) ** 2).mean() + 0.01 * np.abs(filtered).mean()
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert set(new_params) == set(params)
    assert all(not np.array_equal(new_params[k], params[k]) for k in params)  # a real update


FLAX_MISSING = pytest.mark.skipif(bool(ecosystem.missing("flax_linen_cnn")),
                                  reason="flax/optax not installed (models extra)")


@pytest.mark.parametrize("name", ["jax_fft", pytest.param("flax_linen_cnn", marks=FLAX_MISSING)])
def test_fast_workloads_check_clean(pool, name):
    """Two of the table's fastest (JAX alone; Flax linen and optax), in the default run."""
    result = check_program(models.build_program(name), CONFIGS, pool)
    assert result.judged_against == "reference" and not result.incomplete
    assert not result.findings, [(f.config, f.kind.value, f.outputs[:3]) for f in result.findings]


def _table_params():
    params = []
    for name in ecosystem.ECOSYSTEM:
        gone = ecosystem.missing(name)
        marks = [pytest.mark.slow]
        if gone:
            marks.append(pytest.mark.skip(reason=f"{', '.join(gone)} not installed: pip install "
                                                 "'xlaprobe[ecosystem]' (keras-hub: see README)"))
        params.append(pytest.param(name, marks=marks))
    return params


@pytest.mark.parametrize("name", _table_params())
def test_zoo_table_checks_clean(pool, name):
    """The README's table: every workload clean under xla, xla:O0, eager and the reference."""
    result = check_program(models.build_program(name), CONFIGS, pool)
    assert result.judged_against == "reference" and not result.incomplete, result.incomplete
    assert not result.findings, [(f.config, f.kind.value, f.outputs[:3]) for f in result.findings]
