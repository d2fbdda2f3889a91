"""The fault machinery on its own: route proxies (partition, one-way, delay), the power-loss file
system (drops exactly what was not fsynced, O_SYNC writes kept, ENOSPC), and the conf files."""

from __future__ import annotations

import os
import random
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.powerloss import PowerLoss
from chaos.powerloss import available as power_unavailable
from chaos.proxy import LinkFaults, ProxyMesh, partition
from chaos.supervisor import Supervisor, render_conf

RECV_TIMEOUT_S = 3.0


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def mesh() -> Iterator[ProxyMesh]:
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    m = ProxyMesh(("a", "b"), {"a": port, "b": port}, random.Random(1))
    m.start()
    try:
        yield m
    finally:
        m.close()
        srv.shutdown()
        srv.server_close()


def _dial(m: ProxyMesh) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", m.ports[("a", "b")]), timeout=RECV_TIMEOUT_S)
    s.settimeout(RECV_TIMEOUT_S)
    return s


def _echo(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_proxy_forwards_and_partition_resets(mesh: ProxyMesh) -> None:
    s = _dial(mesh)
    assert _echo(s, b"hello") == b"hello"
    mesh.set_faults(partition([["a"], ["b"]]))
    with pytest.raises(OSError):  # reset (or closed) at once, not stalled
        for _ in range(3):
            if not _echo(s, b"x"):
                raise ConnectionResetError("closed")
    s2 = _dial(mesh)  # new connections across the cut are closed on accept
    with pytest.raises(OSError):
        if not _echo(s2, b"y"):
            raise ConnectionResetError("closed")
    mesh.heal()
    assert _echo(_dial(mesh), b"again") == b"again"


def test_proxy_one_way_holds_then_delivers(mesh: ProxyMesh) -> None:
    s = _dial(mesh)
    mesh.set_faults(LinkFaults(frozenset({("a", "b")})))  # a -> b held, b -> a flows
    s.sendall(b"held")
    s.settimeout(0.3)
    with pytest.raises(TimeoutError):
        s.recv(10)
    mesh.heal()
    s.settimeout(RECV_TIMEOUT_S)
    assert s.recv(10) == b"held"


def test_proxy_delay(mesh: ProxyMesh) -> None:
    s = _dial(mesh)
    mesh.set_faults(LinkFaults(delay={("a", "b"): (0.2, 0.0)}))
    t0 = time.monotonic()
    assert _echo(s, b"slow") == b"slow"
    assert time.monotonic() - t0 >= 0.19


def test_conf_routes_go_through_proxies(tmp_path: Path) -> None:
    sup = Supervisor("nats-server", tmp_path, ("n1", "n2", "n3"), sync_always=True)
    ports = {(a, b): 40000 + i for i, (a, b) in enumerate(
        (a, b) for a in sup.nodes for b in sup.nodes if a != b)}  # fmt: skip
    sup.write_confs(ports)
    text = sup.nodes["n1"].conf_path.read_text()
    assert text == render_conf(sup.nodes["n1"], sup.dead_port, True, "chaos")
    assert f"127.0.0.1:{ports[('n1', 'n2')]}" in text and "sync_interval: always" in text
    assert str(sup.nodes["n2"].cluster_port) not in text  # never a peer's real route port
    assert f'advertise: "127.0.0.1:{sup.dead_port}"' in text


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[tuple[PowerLoss, Path]]:
    why = power_unavailable()
    if why is not None:
        pytest.skip(f"needs FUSE: {why}")
    pl = PowerLoss()
    mount = tmp_path / "store"
    try:
        pl.mount("n1", mount, tmp_path)
        pl.wait_mounted()
        yield pl, mount
    finally:
        pl.close()


def test_power_loss_drops_exactly_the_unsynced(lazy: tuple[PowerLoss, Path]) -> None:
    pl, m = lazy
    (m / "d").mkdir()
    with open(m / "d" / "a", "wb") as f:
        f.write(b"hello")
        f.flush()
        os.fsync(f.fileno())
        f.write(b" world")  # not synced
    with open(m / "d" / "a", "r+b") as f:
        f.write(b"J")  # overwrite of synced bytes, not synced
    (m / "d" / "new").write_bytes(b"never synced")
    fd = os.open(m / "d" / "osync", os.O_WRONLY | os.O_CREAT | os.O_SYNC, 0o644)
    os.write(fd, b"durable at once")
    os.close(fd)
    assert (m / "d" / "a").read_bytes() == b"Jello world"
    out = pl.crash("n1")
    assert out["new_files_emptied"] == 1
    assert (m / "d" / "a").read_bytes() == b"hello"
    assert (m / "d" / "new").read_bytes() == b""  # the entry survives (metadata), its data not
    assert (m / "d" / "osync").read_bytes() == b"durable at once"


def test_disk_full_answers_enospc(lazy: tuple[PowerLoss, Path]) -> None:
    pl, m = lazy
    pl.disk_full("n1", True)
    with pytest.raises(OSError) as err:
        (m / "x").write_bytes(b"data")
    assert err.value.errno == 28  # ENOSPC
    pl.disk_full("n1", False)
    (m / "x").write_bytes(b"data")
    assert (m / "x").read_bytes() == b"data"


def test_composite_scenarios_carry_their_parts_needs() -> None:
    from chaos.nemesis import SCENARIOS, scenario_of

    assert scenario_of("kill-leader") is SCENARIOS["kill-leader"]
    both = scenario_of("kill-leader+peer-remove")
    assert (both.family, both.replicas, both.needs_power) == ("F1+F13", 2, False)
    assert scenario_of("bounce+power-loss-all").needs_power
    assert scenario_of("stepdown+slow-links").replicas is None
    with pytest.raises(KeyError):
        scenario_of("kill-leader+nope")


def test_a_node_whose_port_was_taken_starts_on_fresh_ports(tmp_path: Path) -> None:
    """Another process on the machine binds a node's cluster port after the harness drew it:
    the node's first start fails, and the bring-up gives it fresh ports and starts it again
    (a campaign run was once lost to this), the proxies following its new cluster port."""
    import asyncio

    from chaos.run import NAMES, _bring_up
    from chaos.supervisor import SupervisorError, nats_server_binary

    try:
        nats_server_binary()
    except SupervisorError as exc:
        pytest.skip(str(exc))
    sup = Supervisor("nats-server", tmp_path, NAMES, sync_always=False)
    mesh = ProxyMesh(NAMES, {n: sup.nodes[n].cluster_port for n in NAMES}, random.Random(1))
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken = sup.nodes["n2"].cluster_port
    squatter.bind(("127.0.0.1", taken))
    squatter.listen()
    notes: list[str] = []
    try:
        mesh.start()
        sup.write_confs(mesh.ports)
        for n in NAMES:
            sup.start(n)
        assert asyncio.run(_bring_up(sup, mesh, notes)), notes
        assert sup.nodes["n2"].cluster_port != taken
        assert mesh.cluster_ports["n2"] == sup.nodes["n2"].cluster_port
        assert any(note.startswith("n2: a port was taken") for note in notes), notes
        assert sup.nodes["n2"].starts == 2 and sup.nodes["n1"].starts == 1
    finally:
        squatter.close()
        sup.close()
        mesh.close()
