"""Bytes on the wire of a Flower deployment, fast slice: the counting relay (wire.py) counts
exactly the bytes that cross a real loopback socket, the relay's counts are split by round and
data center by time window (flower_deploy.attribute_wire), each DC's rows file round-trips
without pickle, the ledger splits its WAN bytes per DC link, and the compare config crosses to
the ServerApp as JSON. The deployment itself (real processes) is in test_geodml_flower_deploy.py."""

import socket
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from geodml.errors import GeodmlError
from geodml.wire import DOWN, UP, CountingRelay, RelayCount


def _echo_server():
    """A loopback server that echoes every byte back twice (so up and down counts differ)."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = srv.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(np.repeat(np.frombuffer(data, np.uint8), 2).tobytes())

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_relay_counts_exactly_the_bytes_each_way_on_a_real_socket():
    srv = _echo_server()
    payload = bytes(range(256)) * 200  # 51,200 bytes in several chunks
    with CountingRelay(srv.getsockname()) as relay:
        t0 = time.time()
        with socket.create_connection(("127.0.0.1", relay.port)) as c:
            got = b""
            for i in range(0, len(payload), 5000):
                piece = payload[i:i + 5000]
                c.sendall(piece)
                while len(got) < 2 * (i + len(piece)):
                    got += c.recv(65536)
        t1 = time.time()
        deadline = time.time() + 5
        while relay.snapshot().total() < 3 * len(payload) and time.time() < deadline:
            time.sleep(0.01)
        count = relay.snapshot()
    srv.close()
    assert got == np.repeat(np.frombuffer(payload, np.uint8), 2).tobytes()
    assert count.total(UP) == len(payload) and count.total(DOWN) == 2 * len(payload)
    assert count.connections == 1
    assert all(t0 <= t <= t1 + 1 for t, _, _ in count.events)
    assert count.total(start=t1 + 2) == 0


def test_attribute_wire_splits_relay_bytes_by_round_window_and_data_center():
    from geodml.flower_deploy import attribute_wire, wire_summary

    a = RelayCount([(0.5, UP, 100), (1.5, DOWN, 40), (1.6, UP, 7), (2.5, UP, 1000), (3.2, DOWN, 9)])
    b = RelayCount([(1.1, DOWN, 50), (3.1, UP, 60)])
    trace = [{"method": "local_train", "start": 1.0, "end": 2.0, "down": {"A": 16, "B": 16}, "up": {"A": 24, "B": 8}},
             {"method": "local_train", "start": 3.0, "end": 3.5, "down": {"A": 16, "B": 16}, "up": {"A": 24, "B": 0}}]
    rounds = attribute_wire(trace, {"A": a, "B": b})
    assert [r["wire"] for r in rounds] == [{"A": 47, "B": 50}, {"A": 9, "B": 60}]
    assert [r["wire_down"] for r in rounds] == [{"A": 40, "B": 50}, {"A": 9, "B": 0}]
    assert [r["payload"] for r in rounds] == [{"A": 40, "B": 24}, {"A": 40, "B": 16}]
    s = wire_summary(rounds, {"A": 80, "B": 0})
    assert s["wire_bytes"] == 166 and s["payload_bytes"] == 120
    assert s["by_dc"]["A"] == {"wire": 56, "payload": 80, "ledger": 80, "wire_over_payload": 56 / 80}
    assert s["seconds_per_round"] == pytest.approx(0.75)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_file_round_trips_without_pickle(tmp_path, sparse):
    from geodml.flower_bridge import load_rows, save_rows

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 7)) * (rng.random((30, 7)) < 0.3)
    X = sp.csr_matrix(X) if sparse else X
    y = (rng.random(30) < 0.4).astype(float)
    save_rows(str(tmp_path / "dc.npz"), X, y)
    X2, y2 = load_rows(str(tmp_path / "dc.npz"))
    assert sp.issparse(X2) == sparse
    assert np.array_equal(X2.toarray() if sparse else X2, X.toarray() if sparse else X) and np.array_equal(y2, y)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(GeodmlError, match="rows file"):
        load_rows(str(tmp_path / "bad.npz"))


def test_rows_file_worker_equals_the_spec_worker(tmp_path):
    """A deployment's ClientApp builds its DCWorker from its own rows file: same rows, same results."""
    from geodml.compare import CompareConfig, _federation
    from geodml.flower_bridge import FederationSpec, _dc_worker, save_rows

    cfg = CompareConfig(data="dataset:gapminder")
    fed = _federation(cfg)
    spec = FederationSpec(cfg.data, fed.partition, len(fed.dcs), 0, tuple(dc.workers for dc in fed.dcs)).to_json()
    theta = np.linspace(-0.5, 0.5, fed.d + 1)
    for i, dc in enumerate(fed.dcs):
        path = tmp_path / f"dc{i}.npz"
        save_rows(str(path), dc.X, dc.y)
        from_file = _dc_worker({"partition-id": i, "rows-file": str(path)}, spec, i)
        from_spec = _dc_worker({"partition-id": i}, spec, i)
        assert from_file.n == dc.n and np.array_equal(from_file.loss_grad(theta), from_spec.loss_grad(theta))


def test_ledger_splits_wan_bytes_per_data_center_link(cancer_dcs, wan):
    from geodml.algorithms import run
    from geodml.network import Network
    from geodml.settings import Settings

    net = Network(wan, cancer_dcs, cancer_dcs[1].name)
    run("fedavg", net, Settings(rounds=3, local_steps=2))
    by = net.wan_bytes_by_dc()
    d1 = cancer_dcs[0].X.shape[1] + 1
    assert by[cancer_dcs[1].name] == 0  # the hub's own messages cross no WAN
    assert sum(by.values()) == net.wan_bytes
    assert all(by[dc.name] == 3 * 8 * (d1 + d1 + 1) for dc in cancer_dcs if dc.name != net.hub)


def test_compare_config_crosses_to_the_serverapp_as_json():
    from geodml.compare import CompareConfig
    from geodml.flower_deploy import config_from_json, config_to_json
    from geodml.settings import Settings

    cfg = CompareConfig(data="dataset:gapminder", sovereign=("eu-west",), algos=("fedavg", "oneshot"),
                        settings=Settings(rounds=3, inner="adamw", model="mlp:8"), seed=4, backend="flower-deployment")
    assert config_from_json(config_to_json(cfg)) == cfg
    with pytest.raises(GeodmlError, match="malformed deployment job"):
        config_from_json('{"data": 1}')


def test_deployment_backend_refuses_jobs_in_one_line(geodml):
    r = geodml("compare", "--data", "sklearn:iris", "--backend", "flower-deployment", "--jobs", "2")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "--jobs does not apply to --backend flower-deployment" in r.stderr


def test_sigterm_becomes_an_interrupt_inside_a_deployment_and_the_handler_is_restored():
    import os
    import signal

    from geodml.flower_deploy import stop_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with stop_on_sigterm():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
    assert signal.getsignal(signal.SIGTERM) is before
