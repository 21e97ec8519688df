"""The kernel-level cost model, composed to programs, and its held-out evaluation.

* `KernelModel`: LightGBM gradient-boosted regression trees (Ke et al. 2017) of the log of a
  kernel's time on its features (`xlaprobe.tune.kernels.kernel_features`), trained on the kernel
  corpus (`xlaprobe.tune.corpus`). The configuration's non-default values are not features by
  default: held out on a 113-entry corpus of 12 programs they cost Kendall tau (0.105 with them,
  0.179 without, by program; 0.069 vs 0.195 by source): the optimized HLO already shows what
  an option changed, and the indicators let the trees fit other programs' noise.
* `Composition`: a program's time from its kernels' as in the learned TPU cost model (Kaufman et
  al., MLSys 2021): ``a + b * sum_k max(t_k - floor, 0) + c * kernels``, where ``floor`` is the
  measured cost of calling an executable at all (each kernel timed alone pays it; inside the
  program it is shared) and ``a, b, c >= 0`` are the measured overheads, fitted by non-negative
  least squares on the training programs' measured program and kernel times.
* `ProgramModel`: both, trained on corpus entries; predicts a program's seconds from the kernels
  of its optimized HLO (`predict_text`).
* `RankModel`: the program-level alternative: LightGBM LambdaRank (Burges 2010) over each
  entry's kernel features summed over its kernels and the configuration's values, grouped by
  program (it ranks a program's configurations; it predicts no seconds).
* `held_out`: Kendall tau between predicted and measured program times across the
  configurations of each held-out group (a program, or a whole source: zoo, ecosystem, capture,
  fuzz), beside the roofline of ``cost_analysis()``; and the held-out errors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xlaprobe.errors import InvalidArgument
from xlaprobe.tune.costmodel import kendall_tau, roofline_scores
from xlaprobe.tune.features import FeatureTable
from xlaprobe.tune.kernels import kernels

#: Fewer timed kernels than this: `KernelModel.fit` refuses.
MIN_KERNELS = 20
#: Smallest kernel time above the floor (s), so a log exists.
EPS_S = 1e-8


def config_features(candidate: Mapping[str, Any]) -> dict[str, float]:
    """One indicator ``set:<option>=<value>`` per XLA option or pass set away from its default
    (None / False); knobs are left out (they change the HLO, which the kernel features see)."""
    return {f"set:{k}={v}": 1.0 for k, v in candidate.items()
            if not k.startswith("knob:") and v is not None and v is not False}


def kernel_row(kernel: Mapping[str, Any], candidate: Mapping[str, Any], *,
               config: bool = True) -> dict[str, float]:
    """The model's features of one kernel under a configuration (without the configuration's
    indicators when `config` is False)."""
    return {**kernel["features"], **(config_features(candidate) if config else {})}


class _Boosted:
    """A LightGBM booster and its feature columns (untrained until ``fit``).

    Args:
        seed: LightGBM's seed; num_trees: boosting rounds.
    """

    def __init__(self, seed: int = 0, num_trees: int = 200):
        self.seed, self.num_trees = seed, num_trees
        self.table: FeatureTable | None = None
        self._model: Any = None


class KernelModel(_Boosted):
    """LightGBM regression of ``log(seconds)`` of a kernel timed alone.

    Args:
        seed: LightGBM's seed; num_trees: boosting rounds.
    """

    def fit(self, rows: Sequence[Mapping[str, float]], seconds: Sequence[float]) -> KernelModel:
        """Train on kernels' features and measured times (s).

        Raises:
            InvalidArgument: lengths differ, fewer than `MIN_KERNELS` rows, or a time <= 0.
        """
        if len(rows) != len(seconds):
            raise InvalidArgument("kernel rows and times differ in length")
        if len(rows) < MIN_KERNELS:
            raise InvalidArgument(f"the kernel model needs at least {MIN_KERNELS} timed kernels, "
                                  f"got {len(rows)}: grow the corpus (xlaprobe tune-corpus)")
        y = np.asarray(seconds, np.float64)
        if not np.all(y > 0):
            raise InvalidArgument("kernel times must be positive")
        import lightgbm  # heavy (seconds to import): only a fit needs it

        self.table = FeatureTable(rows)
        params = {"objective": "regression", "learning_rate": 0.05, "num_leaves": 31,
                  "min_data_in_leaf": 3, "min_data_in_bin": 1, "feature_fraction": 0.9,
                  "seed": self.seed, "deterministic": True, "force_row_wise": True,
                  "verbose": -1, "num_threads": 1}
        data = lightgbm.Dataset(self.table.matrix(list(rows)), np.log(y),
                                params={"min_data_in_bin": 1, "verbose": -1})
        self._model = lightgbm.train(params, data, num_boost_round=self.num_trees)
        return self

    def predict(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """float64[n] predicted seconds per kernel.

        Raises:
            InvalidArgument: not trained.
        """
        if self._model is None or self.table is None:
            raise InvalidArgument("the kernel model is not trained yet")
        if not rows:
            return np.zeros(0)
        return np.exp(np.asarray(self._model.predict(self.table.matrix(list(rows))), np.float64))


@dataclasses.dataclass(frozen=True)
class Composition:
    """Program seconds from kernel seconds: ``a + b * sum_k max(t_k - floor, 0) + c * n``.

    Attributes:
        a: fixed overhead per program run (s); b: scale of the kernels' work; c: overhead per
            kernel (s); floor: the cost of one executable call (s), subtracted per kernel.
    """

    a: float
    b: float
    c: float
    floor: float

    @staticmethod
    def design(kernel_s: Sequence[float], floor: float) -> np.ndarray:
        """float64[3]: the regressors ``(1, sum_k max(t_k - floor, 0), n)`` of one program."""
        t = np.asarray(kernel_s, np.float64)
        return np.asarray([1.0, float(np.maximum(t - floor, 0.0).sum()), float(t.size)])

    @classmethod
    def fit(cls, kernel_s: Sequence[Sequence[float]], floors: Sequence[float],
            program_s: Sequence[float], *, overheads: bool = True) -> Composition:
        """Non-negative least squares over programs, weighted by 1 / program time (relative
        error: a 10 ms program must not drown a 0.1 ms one). Without `overheads` the floor and
        the per-kernel term are dropped: ``a + b * sum_k t_k`` (the plain sum, for ablation).

        Raises:
            InvalidArgument: lengths differ or no programs.
        """
        from scipy.optimize import nnls  # heavy (seconds to import): only a fit needs it

        if not len(kernel_s) == len(floors) == len(program_s) or not len(program_s):
            raise InvalidArgument("need one floor and program time per program's kernel times")
        floors = list(floors) if overheads else [0.0] * len(floors)
        x = np.stack([cls.design(k, f) for k, f in zip(kernel_s, floors)])
        if not overheads:
            x[:, 2] = 0.0
        y = np.asarray(program_s, np.float64)
        w = 1.0 / np.maximum(y, EPS_S)
        coef, _ = nnls(x * w[:, None], y * w)
        return cls(float(coef[0]), float(coef[1]), float(coef[2]), float(np.median(floors)))

    def program_s(self, kernel_s: Sequence[float], floor: float | None = None) -> float:
        """Predicted seconds of a program whose kernels take `kernel_s` (each alone)."""
        a, work, n = self.design(kernel_s, self.floor if floor is None else floor)
        return float(self.a + self.b * work + self.c * n)


def _timed(entries: Sequence[Mapping[str, Any]], *, config: bool = True
           ) -> tuple[list[dict[str, float]], list[float]]:
    rows, seconds = [], []
    for entry in entries:
        for kernel in entry["kernels"]:
            if kernel["time_s"] is not None and kernel["time_s"] > 0:
                rows.append(kernel_row(kernel, entry["candidate"], config=config))
                seconds.append(kernel["time_s"])
    return rows, seconds


class ProgramModel:
    """A `KernelModel` and a `Composition` trained on corpus entries (`Store.corpus`).

    Args:
        seed: the kernel model's seed.
        overheads: compose with the floor and per-kernel overhead (``a + b * sum_k max(t_k -
            floor, 0) + c * n``); False: the plain sum ``a + b * sum_k t_k`` (ablation).
        config: the configuration's values are kernel features too (default False: the
            kernel's HLO features alone, which ranked better held out; see the module).
        measured: compose the held-out entries' *measured* kernel times where they have one
            (not a predictor: the diagnostic of what a perfect kernel model would reach).
    """

    def __init__(self, seed: int = 0, *, overheads: bool = True, config: bool = False,
                 measured: bool = False):
        self.kernels = KernelModel(seed)
        self.composition: Composition | None = None
        self.overheads, self.config, self.measured = overheads, config, measured

    def fit(self, entries: Sequence[Mapping[str, Any]]) -> ProgramModel:
        """Train the kernel model on every timed kernel, then the composition on each entry's
        measured kernel times (predicted where a kernel has none) and program time.

        Raises:
            InvalidArgument: too few timed kernels (see `KernelModel.fit`).
        """
        rows, seconds = _timed(entries, config=self.config)
        self.kernels.fit(rows, seconds)
        per_program = []
        for entry in entries:
            predicted = self.kernels.predict([kernel_row(k, entry["candidate"], config=self.config)
                                              for k in entry["kernels"]])
            per_program.append([k["time_s"] if k["time_s"] else p
                                for k, p in zip(entry["kernels"], predicted)])
        self.composition = Composition.fit(per_program, [e["data"]["floor_s"] for e in entries],
                                           [e["program_s"] for e in entries],
                                           overheads=self.overheads)
        return self

    def predict(self, kernels: Sequence[Mapping[str, Any]], candidate: Mapping[str, Any]) -> float:
        """Predicted seconds of a program with these kernels (dicts with ``features``) under
        configuration `candidate`.

        Raises:
            InvalidArgument: not trained.
        """
        if self.composition is None:
            raise InvalidArgument("the program model is not trained yet")
        times = self.kernels.predict([kernel_row(k, candidate, config=self.config)
                                      for k in kernels])
        if self.measured:
            times = np.asarray([k.get("time_s") or t for k, t in zip(kernels, times)])
        return self.composition.program_s(times)

    def predict_text(self, text: str, candidate: Mapping[str, Any]) -> float:
        """Predicted seconds of the program whose optimized HLO is `text` under `candidate`."""
        return self.predict([{"features": k.features} for k in kernels(text)], candidate)


def program_row(kernels: Sequence[Mapping[str, Any]], candidate: Mapping[str, Any]
                ) -> dict[str, float]:
    """A program's features for `RankModel`: each kernel feature summed over its kernels, the
    kernel count, and the configuration's indicators."""
    row: dict[str, float] = {"kernels": float(len(kernels))}
    for kernel in kernels:
        for key, value in kernel["features"].items():
            row[f"sum:{key}"] = row.get(f"sum:{key}", 0.0) + float(value)
    return {**row, **config_features(candidate)}


