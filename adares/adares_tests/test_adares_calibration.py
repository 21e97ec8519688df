"""The population generator's fitted calibration against the published per-VM statistics it
was fitted to (``adares.calibration``): each statistic within its stated tolerance on seeds
the fit never saw, and the frozen file is what the spec loads."""

import json

import numpy as np
import pytest

from adares import calibration as cal
from adares.errors import InputError
from adares.population import generate_population
from adares.replay import load_trace, population_calibration


@pytest.fixture(scope="module")
def targets():
    return cal.targets()


def test_the_targets_say_where_they_come_from(targets):
    assert "SOSP 2017" in targets["source"] and "AzurePublicDataset" in targets["source"]
    for k in ("avg_cpu_cdf", "p95_cpu_cdf"):
        cdf = targets[k]["cdf"]
        assert cdf == sorted(cdf) and 0 < cdf[0] and cdf[-1] <= 1
    assert sum(targets["cores_share"]["share"]) == pytest.approx(1.0, abs=0.01)
    assert sum(targets["memory_share"]["share"]) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("seed", [11, 12])
def test_the_fitted_generator_reproduces_each_statistic(targets, seed):
    # Seeds the fit never used (it used seed 0), 1000 VMs over a day.
    got = cal.statistics(1000, 1.0, seed, cal.fitted(), targets)
    want = cal.target_values(targets)
    for k, tol in cal.TOLERANCE.items():
        diff = np.abs(np.asarray(got[k]) - np.asarray(want[k]))
        assert np.all(diff <= tol), (k, got[k], want[k])


def test_the_fit_improves_on_the_hand_chosen_calibration(targets):
    frozen = json.loads((cal.Path(cal.__file__).parent / "data" / cal.FITTED_FILE).read_text())
    hand = cal.loss(cal.theta_of(cal.CALIBRATION), targets, 1000, 1.0, 0)
    assert frozen["loss"] < hand / 5


def test_the_spec_names_the_calibration():
    fitted = load_trace("population:vms=30,days=1,seed=2,calibration=fitted")
    direct = generate_population(30, 1.0, 2, calibration=cal.fitted())
    np.testing.assert_array_equal(fitted.cpu, direct.cpu)
    hand = load_trace("population:vms=30,days=1,seed=2")
    np.testing.assert_array_equal(hand.cpu, generate_population(30, 1.0, 2).cpu)
    assert population_calibration("population:calibration=hand") is None
    with pytest.raises(InputError, match="unknown calibration 'azure'"):
        population_calibration("population:vms=3,calibration=azure")
