"""A fleet of disks with ground truth, emitting Bernoulli samples without full traces.

Each disk belongs to a class. A disk's arrivals are a non-homogeneous Poisson process with intensity
``rate * m_k * diurnal(t) * burst(t)`` (m_k: per-disk lognormal variation; the burst is a daily
scheduled job of the class, jittered per day); each request's marks (read/write, file by Zipf
popularity, WARM/COLD zone of the file, cache hit, size, service class, HDD service time) are drawn
independently given its time. Bernoulli sampling at rate p of such a marked Poisson process is again
a marked Poisson process with intensity ``p * lambda(t)`` and the same marks (thinning; Kingman,
"Poisson Processes", 1993, sec. 5.1), so samples are drawn directly: a Poisson count per disk-day,
times from the intensity's inverse CDF, then marks. Full traces (p = 1) come from the same code.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from thesios.diskmodel import HDDModel
from thesios.errors import ThesiosInputError
from thesios.requests import ZONE_COLD, ZONE_WARM, Requests
from thesios.samplers import check_rate

DAY_S = 86400.0
#: Largest seed: numpy's legacy and scikit-learn's random_state take 32-bit seeds.
MAX_SEED = 2**32 - 1
#: Most days of a fleet (--days or a fleet file's "days"): the held-out disks' full traces grow with
#: the days (validate --days 100000 ran for minutes; 1e20 was OOM-killed).
MAX_DAYS = 31
_BIN_S = 60.0  # intensity grid: one-minute bins, uniform inside a bin
_N_BINS = int(DAY_S / _BIN_S)


@dataclass(frozen=True)
class DiskClass:
    """A class of similar disks (one workload mix). Rates in requests/second, sizes in bytes.

    ``size_probs``, ``service_class_probs`` sum to 1. ``hit_warm``/``hit_cold`` are the buffer-cache
    hit probabilities of reads of WARM/COLD files. ``burst_hour`` is the daily start of the class's
    scheduled burst (None: no burst), lasting ``burst_minutes`` at ``burst_factor`` times the rate.
    ``rate_sigma`` is the per-disk lognormal spread of the rate; ``read_jitter`` the per-disk s.d.
    of the read fraction.
    """

    name: str
    rate: float
    read_fraction: float
    sizes: tuple[int, ...]
    size_probs: tuple[float, ...]
    warm_fraction: float
    hit_warm: float
    hit_cold: float
    peak_hour: float = 14.0
    diurnal_amplitude: float = 0.5
    burst_hour: float | None = None
    burst_minutes: float = 30.0
    burst_factor: float = 3.0
    zipf_s: float = 1.1
    n_files: int = 2000
    service_class_probs: tuple[float, float, float] = (0.3, 0.5, 0.2)
    rate_sigma: float = 0.04
    read_jitter: float = 0.01


@dataclass(frozen=True)
class FleetSpec:
    """A fleet: ``disks_per_class`` disks of each class over ``days`` days, one HDD model.

    Disk ids are ``class_index * disks_per_class + j``; the generator's ground-truth class of a disk
    is ``disk_id // disks_per_class``.
    """

    classes: tuple[DiskClass, ...]
    disks_per_class: int
    days: int = 1
    seed: int = 0
    hdd: HDDModel = field(default_factory=HDDModel)

    @property
    def n_disks(self) -> int:
        """Number of disks in the fleet."""
        return len(self.classes) * self.disks_per_class

    def disk_class(self, disk_id: np.ndarray) -> np.ndarray:
        """Ground-truth class index (int64) of each disk id."""
        return np.asarray(disk_id) // self.disks_per_class


KiB = 1024
MiB = 1024 * KiB

DEFAULT_CLASSES: tuple[DiskClass, ...] = (
    DiskClass("serving", rate=10.0, read_fraction=0.75, sizes=(4 * KiB, 64 * KiB, 256 * KiB),
              size_probs=(0.5, 0.3, 0.2), warm_fraction=0.9, hit_warm=0.6, hit_cold=0.2,
              peak_hour=14.0, diurnal_amplitude=0.5, service_class_probs=(0.7, 0.2, 0.1)),
    DiskClass("batch", rate=6.0, read_fraction=0.55, sizes=(256 * KiB, 1 * MiB, 2 * MiB),
              size_probs=(0.3, 0.5, 0.2), warm_fraction=0.5, hit_warm=0.3, hit_cold=0.05,
              peak_hour=3.0, diurnal_amplitude=0.3, burst_hour=1.0, burst_minutes=60.0, burst_factor=2.5,
              service_class_probs=(0.05, 0.8, 0.15)),
    DiskClass("archive", rate=4.0, read_fraction=0.3, sizes=(1 * MiB, 4 * MiB),
              size_probs=(0.6, 0.4), warm_fraction=0.1, hit_warm=0.2, hit_cold=0.02,
              peak_hour=10.0, diurnal_amplitude=0.2, service_class_probs=(0.05, 0.25, 0.7)),
    DiskClass("mixed", rate=8.0, read_fraction=0.6, sizes=(16 * KiB, 128 * KiB, 1 * MiB),
              size_probs=(0.4, 0.4, 0.2), warm_fraction=0.7, hit_warm=0.45, hit_cold=0.1,
              peak_hour=20.0, diurnal_amplitude=0.6, burst_hour=12.0, burst_minutes=20.0, burst_factor=3.0,
              service_class_probs=(0.4, 0.4, 0.2)),
)


def default_fleet(disks_per_class: int = 2500, days: int = 4, seed: int = 0) -> FleetSpec:
    """The embedded default fleet: four classes (serving, batch, archive, mixed), 7200 RPM HDDs."""
    return FleetSpec(DEFAULT_CLASSES, disks_per_class=disks_per_class, days=days, seed=seed)


class FleetGenerator:
    """Draws requests of a :class:`FleetSpec` at any sampling rate, disk-day by disk-day.

    Per-disk parameters come from ``spec.seed`` alone, so samples and full traces of the same
    fleet agree on them; each call takes its own ``numpy.random.Generator`` for the requests.
    """

    def __init__(self, spec: FleetSpec) -> None:
        if spec.disks_per_class < 1 or spec.days < 1 or not spec.classes:
            raise ThesiosInputError("a fleet needs at least one class, one disk per class and one day")
        self.spec = spec
        prng = np.random.default_rng([spec.seed, 1])
        n = spec.n_disks
        cls = spec.disk_class(np.arange(n))
        sigma = np.array([c.rate_sigma for c in spec.classes])[cls]
        self.rate_mult = np.exp(sigma * prng.standard_normal(n) - sigma**2 / 2)
        jitter = np.array([c.read_jitter for c in spec.classes])[cls]
        base = np.array([c.read_fraction for c in spec.classes])[cls]
        self.read_fraction = np.clip(base + jitter * prng.standard_normal(n), 0.0, 1.0)
        self._profiles: dict[tuple[int, int], tuple[np.ndarray, float]] = {}
        self._file_cdf = [self._zipf_cdf(c) for c in spec.classes]
        self._file_warm = [
            np.random.default_rng([spec.seed, 2, i]).random(c.n_files) < c.warm_fraction
            for i, c in enumerate(spec.classes)
        ]

    @staticmethod
    def _zipf_cdf(c: DiskClass) -> np.ndarray:
        w = np.arange(1, c.n_files + 1, dtype=np.float64) ** -c.zipf_s
        return np.cumsum(w) / w.sum()

    def profile(self, class_index: int, day: int) -> tuple[np.ndarray, float]:
        """(CDF over the day's one-minute bins, expected requests of a disk with m_k = 1) of a class-day."""
        key = (class_index, day)
        if key not in self._profiles:
            c = self.spec.classes[class_index]
            hours = (np.arange(_N_BINS) + 0.5) * _BIN_S / 3600.0
            shape = 1.0 + c.diurnal_amplitude * np.cos(2 * np.pi * (hours - c.peak_hour) / 24.0)
            if c.burst_hour is not None:
                jitter_min = np.random.default_rng([self.spec.seed, 3, class_index, day]).normal(0.0, 5.0)
                start = (c.burst_hour * 60.0 + jitter_min) % (24 * 60)
                minutes = np.arange(_N_BINS) + 0.5
                in_burst = ((minutes - start) % (24 * 60)) < c.burst_minutes
                shape = shape * np.where(in_burst, c.burst_factor, 1.0)
            weights = c.rate * shape * _BIN_S
            self._profiles[key] = (np.cumsum(weights) / weights.sum(), float(weights.sum()))
        return self._profiles[key]

    def expected_requests(self, disk_id: np.ndarray, day: int) -> np.ndarray:
        """Expected number of requests (float64) of each disk on ``day`` at full rate."""
        disk_id = np.asarray(disk_id)
        cls = self.spec.disk_class(disk_id)
        totals = np.array([self.profile(int(c), day)[1] for c in range(len(self.spec.classes))])
        return self.rate_mult[disk_id] * totals[cls]

    def generate(self, disk_ids: np.ndarray, day: int, rate: float, rng: np.random.Generator) -> Requests:
        """Requests of ``disk_ids`` on ``day`` sampled at ``rate`` p in (0, 1] (p = 1: full traces).

        Times are absolute seconds (``day * 86400 + time of day``). Rows are grouped by class, not
        sorted by time. Memory and time are proportional to the number of requests drawn.

        Raises:
            ThesiosInputError: p outside (0, 1], a day outside the fleet, an unknown disk id.
        """
        check_rate(rate)
        if not 0 <= day < self.spec.days:
            raise ThesiosInputError(f"day {day} outside the fleet's {self.spec.days} days")
        disk_ids = np.asarray(disk_ids, dtype=np.int64)
        if len(disk_ids) and (disk_ids.min() < 0 or disk_ids.max() >= self.spec.n_disks):
            raise ThesiosInputError("unknown disk id")
        cls_of = self.spec.disk_class(disk_ids)
        parts = []
        for ci in np.unique(cls_of):
            disks = disk_ids[cls_of == ci]
            counts = rng.poisson(rate * self.expected_requests(disks, day))
            parts.append(self._draw_class(int(ci), day, np.repeat(disks, counts), rng))
        if not parts:
            return self._draw_class(0, day, np.zeros(0, np.int64), rng)
        return Requests.concat(parts)

    def _draw_class(self, ci: int, day: int, disk: np.ndarray, rng: np.random.Generator) -> Requests:
        c = self.spec.classes[ci]
        hdd = self.spec.hdd
        n = len(disk)
        cdf, _ = self.profile(ci, day)
        bins = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), _N_BINS - 1)
        start = day * DAY_S + (bins + rng.random(n)) * _BIN_S
        is_read = rng.random(n) < self.read_fraction[disk]
        rank = np.minimum(np.searchsorted(self._file_cdf[ci], rng.random(n), side="right"), c.n_files - 1)
        warm = self._file_warm[ci][rank]
        zone = np.where(warm, ZONE_WARM, ZONE_COLD).astype(np.int8)
        hit = rng.random(n) < np.where(warm, c.hit_warm, c.hit_cold)
        cache_hit = np.where(is_read, hit.astype(np.int8), np.int8(-1)).astype(np.int8)
        size = np.asarray(c.sizes, dtype=np.int64)[rng.choice(len(c.sizes), size=n, p=c.size_probs)]
        sclass = rng.choice(3, size=n, p=c.service_class_probs).astype(np.int8)
        # Where a file lives on the platter: WARM files on the outer half, COLD on the inner half,
        # at a position fixed per (disk, file) by a multiplicative hash.
        h = ((disk.astype(np.uint64) * np.uint64(1_000_003) + rank.astype(np.uint64)) * np.uint64(2_654_435_761)) % np.uint64(2**32)
        position = 0.5 * (h.astype(np.float64) / 2**32) + np.where(warm, 0.0, 0.5)
        seek_distance = np.abs(position - rng.random(n))  # head at a uniformly random track
        rot = hdd.rotation_time(rng.random(n))
        transfer = hdd.transfer_time(size, position)
        service = hdd.seek_time(seek_distance) + rot + transfer
        miss_read = is_read & (cache_hit == 0)
        return Requests(
            disk_id=disk.astype(np.int32),
            start_time=start,
            is_read=is_read,
            cache_hit=cache_hit,
            file_id=rank.astype(np.int64),
            file_offset=rng.integers(0, 16384, size=n, dtype=np.int64) * 4096,
            size=size,
            zone=zone,
            service_class=sclass,
            disk_time=np.where(miss_read, service, 0.0),
            rotation_time=np.where(miss_read, rot, 0.0),
            transfer_time=np.where(miss_read, transfer, 0.0),
            app=np.full(n, ci, dtype=np.int16),
        )

    @property
    def applications(self) -> tuple[str, ...]:
        """Application names, indexed by :attr:`Requests.app` (one per class)."""
        return tuple(c.name for c in self.spec.classes)

    def sample_fleet(self, rate: float, rng: np.random.Generator, disk_ids: np.ndarray | None = None) -> Requests:
        """Bernoulli samples at ``rate`` of every disk-day of the fleet (or of ``disk_ids``)."""
        ids = np.arange(self.spec.n_disks) if disk_ids is None else np.asarray(disk_ids)
        return Requests.concat([self.generate(ids, d, rate, rng) for d in range(self.spec.days)])


