"""Reference rules for ``shard_map`` and its collectives: the body runs once per device of the
mesh's manual axes, each device on its own block of every input, with the collectives emulated
exactly (float64 sums, NaN-propagating max and min, exact permutations and gathers); a Monte
Carlo run (``reference:mca``) samples a sum's honest rounding error as it does a ``reduce_sum``'s
(`_summation_error`).

The devices run in lockstep threads, each with its own copy of the interpreter (a Monte Carlo
run's per-device generator is seeded from the caller's, in device order, so runs repeat). A
collective is a rendezvous: every device of the shard_map deposits its operand, waits for the
others, and computes its own result from all of them. So loops and conditionals with collectives
inside (a pipeline's scan with a ``ppermute``) need no rule of their own: each device's loop runs
in its thread and meets the others at each collective, as the devices of an SPMD program do.

Layout (as ``jax.shard_map`` defines it): a dimension whose spec entry names axes ``(a, b)`` is
split into ``size(a) * size(b)`` blocks, the block of a device being its row-major index over
those axes; a device's ``axis_index`` over several axes is the same row-major index; an output
replicated over an axis (not named in its spec) is taken from the devices at coordinate 0 there.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from xlaprobe.errors import UnsupportedPrimitive

#: Seconds a device waits at a collective for the others before the run is declared stuck.
RENDEZVOUS_TIMEOUT_S = 120.0

_LOCAL = threading.local()


class _Rendezvous:
    """Where the devices of one shard_map exchange collective operands."""

    def __init__(self, count: int):
        self.slots: list[Any] = [None] * count
        self.barrier = threading.Barrier(count, timeout=RENDEZVOUS_TIMEOUT_S)

    def exchange(self, index: int, value: Any) -> list[Any]:
        """Deposit `value` as device `index`'s and return every device's, in device order."""
        self.slots[index] = value
        self.barrier.wait()
        everyone = list(self.slots)
        self.barrier.wait()  # nobody overwrites a slot before all have read
        return everyone


class _Device:
    """One device's place in the running shard_map: its coordinates over the manual axes."""

    def __init__(self, index: int, coords: dict[str, int], sizes: dict[str, int],
                 rendezvous: _Rendezvous, all_coords: list[dict[str, int]]):
        self.index, self.coords, self.sizes = index, coords, sizes
        self.rendezvous, self.all_coords = rendezvous, all_coords


def _names(axes: Any) -> tuple[str, ...]:
    if axes is None:
        return ()
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


def _linear(coords: dict[str, int], sizes: dict[str, int], names: Sequence[str]) -> int:
    index = 0
    for name in names:
        index = index * sizes[name] + coords[name]
    return index


def _device() -> _Device:
    device = getattr(_LOCAL, "device", None)
    if device is None:
        raise UnsupportedPrimitive("a collective outside shard_map", "configs/reference_spmd.py")
    return device


def _group(names: Sequence[str]) -> tuple[list[int], int]:
    """The device indices of this device's group over axes `names` (ordered by their row-major
    index over `names`) and this device's position in it."""
    me = _device()
    others = [n for n in me.sizes if n not in names]
    members = [i for i, c in enumerate(me.all_coords) if all(c[n] == me.coords[n] for n in others)]
    members.sort(key=lambda i: _linear(me.all_coords[i], me.sizes, names))
    return members, _linear(me.coords, me.sizes, names)


def _gathered(x: Any, names: Sequence[str]) -> tuple[list[Any], int]:
    """Every member's operand in group order, and this device's position."""
    me = _device()
    everyone = me.rendezvous.exchange(me.index, x)
    members, position = _group(names)
    return [everyone[i] for i in members], position


