"""A fuzz source steered by optimization coverage (``xlaprobe fuzz --steer coverage``).

Coverage-guided fuzzing (AFL's seed queue and energy, AFLFast's power schedules) applied to XLA's
optimizations: the coverage of a program is the set of passes that changed its module and the
simplifier rewrites that fired (`xlaprobe.coverage`), read from its checked runs. Half the
programs are the plain generator's (`FRESH_SHARE`); each other is made by one *arm*, chosen by a
UCB1 bandit (Auer et al. 2002) whose reward is the program's novelty, the sum over its coverage
items of ``1 / (1 + programs that hit the item before)``:

* ``fresh``: the plain generator (`xlaprobe.sources.generator.generate`);
* ``pattern:<name>``: a program written from a pass's trigger conditions
  (`xlaprobe.sources.patterns`);
* ``mutate:<kind>``: a mutation of a corpus seed, a kept program that hit a rare item; a seed is
  drawn with energy ``sum(1 / hits(item))`` over its items (rarer items, more energy). Mutations:
  ``dup`` (the program twice, both outputs: CSE), ``loop`` (inside a ``fori_loop`` of 0-3 trips
  whose body recomputes it: loop-invariant code), ``cond`` (inside a ``cond`` with the same
  branches), ``vmap`` (batched over a new axis: shapes), ``dtype`` (float32 inputs arrive as
  bfloat16 and are converted: dtypes), ``swap`` (operands of a commutative op swapped: operand
  order), ``scale`` (float constants times a power of two: constants).

Special values: a program (of any arm but this one) whose compile fired a simplifier rewrite is
queued to run again with its float inputs at IEEE special values (`xlaprobe.sources.specials`:
+-0, +-inf, NaN, subnormals, +-max, +-1, rounding boundaries), where rewrites proved on the reals
go wrong; the queue holds the programs of the rarest rewrites first (priority ``sum(1 / hits)``
over their rewrite kinds) and makes up to `SPECIAL_SHARE` of the programs (named
``steer:<seed>:special``), outside the bandit: they add no coverage of their own.

The source is called from the campaign's threads and told each result through `observe` (the
campaign's ``on_program``). Programs depend on what earlier ones covered, so a steered campaign
is not replayable seed by seed as the plain one is: its findings' artifacts are the replay.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from xlaprobe.jaxprs import primitives_used
from xlaprobe.program import Program, Provenance
from xlaprobe.sources import generator
from xlaprobe.sources.patterns import PATTERNS
from xlaprobe.sources.specials import READS_NAN_BITS, special_variants

#: Mutation operators of corpus seeds.
MUTATIONS = ("dup", "loop", "cond", "vmap", "dtype", "swap", "scale")
#: Most seeds kept (the lowest energy is dropped beyond it).
MAX_CORPUS = 256
#: An item hit by at most this many programs before makes a program a seed.
RARE = 3
#: Share of programs made by the plain generator outright, before the bandit chooses: the
#: first side-by-side run (every arm to the bandit, ``fresh`` one arm of 32) lost three passes the
#: plain generator's variety reaches (simplify-conditional, transpose-folding, a loop annotator).
FRESH_SHARE = 0.5
#: Share of programs that re-run a queued program at special input values, when one is queued.
SPECIAL_SHARE = 0.3
#: Special-value variants made of each queued program (`special_variants`), and most queued.
SPECIAL_VARIANTS = 2
MAX_SPECIAL_QUEUE = 512
#: Operators that commute (their two operands may swap).
_COMMUTATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor", "eq", "ne"})


def coverage_items(result: Any) -> frozenset[str]:
    """The coverage items of a `xlaprobe.checking.CheckResult`: ``pass:<name>`` for each pass
    that changed a module in one of its runs, and each rewrite kind that fired."""
    items: set[str] = set()
    for outcome in result.outcomes:
        if outcome.coverage:
            items.update(f"pass:{name}" for name in outcome.coverage.changed)
            items.update(outcome.coverage.rewrites)
    return frozenset(items)


def rewrite_items(items: frozenset[str]) -> frozenset[str]:
    """The rewrite kinds among coverage items (``algsimp:[RULE]``; not ``pass:<name>``)."""
    return frozenset(i for i in items if not i.startswith("pass:"))


@dataclasses.dataclass
class _Seed:
    fn: Callable[..., Any]
    inputs: tuple[np.ndarray, ...]
    items: frozenset[str]
    graph: Any = None  # the generator's Graph when the seed is a plain program


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _mutate_wrapped(kind: str, seed: _Seed, rng: np.random.Generator) -> tuple[Callable, tuple]:
    """A mutation that wraps the seed's function (any seed)."""
    fn, inputs = seed.fn, seed.inputs
    if kind == "dup":
        return (lambda *xs: _as_list(fn(*xs)) + _as_list(fn(*xs))), inputs
    if kind == "loop":
        trips = int(rng.integers(0, 4))
        return (lambda *xs: lax.fori_loop(0, trips, lambda i, c: _as_list(fn(*xs)),
                                          _as_list(fn(*xs)))), inputs
    if kind == "cond" and inputs:
        def conditional(*xs: Any) -> Any:
            first = jnp.ravel(xs[0])
            pred = first[0] == first[0] if first.size else jnp.bool_(True)
            return lax.cond(pred, lambda *a: _as_list(fn(*a)), lambda *a: _as_list(fn(*a)), *xs)
        return conditional, inputs
    if kind == "vmap":
        copies = int(rng.integers(2, 4))
        return jax.vmap(lambda *xs: _as_list(fn(*xs))), tuple(
            np.stack([x] * copies) for x in inputs)
    if kind == "dtype" and any(x.dtype == np.float32 for x in inputs):
        narrow = tuple(x.astype(jnp.bfloat16) if x.dtype == np.float32 else x for x in inputs)
        originals = [x.dtype for x in inputs]
        return (lambda *xs: _as_list(fn(*(x.astype(d) for x, d in zip(xs, originals))))), narrow
    raise ValueError(f"mutation {kind} does not apply")