#: Ranges of a fleet file's numbers: (kind, low, high, brackets); the highs keep a (class, day)
#: partition's arrays in memory (rate x disks_per_class x 86,400 s requests at full rate).
CLASS_BOUNDS: dict[str, tuple[type, float, float, str]] = {
    "rate": (float, 0, 1000, "(]"), "read_fraction": (float, 0, 1, "[]"), "warm_fraction": (float, 0, 1, "[]"),
    "hit_warm": (float, 0, 1, "[]"), "hit_cold": (float, 0, 1, "[]"), "peak_hour": (float, 0, 24, "[)"),
    "diurnal_amplitude": (float, 0, 1, "[)"), "burst_minutes": (float, 0, 1440, "(]"),
    "burst_factor": (float, 0, 100, "(]"), "zipf_s": (float, 0, 10, "[]"), "n_files": (int, 1, 1_000_000, "[]"),
    "rate_sigma": (float, 0, 5, "[]"), "read_jitter": (float, 0, 1, "[]"),
}
HDD_BOUNDS: dict[str, tuple[type, float, float, str]] = {
    "rpm": (float, 0, 30_000, "(]"), "seek_min_s": (float, 0, 1, "[]"), "seek_max_s": (float, 0, 10, "[]"),
    "outer_rate_bps": (float, 0, 1e11, "(]"), "inner_rate_bps": (float, 0, 1e11, "(]"),
}
SPEC_BOUNDS: dict[str, tuple[type, float, float, str]] = {
    "disks_per_class": (int, 2, 100_000, "[]"), "days": (int, 1, MAX_DAYS, "[]"), "seed": (int, 0, MAX_SEED, "[]"),
}
#: Largest request size of a class, bytes.
MAX_SIZE = 1 << 30


