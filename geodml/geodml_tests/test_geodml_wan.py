import pytest
import yaml

from geodml.errors import GeodmlError
from geodml.wan import load_wan


def test_default_wan_has_a_full_mesh(wan):
    assert 3 <= len(wan.regions) <= 5
    names = wan.names
    for a in names:
        for b in names:
            if a != b:
                assert wan.link(a, b).bandwidth_gbps > 0


def test_transfer_time_and_egress_closed_form(wan):
    ln = wan.link("us-east", "eu-west")
    b = 123_456_789
    assert wan.transfer_seconds("us-east", "eu-west", b) == pytest.approx(ln.rtt_ms / 2000 + 8 * b / (ln.bandwidth_gbps * 1e9), rel=1e-15)
    assert wan.transfer_seconds("us-east", "eu-west", b, flows=3) == pytest.approx(ln.rtt_ms / 2000 + 24 * b / (ln.bandwidth_gbps * 1e9), rel=1e-15)
    assert wan.egress_usd("ap-southeast", "us-east", 2e9) == pytest.approx(0.18)
    assert wan.egress_usd("us-east", "us-east", 2e9) == 0.0


def _write(tmp_path, doc):
    p = tmp_path / "wan.yaml"
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return p


def _good():
    reg = lambda n: {"name": n, "workers": 2, "compute_gflops": 1.0, "intra_bandwidth_gbps": 10.0, "intra_rtt_ms": 0.1, "egress_usd_per_gb": 0.02}
    return {"regions": [reg("a"), reg("b")], "links": [{"between": ["a", "b"], "bandwidth_gbps": 1.0, "rtt_ms": 10, "egress_usd_per_gb": 0.05}]}


def test_custom_file_and_link_price_override(tmp_path):
    w = load_wan(_write(tmp_path, _good()))
    assert w.egress_usd("a", "b", 1e9) == pytest.approx(0.05)


@pytest.mark.parametrize("mutate", [
    lambda d: d["links"].clear(),                                    # missing pair
    lambda d: d["regions"][0].update(workers=0),
    lambda d: d["regions"][0].update(compute_gflops="fast"),
    lambda d: d["regions"][0].pop("intra_rtt_ms"),
    lambda d: d["regions"][1].update(name="a"),
    lambda d: d["links"][0].update(between=["a", "zz"]),
    lambda d: d["links"][0].update(bandwidth_gbps=-1),
    lambda d: d["links"].append(dict(d["links"][0])),
    lambda d: d.update(extra=1),
    lambda d: d["regions"][0].update(color="red"),
])
def test_malformed_wan_files(tmp_path, mutate):
    doc = _good()
    mutate(doc)
    with pytest.raises(GeodmlError, match="malformed WAN file"):
        load_wan(_write(tmp_path, doc))


@pytest.mark.parametrize("text", ["regions: [", "- 1\n- 2\n", "!!python/object/apply:os.system ['echo hi']", ""])
def test_non_yaml_or_code_is_refused(tmp_path, text):
    with pytest.raises(GeodmlError):
        load_wan(_write(tmp_path, text))


def test_missing_file():
    with pytest.raises(GeodmlError, match="not found"):
        load_wan("/no/such/wan.yaml")


def test_python_tag_inside_a_valid_wan_executes_nothing(tmp_path):
    from importlib import resources

    marker = tmp_path / "executed"
    text = resources.files("geodml").joinpath("wan_default.yaml").read_text()
    text = text.replace("egress_usd_per_gb: 0.09", f'egress_usd_per_gb: !!python/object/apply:os.system ["touch {marker}"]')
    p = tmp_path / "wan.yaml"
    p.write_text(text)
    with pytest.raises(GeodmlError, match="not valid YAML"):
        load_wan(p)
    assert not marker.exists()


def test_yaml_syntax_error_names_the_problem_and_line(tmp_path):
    p = tmp_path / "wan.yaml"
    p.write_text("regions:\n  - name: a\n    workers: [1\nlinks: []\n")
    with pytest.raises(GeodmlError, match=r"not valid YAML \(.+ at line \d+, column \d+\)"):
        load_wan(p)


def test_an_integer_beyond_pythons_digit_limit_is_one_line(tmp_path):
    # yaml.safe_load's int() raised ValueError past CPython's 4300 digits: a traceback, exit 1
    p = tmp_path / "wan.yaml"
    p.write_text("regions: []\nlinks: []\nx: 1" + "0" * 5000 + "\n")
    with pytest.raises(GeodmlError) as exc:
        load_wan(p)
    assert str(exc.value) == "malformed WAN file: a number of more than 4300 digits"


def test_folder_is_not_a_wan_file(tmp_path):
    with pytest.raises(GeodmlError, match="is a folder"):
        load_wan(tmp_path)
