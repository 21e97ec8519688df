"""Entity identification: group disks into similar kinds from their samples alone.

Thesios (ASPLOS 2024, sec. 4.2) merges samples only across disks that behave alike. Here each disk
is described by features of its own samples (sample rate, read fraction, cache-hit fraction of
reads, mean log size, WARM fraction, mean HDD service time of misses, share of requests in each
4-hour block of the day), standardized, and clustered with k-means (scikit-learn); the number of
groups is chosen by the silhouette score (Rousseeuw, J. Comput. Appl. Math. 20, 1987).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler

from thesios.errors import ThesiosInputError
from thesios.fleet import DAY_S
from thesios.requests import ZONE_WARM, Requests

_BLOCKS = 6


def disk_features(samples: Requests, n_disks: int, days: int) -> np.ndarray:
    """Per-disk feature matrix, float64 of shape (n_disks, 6 + 6), from samples alone.

    Disks without samples get the fleet's mean features.
    """
    d = samples.disk_id.astype(np.int64)
    count = np.bincount(d, minlength=n_disks).astype(np.float64)
    safe = np.maximum(count, 1.0)

    def mean_of(values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        w = values if mask is None else np.where(mask, values, 0.0)
        n = safe if mask is None else np.maximum(np.bincount(d, weights=mask.astype(np.float64), minlength=n_disks), 1.0)
        return np.bincount(d, weights=w.astype(np.float64), minlength=n_disks) / n

    reads = samples.is_read
    feats = [
        np.log1p(count / days),
        mean_of(reads.astype(np.float64)),
        mean_of((samples.cache_hit == 1).astype(np.float64), reads),
        mean_of(np.log2(np.maximum(samples.size, 1))),
        mean_of((samples.zone == ZONE_WARM).astype(np.float64)),
        mean_of(samples.disk_time * 1e3, samples.is_miss_read),
    ]
    block = np.floor((samples.start_time % DAY_S) / (DAY_S / _BLOCKS)).astype(np.int64)
    for b in range(_BLOCKS):
        feats.append(mean_of((block == b).astype(np.float64)))
    x = np.column_stack(feats)
    empty = count == 0
    if empty.any() and (~empty).any():
        x[empty] = x[~empty].mean(axis=0)
    return x


@dataclass(frozen=True)
class Grouping:
    """Result of entity identification: ``labels`` (int64, one per disk) and the chosen ``k``."""

    labels: np.ndarray
    k: int
    silhouette: float


def identify(features: np.ndarray, k: int | None = None, k_range: range = range(2, 9), seed: int = 0) -> Grouping:
    """Cluster disks by their features with k-means; choose k by silhouette when ``k`` is None.

    Raises:
        ThesiosInputError: fewer disks than groups.
    """
    n = len(features)
    if n < 2:
        raise ThesiosInputError("entity identification needs at least two disks")
    x = StandardScaler().fit_transform(features)
    rng = np.random.default_rng(seed)
    probe = x if n <= 3000 else x[rng.choice(n, 3000, replace=False)]
    candidates = [k] if k is not None else [c for c in k_range if c < len(probe)]
    if not candidates:
        raise ThesiosInputError(f"too few disks ({n}) to form groups")
    best: tuple[float, int] | None = None
    for c in candidates:
        if k is not None:
            best = (float("nan"), c)
            break
        labels = KMeans(n_clusters=c, n_init=3, random_state=seed).fit_predict(probe)
        score = float(silhouette_score(probe, labels)) if len(set(labels)) > 1 else -1.0
        if best is None or score > best[0]:
            best = (score, c)
    assert best is not None
    labels = KMeans(n_clusters=best[1], n_init=3, random_state=seed).fit_predict(x)
    return Grouping(labels=labels.astype(np.int64), k=best[1], silhouette=best[0])


def purity(labels: np.ndarray, truth: np.ndarray) -> float:
    """Cluster purity: share of items whose cluster's majority true class is their own, in [0, 1]."""
    labels = np.asarray(labels)
    truth = np.asarray(truth)
    table = np.zeros((labels.max() + 1, truth.max() + 1), dtype=np.int64)
    np.add.at(table, (labels, truth), 1)
    return float(table.max(axis=1).sum() / len(labels))