def _summation_error(ctx: Any, parts: Sequence[np.ndarray], dtype: Any) -> Any:
    """A Monte Carlo run's sample of the honest error of summing `parts` (one per device) in
    `dtype`, as the reference samples a ``reduce_sum``'s: uniform within the probabilistic bound
    sqrt(n) u sum|parts| (Higham and Mary, SIAM J. Sci. Comput. 2019); XLA's all-reduce adds
    the devices' values in `dtype`, one rounding per add. 0 outside Monte Carlo runs and for
    integers."""
    rng = getattr(ctx.interp, "rng", None)
    if rng is None or np.dtype(dtype).kind not in "fc" or len(parts) < 2:
        return 0.0
    magnitude = np.sum([np.abs(np.asarray(p, np.float64)) for p in parts], axis=0)
    roundoff = float(ml_dtypes.finfo(dtype).eps) / 2
    return roundoff * math.sqrt(len(parts)) * magnitude * rng.uniform(-1.0, 1.0, magnitude.shape)


def _all_reduce(combine: Callable[[np.ndarray, np.ndarray], np.ndarray],
                sums: bool = False) -> Callable:
    def rule(ctx: Any, *xs: Any, axes: Any, **_: Any) -> list[Any]:
        parts, _ = _gathered(list(xs), _named_axes(axes))
        outs = []
        for k in range(len(xs)):
            acc = np.asarray(parts[0][k])
            for part in parts[1:]:
                acc = combine(acc, np.asarray(part[k]))
            if sums:
                acc = acc + _summation_error(ctx, [part[k] for part in parts], ctx.out_dtypes[k])
            outs.append(acc)
        return outs if ctx.multiple_results else outs[0]
    return rule


def _named_axes(axes: Any) -> tuple[str, ...]:
    # psum's axes may hold positional (int) axes of a vmap: none in a shard_map body.
    return tuple(a for a in _names(axes) if isinstance(a, str))


def _all_gather(ctx: Any, x: np.ndarray, *, axis_name: Any, all_gather_dimension: int,
                tiled: bool, **_: Any) -> np.ndarray:
    parts, _ = _gathered(x, _names(axis_name))
    if tiled:
        return np.concatenate(parts, axis=all_gather_dimension)
    return np.stack(parts, axis=all_gather_dimension)


def _reduce_scatter(ctx: Any, x: np.ndarray, *, axis_name: Any, scatter_dimension: int,
                    tiled: bool, **_: Any) -> np.ndarray:
    parts, position = _gathered(x, _names(axis_name))
    total = np.asarray(parts[0])
    for part in parts[1:]:
        total = total + part
    total = total + _summation_error(ctx, parts, ctx.out_dtype)
    block = np.split(total, len(parts), axis=scatter_dimension)[position]
    return block if tiled else np.squeeze(block, axis=scatter_dimension)


def _ppermute(ctx: Any, x: np.ndarray, *, axis_name: Any, perm: Any, **_: Any) -> np.ndarray:
    parts, position = _gathered(x, _names(axis_name))
    source = next((s for s, d in perm if d == position), None)
    return np.zeros_like(x) if source is None else parts[source]


def _all_to_all(ctx: Any, x: np.ndarray, *, axis_name: Any, split_axis: int, concat_axis: int,
                tiled: bool, **_: Any) -> np.ndarray:
    parts, position = _gathered(x, _names(axis_name))
    chunks = [np.split(p, len(parts), axis=split_axis)[position] for p in parts]
    if tiled:
        return np.concatenate(chunks, axis=concat_axis)
    # Untiled: the split axis (of the group's size) becomes chunks of size 1, dropped, and the
    # received pieces stack along the concat axis.
    return np.stack([np.squeeze(c, axis=split_axis) for c in chunks], axis=concat_axis)


def _axis_index(ctx: Any, *, axis_name: Any, **_: Any) -> np.ndarray:
    me = _device()
    return np.asarray(_linear(me.coords, me.sizes, _names(axis_name)), np.int32)


def _block(x: np.ndarray, spec: Any, coords: dict[str, int], sizes: dict[str, int]) -> np.ndarray:
    """A device's block of `x` under PartitionSpec `spec`."""
    index = []
    for dim, entry in enumerate(tuple(spec) + (None,) * (np.ndim(x) - len(tuple(spec)))):
        names = _names(entry)
        count = math.prod(sizes[n] for n in names)
        step = np.shape(x)[dim] // count
        start = _linear(coords, sizes, names) * step
        index.append(slice(start, start + step))
    return np.asarray(x)[tuple(index)]


