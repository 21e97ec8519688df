"""VM lifetimes (adares.lifetimes): the frozen Azure table is what the sampler draws from, and
the arrivals of a steady-state cluster follow from it."""

import numpy as np

from adares.lifetimes import arrival_mask, azure_lifetime_table, sample_lifetimes


def test_sampled_lifetimes_follow_the_table():
    hours, cdf = azure_lifetime_table()
    s = sample_lifetimes(np.random.default_rng(0), 200_000)
    for h, c in zip(hours[1:-1], cdf[1:-1]):
        assert abs((s <= h).mean() - c) < 0.005, h
    assert s.min() >= hours[0] - 1e-9 and s.max() <= hours[-1] + 1e-9


def test_arrivals_are_a_renewal_process_in_steady_state():
    t_steps, n = 2304, 2000
    m = arrival_mask(t_steps, n, seed=0)
    assert m.shape == (t_steps, n) and m.dtype == bool and not m[0].any()
    assert np.array_equal(m, arrival_mask(t_steps, n, seed=0))
    # Renewal theory: the long-run arrival rate per slot is 1 / the mean lifetime.
    u = (np.arange(200_000) + 0.5) / 200_000
    hours, cdf = azure_lifetime_table()
    mean_h = np.exp(np.interp(u, cdf, np.log(hours))).mean()
    rate = m.sum() / (n * t_steps / 12)
    assert abs(rate * mean_h - 1) < 0.1
