"""Samplers and the sampling rate: per-request Bernoulli and hash-based (spatial) sampling.

Every command and library function checks a rate with :func:`check_rate` (and the CLI parses one
with :func:`parse_rate`), so "a rate in (0, 1]" is written once.

Bernoulli sampling at rate p keeps each request independently (what Thesios's fleet keeps). Hash
sampling keeps every request whose (disk, file, block) key hashes below p, so all accesses to a
kept block survive and reuse is preserved: the basis of SHARDS miss-ratio estimation (Waldspurger,
Park, Garthwaite, Ahmad, "Efficient MRC Construction with SHARDS", FAST 2015).
"""

from __future__ import annotations

import math

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.requests import Requests


#: The paper's rate (about 1 request in 10,000): the default of ``validate`` and ``sample``.
PAPER_RATE = "1/10000"
#: The default of ``whatif`` and ``synth``: they synthesize one disk per group, and at 1/10,000 the
#: fleet they sample would be ten times larger (10,008 disks, 5-15 minutes) for the same disks.
QUICK_RATE = "1/1000"


def check_rate(rate: float, what: str = "sampling rate", given: str | None = None) -> float:
    """``rate`` if it is a sampling rate in (0, 1].

    ``what`` names the rate in the error and ``given`` is what the user wrote (default: ``rate``).

    Raises:
        ThesiosInputError: a rate outside (0, 1] or not finite.
    """
    if not (isinstance(rate, (int, float, np.floating)) and math.isfinite(rate) and 0.0 < rate <= 1.0):
        raise ThesiosInputError(f"{what} must be in (0, 1], got {rate if given is None else given}")
    return float(rate)


def parse_rate(text: str) -> float:
    """A rate written as a number (``1e-4``) or a fraction (``1/10000``), checked by :func:`check_rate`.

    >>> parse_rate("1/1000")
    0.001

    Raises:
        ThesiosInputError: not a number or fraction, or outside (0, 1].
    """
    try:
        parts = [float(part) for part in text.split("/")]
        if len(parts) > 2:  # 1/2/3 is no fraction (its third part was ignored: p = 0.5)
            raise ValueError(text)
        value = parts[0] / parts[1] if len(parts) == 2 else parts[0]
    except (ValueError, ZeroDivisionError):
        raise ThesiosInputError(f"--rate: {text!r} is not a number or a fraction like 1/10000") from None
    if len(parts) == 2 and not all(part > 0 for part in parts):
        raise ThesiosInputError(f"--rate: {text!r} has a part that is not above 0; write a fraction like 1/10000")
    return check_rate(value, "--rate", text)


def rate_label(rate: float) -> str:
    """A rate as people write it: ``1/N`` (thousands separated) when 1/rate is a whole number, else ``%g``.

    >>> rate_label(1e-4), rate_label(1 / 22), rate_label(0.3)
    ('1/10,000', '1/22', '0.3')
    """
    inv = 1.0 / rate
    return f"1/{round(inv):,}" if abs(inv - round(inv)) < 1e-6 * inv else f"{rate:g}"


def bernoulli_sample(requests: Requests, rate: float, rng: np.random.Generator) -> Requests:
    """Keep each request independently with probability ``rate`` (per-request Bernoulli sampler).

    Raises:
        ThesiosInputError: rate outside (0, 1].
    """
    check_rate(rate)
    return requests.take(rng.random(len(requests)) < rate)


def hash_sample_mask(keys: np.ndarray, rate: float, salt: int = 0) -> np.ndarray:
    """Spatial (hash) sampling: keep every access whose key hashes below ``rate`` (bool mask).

    All accesses to a kept key are kept, so reuse is preserved (SHARDS, FAST 2015). The hash is
    splitmix64 of the key, vectorized.
    """
    x = keys.astype(np.uint64) + np.uint64((0x9E3779B97F4A7C15 * (salt + 1)) % 2**64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / 2.0**53 < rate


def request_keys(requests: Requests, block_bytes: int = 4096) -> np.ndarray:
    """int64 key of each request's first block: (disk, file, offset // block_bytes) packed."""
    block = requests.file_offset // block_bytes
    return (requests.disk_id.astype(np.int64) << 43) | (requests.file_id.astype(np.int64) << 21) | block


def hash_sample(requests: Requests, rate: float, salt: int = 0) -> Requests:
    """Keep the requests whose (disk, file, first 4 KiB block) hashes below ``rate``.

    Raises:
        ThesiosInputError: rate outside (0, 1].
    """
    check_rate(rate)
    return requests.take(hash_sample_mask(request_keys(requests), rate, salt))