def _assemble(blocks: list[np.ndarray], spec: Any, all_coords: list[dict[str, int]],
              sizes: dict[str, int]) -> np.ndarray:
    """The global value of an output from the devices' blocks (replicated axes: coordinate 0)."""
    ndim = np.ndim(blocks[0])
    entries = tuple(spec) + (None,) * (ndim - len(tuple(spec)))
    named = {n for e in entries for n in _names(e)}
    shape = [np.shape(blocks[0])[d] * math.prod(sizes[n] for n in _names(entries[d]))
             for d in range(ndim)]
    out = np.empty(shape, np.asarray(blocks[0]).dtype)
    for block, coords in zip(blocks, all_coords):
        if any(coords[n] for n in sizes if n not in named):
            continue
        index = []
        for d, entry in enumerate(entries):
            step = np.shape(block)[d]
            start = _linear(coords, sizes, _names(entry)) * step
            index.append(slice(start, start + step))
        out[tuple(index)] = block
    return out


def _run_devices(ctx: Any, jaxpr: Any, per_device: list[list[Any]],
                 all_coords: list[dict[str, int]], sizes: dict[str, int]) -> list[list[Any]]:
    """Run `jaxpr` once per device, in threads that meet at each collective."""
    rendezvous = _Rendezvous(len(per_device))
    results: list[Any] = [None] * len(per_device)
    errors: list[BaseException] = []
    interps = []
    for _ in per_device:
        clone = copy.copy(ctx.interp)
        if clone.rng is not None:  # seeded in device order: a Monte Carlo run repeats
            clone.rng = np.random.default_rng(int(ctx.interp.rng.integers(2 ** 63)))
        interps.append(clone)

    def work(i: int) -> None:
        _LOCAL.device = _Device(i, all_coords[i], sizes, rendezvous, all_coords)
        try:
            with np.errstate(all="ignore"):
                results[i] = interps[i].eval_closed(jaxpr, per_device[i])
        except threading.BrokenBarrierError:
            pass  # another device failed first; its error is the one reported
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
            rendezvous.barrier.abort()
        finally:
            _LOCAL.device = None

    threads = [threading.Thread(target=work, args=(i,), daemon=True)
               for i in range(len(per_device))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    if any(r is None for r in results):
        raise RuntimeError("shard_map reference: the devices did not meet at a collective "
                           f"within {RENDEZVOUS_TIMEOUT_S:.0f} s (they diverged)")
    return results


def _shard_map(ctx: Any, *args: Any, mesh: Any, in_specs: Any, out_specs: Any, jaxpr: Any,
               **params: Any) -> list[Any]:
    if getattr(_LOCAL, "device", None) is not None:
        raise UnsupportedPrimitive("shard_map inside shard_map", "configs/reference_spmd.py")
    manual = params.get("newly_manual_axes") or params.get("manual_axes") or mesh.axis_names
    sizes = {n: s for n, s in zip(mesh.axis_names, mesh.axis_sizes) if n in manual}
    all_coords = [dict(zip(sizes, c)) for c in itertools.product(*(range(s) for s in
                                                                   sizes.values()))]
    per_device = [[_block(x, spec, coords, sizes) for x, spec in zip(args, in_specs)]
                  for coords in all_coords]
    results = _run_devices(ctx, jaxpr, per_device, all_coords, sizes)
    return [_assemble([r[k] for r in results], spec, all_coords, sizes)
            for k, spec in enumerate(out_specs)]


RULES: dict[str, Callable[..., Any]] = {
    "shard_map": _shard_map,
    "psum": _all_reduce(np.add, sums=True), "psum_invariant": _all_reduce(np.add, sums=True),
    "pmax": _all_reduce(np.maximum), "pmin": _all_reduce(np.minimum),
    "all_gather": _all_gather, "all_gather_invariant": _all_gather,
    "reduce_scatter": _reduce_scatter, "ppermute": _ppermute, "all_to_all": _all_to_all,
    "axis_index": _axis_index,
    "pbroadcast": lambda ctx, *xs, **_: list(xs) if ctx.multiple_results else xs[0],
}

__all__ = ["RENDEZVOUS_TIMEOUT_S", "RULES"]