def check_number(value: object, kind: type, low: float, high: float, brackets: str, what: str) -> None:
    """Refuse ``value`` unless it is a finite number of ``kind`` (int: an integer; float: any
    number) within ``low``..``high``, each end closed or open as ``brackets`` says (e.g. ``"(]"``).

    Raises:
        ThesiosInputError: ``what must be a number in (0, 1000], got 'a'``.
    """
    is_int = isinstance(value, int) and not isinstance(value, bool)
    # An int is always finite (and math.isfinite cannot take one beyond a float's range: JSON's
    # integers have any number of digits).
    ok = is_int or (kind is float and isinstance(value, float) and math.isfinite(value))
    if ok:
        ok = (low < value if brackets[0] == "(" else low <= value) and (value < high if brackets[1] == ")" else value <= high)
    if not ok:
        noun = "an integer" if kind is int else "a number"
        sign = "a negative" if is_int and value < 0 else "an"
        got = f"{sign} integer of {len(str(abs(value)))} digits" if is_int and abs(value) >= 10**15 else repr(value)
        raise ThesiosInputError(f"{what} must be {noun} in {brackets[0]}{low:.12g}, {high:.12g}{brackets[1]}, got {got}")


def _check_classes(classes: tuple[DiskClass, ...], source: str) -> None:
    """Every field of every class: type, finiteness and range; names non-empty and distinct."""
    names = [c.name for c in classes]
    for i, c in enumerate(classes):
        if not isinstance(c.name, str) or not c.name.strip():
            raise ThesiosInputError(f"{source}: classes[{i}]: name must be a non-empty string, got {c.name!r}")
        if names.count(c.name) > 1:
            raise ThesiosInputError(f"{source}: two classes are named {c.name!r}; names must differ")
        where = f"{source}: classes[{i}] ({c.name})"
        for name, bounds in CLASS_BOUNDS.items():
            check_number(getattr(c, name), *bounds, f"{where}: {name}")
        if c.burst_hour is not None:
            check_number(c.burst_hour, float, 0, 24, "[)", f"{where}: burst_hour")
        for name in ("sizes", "size_probs", "service_class_probs"):
            if not isinstance(getattr(c, name), tuple) or not getattr(c, name):
                raise ThesiosInputError(f"{where}: {name} must be a non-empty list, got {getattr(c, name)!r}")
        for size in c.sizes:
            check_number(size, int, 1, MAX_SIZE, "[]", f"{where}: sizes")
        if len(c.sizes) != len(c.size_probs):
            raise ThesiosInputError(f"{where}: sizes and size_probs must have the same length")
        if len(c.service_class_probs) != 3:
            raise ThesiosInputError(f"{where}: service_class_probs needs 3 entries")
        for name in ("size_probs", "service_class_probs"):
            for prob in getattr(c, name):
                check_number(prob, float, 0, 1, "[]", f"{where}: {name}")
            if abs(sum(getattr(c, name)) - 1.0) > 1e-9:
                raise ThesiosInputError(f"{where}: {name} must sum to 1")