def _mutate_graph(kind: str, seed: _Seed, rng: np.random.Generator) -> tuple[Callable, tuple]:
    """A mutation of a plain program's graph: swap a commutative op's operands, or scale its
    float constants by a power of two."""
    graph = seed.graph
    if graph is None:
        raise ValueError(f"mutation {kind} needs a generated graph")
    nodes = list(graph.nodes)
    if kind == "swap":
        where = [i for i, n in enumerate(nodes) if n.rule in _COMMUTATIVE and len(n.operands) == 2
                 and not (isinstance(n.operands[0], int) and n.operands[0] == n.operands[1])]
    else:
        where = [i for i, n in enumerate(nodes) if any(
            isinstance(o, np.ndarray) and o.dtype.kind == "f" for o in n.operands)]
    if not where:
        raise ValueError(f"mutation {kind} does not apply")
    i = int(rng.choice(where))
    node = nodes[i]
    if kind == "swap":
        operands = tuple(reversed(node.operands))
    else:
        factor = float(rng.choice([2.0, 0.5, 4.0, 0.25]))
        operands = tuple(np.asarray(o * factor, o.dtype) if isinstance(o, np.ndarray)
                         and o.dtype.kind == "f" else o for o in node.operands)
    nodes[i] = dataclasses.replace(node, operands=operands)
    return dataclasses.replace(graph, nodes=tuple(nodes)), seed.inputs