class RankModel(_Boosted):
    """LightGBM LambdaRank over `program_row`, one query group per program: the ranking
    objective instead of regression and composition. ``predict`` returns a score whose order is
    that of predicted time (higher: slower), not seconds.

    Args:
        seed: LightGBM's seed; num_trees: boosting rounds.
    """

    def fit(self, entries: Sequence[Mapping[str, Any]]) -> RankModel:
        """Train on the entries, grouped by program; relevance is the rank of speed within
        its program (the fastest configuration highest).

        Raises:
            InvalidArgument: no program with two or more entries.
        """
        import lightgbm  # heavy (seconds to import): only a fit needs it

        groups: dict[str, list[Mapping[str, Any]]] = {}
        for entry in entries:
            groups.setdefault(entry["program_id"], []).append(entry)
        groups = {k: v for k, v in groups.items() if len(v) >= 2}
        if not groups:
            raise InvalidArgument("the rank model needs a program with two or more entries")
        rows, labels, sizes = [], [], []
        for members in groups.values():
            order = np.argsort(np.argsort([-e["program_s"] for e in members]))
            rows += [program_row(e["kernels"], e["candidate"]) for e in members]
            labels += [min(int(v), 30) for v in order]  # slowest 0 ... fastest highest
            sizes.append(len(members))
        self.table = FeatureTable(rows)
        params = {"objective": "lambdarank", "learning_rate": 0.05, "num_leaves": 15,
                  "min_data_in_leaf": 3, "min_data_in_bin": 1, "seed": self.seed,
                  "deterministic": True, "force_row_wise": True, "verbose": -1,
                  "num_threads": 1, "label_gain": list(range(32))}
        data = lightgbm.Dataset(self.table.matrix(rows), np.asarray(labels), group=sizes,
                                params={"min_data_in_bin": 1, "verbose": -1})
        self._model = lightgbm.train(params, data, num_boost_round=self.num_trees)
        return self

    def predict(self, kernels: Sequence[Mapping[str, Any]], candidate: Mapping[str, Any]) -> float:
        """A score ordered like predicted time (minus the ranker's relevance).

        Raises:
            InvalidArgument: not trained.
        """
        if self._model is None or self.table is None:
            raise InvalidArgument("the rank model is not trained yet")
        row = self.table.matrix([program_row(kernels, candidate)])
        return -float(self._model.predict(row)[0])


