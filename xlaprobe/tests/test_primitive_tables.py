"""The four per-primitive tables hold what they held before they were built from one record per
primitive: the same keys (the fuzzer's catalogue in the same order) and entries that behave the
same (`tests.primitive_tables` fingerprints them), and the fuzzer generates the same programs from
the same seeds. The fixture was written from the tables as they stood before the move."""

import json

import pytest

from tests import primitive_tables


@pytest.fixture(scope="module")
def tables():
    return primitive_tables.tables()


@pytest.fixture(scope="module")
def fixture():
    return json.loads(primitive_tables.FIXTURE.read_text())


@pytest.mark.parametrize("table", ["primitives", "reference", "ops", "budgets"])
def test_a_table_holds_the_same_keys_and_equivalent_entries(tables, fixture, table):
    now, before = tables[table], fixture[table]
    assert sorted(now) == sorted(before)
    assert [name for name in before if now[name] != before[name]] == []


def test_the_catalogue_keeps_its_order_and_the_fuzzer_its_programs(tables, fixture):
    assert tables["ops_order"] == fixture["ops_order"]  # the generator draws rules by position
    assert tables["programs"] == fixture["programs"]


def test_the_fingerprints_tell_rules_apart(fixture):
    """A fingerprint that every rule shared would prove nothing: elementwise rules differ."""
    ref = fixture["reference"]
    names = ["exp", "log", "sin", "add", "sub", "mul", "max", "min", "floor", "neg", "eq", "lt"]
    assert len({ref[n] for n in names}) == len(names)
    assert len(set(fixture["ops"].values())) == len(fixture["ops"])