class SteeredSource:
    """A campaign ``source`` (``seed -> Program``) steered by optimization coverage; pass
    `observe` as the campaign's ``on_program`` (see the module docstring). Thread-safe.

    Args:
        max_equations: most equations of a fresh program (`generator.generate`).
        arms: the arms to choose from (default: every fresh, pattern and mutation arm).
        exploration: UCB1's exploration weight (sqrt(2) in the paper's bound).
        fresh_share: chance that a program is the plain generator's outright (`FRESH_SHARE`).
        special_share: chance that a program re-runs a queued one at special input values
            when one is queued (`SPECIAL_SHARE`; 0: never).
    """

    def __init__(self, *, max_equations: int = 30, arms: Sequence[str] | None = None,
                 exploration: float = math.sqrt(2), fresh_share: float = FRESH_SHARE,
                 special_share: float = SPECIAL_SHARE):
        self.max_equations = max_equations
        self.fresh_share = fresh_share
        self.special_share = special_share
        #: Heap of (-priority, order, function, inputs) of programs to re-run at special values.
        self._specials: list[tuple[float, int, Callable[..., Any], tuple[np.ndarray, ...]]] = []
        self._order = itertools.count()
        self.special_runs = 0
        self.arms = tuple(arms) if arms is not None else (
            "fresh", *(f"pattern:{p}" for p in PATTERNS), *(f"mutate:{m}" for m in MUTATIONS))
        self.exploration = exploration
        self.hits: collections.Counter[str] = collections.Counter()
        self.pulls: collections.Counter[str] = collections.Counter()
        self.rewards: collections.Counter[str] = collections.Counter()
        self.corpus: list[_Seed] = []
        self._pending: dict[int, tuple[str, _Seed]] = {}
        self._lock = threading.Lock()

    # -- choosing ---------------------------------------------------------------------------

    def _choose_arm(self, rng: np.random.Generator) -> str:
        if "fresh" in self.arms and rng.random() < self.fresh_share:
            return "fresh"
        arms = [a for a in self.arms if not a.startswith("mutate:") or self.corpus]
        untried = [a for a in arms if not self.pulls[a]]
        if untried:
            return str(rng.choice(untried))
        total = sum(self.pulls[a] for a in arms)
        score = {a: self.rewards[a] / self.pulls[a] + self.exploration * math.sqrt(
            math.log(total) / self.pulls[a]) for a in arms}
        best = max(score.values())
        return str(rng.choice([a for a in arms if score[a] == best]))

    def _energy(self, seed: _Seed) -> float:
        return sum(1.0 / max(self.hits[item], 1) for item in seed.items) or 1e-3

    def _pick_seed(self, rng: np.random.Generator) -> _Seed:
        energy = np.asarray([self._energy(s) for s in self.corpus])
        return self.corpus[int(rng.choice(len(self.corpus), p=energy / energy.sum()))]

    # -- making programs --------------------------------------------------------------------

    def __call__(self, seed: int) -> Program:
        """The program of `seed`: made by the arm the bandit picks (``fresh`` when the picked
        arm cannot make one; the pull counts for the picked arm, with no reward)."""
        rng = np.random.default_rng([int(seed), 0x5EED])
        with self._lock:
            special = heapq.heappop(self._specials) if self._specials and \
                rng.random() < self.special_share else None
        if special is not None:
            program = self._special_program(seed, special[2], special[3])
            if program is not None:
                return program
        with self._lock:
            arm = self._choose_arm(rng)
            self.pulls[arm] += 1
            parent = self._pick_seed(rng) if arm.startswith("mutate:") else None
        try:
            fn, inputs, graph = self._make(arm, parent, rng, seed)
            name = f"fuzz:{seed}" if arm == "fresh" else f"steer:{seed}:{arm}"
            program = Program.from_function(fn, inputs, Provenance("fuzz", name, int(seed)))
        except Exception:  # a mutation the program does not admit: the plain program instead
            fn, inputs, graph = self._make("fresh", None, rng, seed)
            program = Program.from_function(fn, inputs, Provenance("fuzz", f"fuzz:{seed}",
                                                                   int(seed)))
        with self._lock:
            self._pending[int(seed)] = (arm, _Seed(fn, tuple(inputs), frozenset(), graph))
        return program

    def _special_program(self, seed: int, fn: Callable[..., Any],
                         inputs: tuple[np.ndarray, ...]) -> Program | None:
        try:
            program = Program.from_function(fn, inputs, Provenance(
                "fuzz", f"steer:{seed}:special", int(seed)))
        except Exception:  # noqa: BLE001 - the function refuses these values: a plain program
            return None
        with self._lock:
            self._pending[int(seed)] = ("special", _Seed(fn, inputs, frozenset()))
            self.special_runs += 1
        return program

    def _queue_specials(self, made: _Seed, rewrites: frozenset[str], program: Any) -> None:
        """Queue `made`'s special-value variants, rarest rewrites first (lock held)."""
        priority = sum(1.0 / max(self.hits[item], 1) for item in rewrites)
        rng = np.random.default_rng(next(self._order))
        nan = not (primitives_used(program.jaxpr) & READS_NAN_BITS)
        for inputs in special_variants(made.inputs, rng, SPECIAL_VARIANTS, nan=nan):
            heapq.heappush(self._specials, (-priority, next(self._order), made.fn, inputs))
        if len(self._specials) > MAX_SPECIAL_QUEUE:  # drop the least rare
            self._specials = heapq.nsmallest(MAX_SPECIAL_QUEUE, self._specials)
            heapq.heapify(self._specials)

    def _make(self, arm: str, parent: _Seed | None, rng: np.random.Generator, seed: int
              ) -> tuple[Callable, tuple, Any]:
        kind, _, name = arm.partition(":")
        if kind == "fresh":  # the plain campaign's program of this seed
            graph, inputs = generator.generate_graph(int(seed), max_equations=self.max_equations)
            return graph, inputs, graph
        if kind == "pattern":
            fn, inputs = PATTERNS[name].build(rng)
            return fn, inputs, None
        if name in ("swap", "scale"):
            graph, inputs = _mutate_graph(name, parent, rng)
            return graph, inputs, graph
        fn, inputs = _mutate_wrapped(name, parent, rng)
        return fn, inputs, None

    # -- feedback ---------------------------------------------------------------------------

    def observe(self, seed: int, program: Any, result: Any) -> None:
        """Credit the arm that made `seed`'s program with its novelty; keep the program as a
        seed when it hit a rare item (the campaign's ``on_program``)."""
        with self._lock:
            arm, made = self._pending.pop(int(seed), (None, None))
            if result is None or made is None or arm == "special":
                return
            items = coverage_items(result)
            rewrites = rewrite_items(items)
            if rewrites and self.special_share > 0:
                self._queue_specials(made, rewrites, program)
            novelty = sum(1.0 / (1 + self.hits[item]) for item in items)
            rare = any(self.hits[item] < RARE for item in items)
            self.hits.update(items)
            self.rewards[arm] += min(novelty, 1.0)
            if rare:
                self.corpus.append(dataclasses.replace(made, items=items))
                if len(self.corpus) > MAX_CORPUS:
                    self.corpus.remove(min(self.corpus, key=self._energy))

    def stats(self) -> dict[str, Any]:
        """Arms' pulls and mean rewards, corpus size and items seen (JSON-ready)."""
        with self._lock:
            return {"arms": {a: {"pulls": self.pulls[a],
                                 "mean_reward": self.rewards[a] / self.pulls[a]}
                             for a in self.arms if self.pulls[a]},
                    "corpus": len(self.corpus), "special_runs": self.special_runs,
                    "special_queue": len(self._specials),
                    "items": dict(self.hits.most_common())}