def _log_error(predicted: float, measured: float) -> float:
    return abs(math.log(max(predicted, EPS_S)) - math.log(max(measured, EPS_S)))


def mean_defined(values: Sequence[float]) -> float:
    """The mean of the values that are not NaN; NaN when none is (no values, or all NaN: a
    Kendall tau of tied predictions), without numpy's "Mean of empty slice" warning.

    >>> mean_defined([0.5, math.nan, 1.0]), mean_defined([math.nan]), mean_defined([])
    (0.75, nan, nan)
    """
    defined = [float(v) for v in values if not math.isnan(v)]
    return sum(defined) / len(defined) if defined else math.nan


def evaluate(model: ProgramModel, test: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Ranking and error of a trained model on entries it did not see, grouped by program.

    Returns:
        ``model_tau`` and ``roofline_tau``: mean over programs (with two or more
        configurations of different measured times) of Kendall tau between predicted and
        measured program times across the program's configurations, over the programs whose
        tau is defined (`mean_defined`: NaN, without a warning, when there is none: no program
        to rank, or predictions tied across every program's configurations); ``programs``: how
        many programs had configurations to rank (0: the group had nothing to rank);
        ``entries``; ``program_error``: median |log(predicted / measured)| of program times;
        ``kernel_error``: the same over timed kernels.
    """
    by_program: dict[str, list[Mapping[str, Any]]] = {}
    for entry in test:
        by_program.setdefault(entry["program_id"], []).append(entry)
    taus, roofs, errors = [], [], []
    seconds_out = not isinstance(model, RankModel)
    for entries in by_program.values():
        predicted = [model.predict(e["kernels"], e["candidate"]) for e in entries]
        measured = [e["program_s"] for e in entries]
        if seconds_out:
            errors += [_log_error(p, m) for p, m in zip(predicted, measured)]
        if len(entries) >= 2 and len(set(measured)) > 1:
            taus.append(kendall_tau(predicted, measured))
            roofline_s = -roofline_scores([e["data"].get("cost", {}) for e in entries])
            roofs.append(kendall_tau(roofline_s, measured))
    kernel_errors = []
    if isinstance(model, ProgramModel):
        rows, seconds = _timed(test, config=model.config)
        kernel_errors = [_log_error(p, m) for p, m in zip(model.kernels.predict(rows), seconds)]
    return {"model_tau": mean_defined(taus), "roofline_tau": mean_defined(roofs),
            "programs": len(taus), "entries": len(test),
            "program_error": float(np.median(errors)) if errors else math.nan,
            "kernel_error": float(np.median(kernel_errors)) if kernel_errors else math.nan}


def held_out(entries: Sequence[Mapping[str, Any]], by: str = "program", seed: int = 0,
             make: Callable[[int], Any] | None = None) -> list[dict[str, Any]]:
    """Leave-one-group-out evaluation: for each group (``program``: each program; ``source``:
    each source), train on the other groups' entries and `evaluate` on its own.

    Args:
        entries: corpus entries (`Store.corpus`).
        by: ``program`` or ``source``.
        seed: the models' seed.
        make: seed -> an untrained model with ``fit(entries)`` and ``predict(kernels,
            candidate)`` (default `ProgramModel`; a variant for ablations, or `RankModel`).

    Returns:
        One dict per group that could be evaluated: ``group``, ``source`` and `evaluate`'s keys.

    Raises:
        InvalidArgument: `by` is neither ``program`` nor ``source``.
    """
    if by not in ("program", "source"):
        raise InvalidArgument(f"held out by 'program' or 'source', not {by!r}")
    key = "name" if by == "program" else "source"
    out = []
    for group in sorted({e[key] for e in entries}):
        train = [e for e in entries if e[key] != group]
        test = [e for e in entries if e[key] == group]
        if len(_timed(train)[0]) < MIN_KERNELS:
            continue
        model = (make or ProgramModel)(seed).fit(train)
        out.append({"group": group, "source": test[0]["source"], **evaluate(model, test)})
    return out
