"""Samplers: per-request Bernoulli and hash-based (spatial) sampling by file and offset.

Bernoulli sampling at rate p keeps each request independently (what Thesios's fleet keeps). Hash
sampling keeps every request whose (disk, file, block) key hashes below p, so all accesses to a
kept block survive and reuse is preserved: the basis of SHARDS miss-ratio estimation (Waldspurger,
Park, Garthwaite, Ahmad, "Efficient MRC Construction with SHARDS", FAST 2015).
"""

from __future__ import annotations

import numpy as np

from thesios.errors import ThesiosInputError
from thesios.requests import Requests


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
    if not 0.0 < rate <= 1.0:
        raise ThesiosInputError(f"sampling rate must be in (0, 1], got {rate}")
    return requests.take(hash_sample_mask(request_keys(requests), rate, salt))
