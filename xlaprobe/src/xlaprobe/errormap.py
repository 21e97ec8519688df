"""Per-element error maps of failing outputs: where in an output leaf the elements go wrong.

A check keeps no configuration's outputs, only verdicts (largest errors, share over the bounds,
the worst element). To show *where* a leaf goes wrong (one row, a stripe, every element), the
finding's artifact gets ``errors.npz`` when it is written: per failing leaf, the error of every
element in units of its dtype's bound, max-pooled to at most `MAX_ROWS` x `MAX_COLS` cells (a few
kB per leaf, whatever the output's size). ``xlaprobe report`` draws them as heat maps.

The unit is ``|actual - reference| / (atol + rtol |reference|)`` with the oracle's per-dtype
bounds (`xlaprobe.oracle.DEFAULT_BOUNDS` and the program's tolerance), *without* the honest-run
error budget the verdict also allows: a cell above 1 is over the dtype's bound, and the verdict
decides whether the budget explains it. Integers and booleans count the difference itself (any
non-zero is wrong). A NaN or infinity where the reference has none (or the reverse) is ``inf``.

The file holds float32 arrays and a JSON string: it is read with ``allow_pickle=False``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xlaprobe.errors import CorruptArtifact
from xlaprobe.oracle import DEFAULT_BOUNDS, Verdict
from xlaprobe.program import Tolerance

#: Most rows and columns of a stored map (cells are max-pooled blocks of elements).
MAX_ROWS = 64
MAX_COLS = 128
#: File name inside a finding's artifact directory.
FILE_NAME = "errors.npz"


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorMap:
    """The error of one output leaf, element by element, pooled to a small grid.

    Attributes:
        index: position of the leaf among the flat outputs.
        output: the leaf's name (e.g. ``"[0]"``).
        shape: the leaf's shape.
        dtype: the leaf's dtype name.
        grid: float32 array of shape (rows, cols), rows <= `MAX_ROWS`, cols <= `MAX_COLS`: the
            largest error (units of the dtype bound, ``inf`` for a non-finite mismatch) among
            the elements of each cell.
        split: how many leading dimensions of `shape` are flattened into rows (the rest into
            columns).
        block: (elements of rows, elements of columns) per cell.
    """

    index: int
    output: str
    shape: tuple[int, ...]
    dtype: str
    grid: np.ndarray
    split: int
    block: tuple[int, int]

    @property
    def over(self) -> float:
        """Share of cells over the bound (> 1), 0..1."""
        return float((self.grid > 1).mean()) if self.grid.size else 0.0


def element_error(actual: np.ndarray, reference: np.ndarray,
                  tolerance: Tolerance = Tolerance()) -> np.ndarray:
    """Per-element error of `actual` against `reference` in units of the dtype's bound.

    Args:
        actual: a configuration's output, dtype D, shape S.
        reference: the float64 reference (integers and bools in D), shape S.
        tolerance: the program's per-dtype overrides of the bounds.

    Returns:
        float64 array of shape S: ``|a - r| / (atol + rtol |r|)`` for floats (0 where both are
        the same non-finite value, ``inf`` where only one is non-finite or they differ), the
        absolute difference for integers and booleans.

    Raises:
        ValueError: the shapes differ.
    """
    actual, reference = np.asarray(actual), np.asarray(reference)
    if actual.shape != reference.shape:
        raise ValueError(f"shape {actual.shape} != reference shape {reference.shape}")
    out, ref = actual.astype(np.float64), reference.astype(np.float64)
    name = actual.dtype.name
    if name not in DEFAULT_BOUNDS and not (np.issubdtype(actual.dtype, np.floating)
                                           or name == "bfloat16"):
        return np.abs(out - ref)
    atol, rtol, _ = DEFAULT_BOUNDS.get(name, DEFAULT_BOUNDS["float32"])
    atol = dict(tolerance.atol).get(name, atol)
    rtol = dict(tolerance.rtol).get(name, rtol)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(out) & np.isfinite(ref)
        same_special = (np.isnan(out) & np.isnan(ref)) | (out == ref)
        ratio = np.abs(out - ref) / (atol + rtol * np.abs(ref))
    return np.where(finite, ratio, np.where(same_special, 0.0, np.inf))


def _split(shape: tuple[int, ...]) -> int:
    """Leading dimensions flattened into rows: all but the last (a matrix stays a matrix), and
    all but the last two when the last is narrow (channels), so that columns show structure."""
    if len(shape) <= 1:
        return 0
    if len(shape) >= 3 and shape[-1] < 8:
        return len(shape) - 2
    return len(shape) - 1


def pool(error: np.ndarray) -> tuple[np.ndarray, int, tuple[int, int]]:
    """Max-pool an error array of any shape to a grid of at most `MAX_ROWS` x `MAX_COLS`.

    Args:
        error: float64 array (`element_error`), any shape.

    Returns:
        (float32 grid (rows, cols), leading dimensions flattened into rows, elements per cell
        as (rows, cols)).
    """
    shape = tuple(error.shape)
    split = _split(shape)
    rows = int(np.prod(shape[:split], dtype=np.int64)) if split else 1
    flat = error.reshape(rows, -1) if error.size else np.zeros((1, 1))
    cols = flat.shape[1]
    br, bc = -(-rows // MAX_ROWS), -(-cols // MAX_COLS)
    padded = np.zeros((-(-rows // br) * br, -(-cols // bc) * bc))
    padded[:rows, :cols] = flat
    grid = padded.reshape(padded.shape[0] // br, br, padded.shape[1] // bc, bc).max(axis=(1, 3))
    return grid.astype(np.float32), split, (br, bc)


def error_maps(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray],
               verdicts: Sequence[Verdict], tolerance: Tolerance = Tolerance()) -> list[ErrorMap]:
    """The error maps of the failing numeric leaves of one configuration.

    Args:
        outputs: the configuration's flat outputs.
        reference: the float64 reference outputs, one per leaf.
        verdicts: that configuration's verdicts, one per leaf.
        tolerance: the program's tolerance overrides.

    Returns:
        One `ErrorMap` per leaf whose verdict is a numeric finding (mismatch, NaN or infinity
        mismatch) and whose shape matches the reference; others are left out.
    """
    maps = []
    for verdict in verdicts:
        if not verdict.kind.is_numeric or verdict.index >= min(len(outputs), len(reference)):
            continue
        actual, ref = np.asarray(outputs[verdict.index]), np.asarray(reference[verdict.index])
        if actual.shape != ref.shape:
            continue
        grid, split, block = pool(element_error(actual, ref, tolerance))
        maps.append(ErrorMap(verdict.index, verdict.output, tuple(actual.shape),
                             actual.dtype.name, grid, split, block))
    return maps


def save_error_maps(path: str | Path, maps: Sequence[ErrorMap]) -> Path:
    """Write `maps` to an ``.npz`` file (float32 grids plus a JSON string; no pickle).

    Raises:
        OSError: the file cannot be written.
    """
    meta = [{"index": m.index, "output": m.output, "shape": list(m.shape), "dtype": m.dtype,
             "split": m.split, "block": list(m.block)} for m in maps]
    arrays = {f"grid{i}": m.grid.astype(np.float32) for i, m in enumerate(maps)}
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)
    return Path(path)


def load_error_maps(path: str | Path) -> list[ErrorMap]:
    """Read maps written by `save_error_maps` (``allow_pickle=False``).

    Raises:
        CorruptArtifact: the file is unreadable or not of this layout.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            grids = [np.asarray(data[f"grid{i}"], np.float32) for i in range(len(meta))]
        return [ErrorMap(int(m["index"]), str(m["output"]), tuple(int(s) for s in m["shape"]),
                         str(m["dtype"]), grid, int(m["split"]),
                         (int(m["block"][0]), int(m["block"][1])))
                for m, grid in zip(meta, grids, strict=True)]
    except Exception as exc:
        raise CorruptArtifact(f"cannot read the error maps {path}: {type(exc).__name__}: "
                              f"{exc}") from exc