def fleet_from_json(text: str, source: str = "fleet spec") -> FleetSpec:
    """Parse a fleet spec from JSON (plain data; nothing is executed).

    Shape: ``{"classes": [{DiskClass fields}], "disks_per_class": int, "days": int, "seed": int,
    "hdd": {HDDModel fields}}``; ``classes`` may also be ``"default"``.

    Raises:
        ThesiosInputError: malformed JSON, unknown or missing fields, a field of the wrong type,
            not finite or outside its range (:data:`CLASS_BOUNDS`, :data:`HDD_BOUNDS`,
            :data:`SPEC_BOUNDS`), probabilities that do not sum to 1, two classes of one name.
    """
    import dataclasses
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ThesiosInputError(f"{source}: not JSON ({err.msg} at line {err.lineno})") from None
    except ValueError:  # CPython refuses to convert an integer literal of more digits than its limit
        raise ThesiosInputError(f"{source}: a number of more than {sys.get_int_max_str_digits()} digits") from None
    if not isinstance(doc, dict):
        raise ThesiosInputError(f"{source}: expected a JSON object")
    unknown = set(doc) - {"classes", "disks_per_class", "days", "seed", "hdd"}
    if unknown:
        raise ThesiosInputError(f"{source}: unknown field(s) {sorted(unknown)}")

    def build(cls, data, where):
        if not isinstance(data, dict):
            raise ThesiosInputError(f"{source}: {where} must be an object")
        names = {f.name for f in dataclasses.fields(cls)}
        bad = set(data) - names
        if bad:
            raise ThesiosInputError(f"{source}: {where}: unknown field(s) {sorted(bad)}")
        data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        try:
            return cls(**data)
        except TypeError as err:
            raise ThesiosInputError(f"{source}: {where}: {err}") from None

    raw_classes = doc.get("classes", "default")
    if raw_classes == "default":
        classes = DEFAULT_CLASSES
    elif isinstance(raw_classes, list) and raw_classes:
        classes = tuple(build(DiskClass, c, f"classes[{i}]") for i, c in enumerate(raw_classes))
    else:
        raise ThesiosInputError(f"{source}: classes must be a non-empty list or \"default\"")
    _check_classes(classes, source)
    hdd = build(HDDModel, doc.get("hdd", {}), "hdd")
    for name, bounds in HDD_BOUNDS.items():
        check_number(getattr(hdd, name), *bounds, f"{source}: hdd: {name}")
    if hdd.seek_max_s < hdd.seek_min_s:
        raise ThesiosInputError(f"{source}: hdd: seek_max_s must be >= seek_min_s")
    dpc, days, seed = doc.get("disks_per_class", 100), doc.get("days", 1), doc.get("seed", 0)
    for name, value in (("disks_per_class", dpc), ("days", days), ("seed", seed)):
        check_number(value, *SPEC_BOUNDS[name], f"{source}: {name}")
    return FleetSpec(classes, disks_per_class=dpc, days=days, seed=seed, hdd=hdd)
