"""Cost models that rank candidate configurations of a program, and how to score them.

* `CostModel`: gradient-boosted trees trained with LambdaRank (Burges 2010; LightGBM's
  ``lambdarank`` objective), one query group per program, on every measurement in the store across
  programs, as in TVM's Ansor and MetaSchedule cost models (Zheng et al. 2020; Shao et al. 2022).
  Features: the program's (its baseline optimized HLO, `xlaprobe.tune.features.hlo_features`) and
  the candidate's non-default values, so ranking a candidate needs no compile.
* `roofline_scores`: the analytical baseline, ``max(flops / peak_flops, bytes / bandwidth)`` from
  the candidate's own ``cost_analysis()`` (needs its compile).
* `kendall_tau` and `top_k_slowdown`: how well a ranking orders measured speedups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xlaprobe.errors import InvalidArgument
from xlaprobe.tune.features import FeatureTable

#: Nominal machine for the roofline: 2 vCPUs with AVX2 FMA (float32) and DRAM bandwidth.
PEAK_FLOPS = 2 * 2 * 8 * 2 * 2.5e9
PEAK_BYTES_PER_S = 10e9
#: Relevance grades of LambdaRank labels within one program.
GRADES = 5
#: Fewer training rows than this: the model does not fit and `CostModel.ready` is False.
MIN_ROWS = 8


def relevance(speedups: Sequence[float]) -> np.ndarray:
    """int32[n] grades 0..GRADES-1 by rank of the speedups within one program (higher: faster)."""
    values = np.asarray(speedups, np.float64)
    if values.size == 0:
        return np.zeros(0, np.int32)
    ranks = values.argsort().argsort()
    return np.minimum((ranks * GRADES) // max(values.size, 1), GRADES - 1).astype(np.int32)


class CostModel:
    """A LightGBM LambdaRank model over (program, candidate) feature dicts.

    Args:
        seed: LightGBM's random seed (training is deterministic given the data).
        num_trees: boosting rounds.
    """

    def __init__(self, seed: int = 0, num_trees: int = 60):
        self.seed = seed
        self.num_trees = num_trees
        self.table: FeatureTable | None = None
        self._model: Any = None

    @property
    def ready(self) -> bool:
        """True once `fit` had enough data to train."""
        return self._model is not None

    def fit(self, groups: Sequence[str], features: Sequence[Mapping[str, float]],
            speedups: Sequence[float]) -> CostModel:
        """Train on measured candidates.

        Args:
            groups: program id per row (rows of one program form a LambdaRank query).
            features: one feature dict per row.
            speedups: measured speedup per row (baseline time / candidate time).

        Returns:
            self. With fewer than `MIN_ROWS` rows, or no program with two distinct speedups, the
            model stays untrained (`ready` False).

        Raises:
            InvalidArgument: the sequences differ in length.
        """
        if not len(groups) == len(features) == len(speedups):
            raise InvalidArgument("groups, features and speedups differ in length")
        by_group: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            by_group.setdefault(g, []).append(i)
        useful = [rows for rows in by_group.values()
                  if len(rows) >= 2 and len({speedups[i] for i in rows}) > 1]
        if sum(map(len, useful)) < MIN_ROWS:
            self._model = None
            return self
        import lightgbm  # heavy (seconds to import): only a fit needs it

        order = [i for rows in useful for i in rows]
        self.table = FeatureTable([features[i] for i in order])
        x = self.table.matrix([features[i] for i in order])
        y = np.concatenate([relevance([speedups[i] for i in rows]) for rows in useful])
        params = {"objective": "lambdarank", "learning_rate": 0.1, "num_leaves": 15,
                  "min_data_in_leaf": 2, "min_data_in_bin": 1, "seed": self.seed,
                  "deterministic": True, "force_row_wise": True, "verbose": -1,
                  "label_gain": list(range(GRADES)), "num_threads": 1}
        data = lightgbm.Dataset(x, y, group=[len(rows) for rows in useful],
                                params={"min_data_in_bin": 1, "verbose": -1})
        self._model = lightgbm.train(params, data, num_boost_round=self.num_trees)
        return self

    def score(self, features: Sequence[Mapping[str, float]]) -> np.ndarray:
        """float64[n] ranking scores (higher: predicted faster).

        Raises:
            InvalidArgument: the model is not trained (`ready` is False).
        """
        if self._model is None or self.table is None:
            raise InvalidArgument("the cost model is not trained yet")
        if not features:
            return np.zeros(0)
        return np.asarray(self._model.predict(self.table.matrix(list(features))), np.float64)


def roofline_scores(costs: Sequence[Mapping[str, float]]) -> np.ndarray:
    """float64[n] analytical scores: minus the roofline time (s) ``max(flops / PEAK_FLOPS,
    bytes accessed / PEAK_BYTES_PER_S)`` of each candidate's ``cost_analysis()``."""
    return np.asarray([-max(float(c.get("flops", 0.0)) / PEAK_FLOPS,
                            float(c.get("bytes accessed", 0.0)) / PEAK_BYTES_PER_S)
                       for c in costs], np.float64)


def kendall_tau(scores: Sequence[float], speedups: Sequence[float]) -> float:
    """Kendall's tau-b between predicted scores and measured speedups (NaN when either is
    constant or there are fewer than two rows)."""
    from scipy.stats import kendalltau  # heavy (seconds to import): only a score needs it

    if len(scores) < 2:
        return math.nan
    tau = kendalltau(np.asarray(scores), np.asarray(speedups)).statistic
    return float(tau)


def top_k_slowdown(scores: Sequence[float], speedups: Sequence[float], k: int) -> float:
    """``(best time among the model's top k - best time) / best time``: 0 when the model's top
    k hold the fastest candidate. Times are ``1 / speedup`` (relative to the baseline).

    Raises:
        InvalidArgument: k < 1 or empty inputs.
    """
    if k < 1 or len(scores) == 0:
        raise InvalidArgument("top-k slowdown needs k >= 1 and at least one row")
    s = np.asarray(speedups, np.float64)
    top = np.argsort(-np.asarray(scores, np.float64), kind="stable")[:k]
    return float(s.max() / s[top].max() - 1.0)
