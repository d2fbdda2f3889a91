"""Hostile input on the cluster port and the monitoring port.

Cluster port: a stranger's route ``CONNECT``/``INFO`` with deep JSON or
mistyped fields must end that connection at most — both servers stay up and
keep serving clients.  (Transcripts are not compared: nats-server also
checks the cluster name of a route's CONNECT, a route-compat matter outside
this suite.)

Monitoring port: a crowd of half-sent HTTP requests must not lock operators
out of ``/varz``; a request dribbled a byte at a time is cut, as nats-server
cuts it (after ~5 s: ``REQUEST_HEAD_S_MAX``).
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.hostile.conftest import LIVENESS_S, Observer, start_pair, stop_pair
from tests.support import ServerProcess

HALF_OPEN = 300
HTTP_S = 10.0
SLOW_CUT_S_MAX = 30.0
ROUTE_READ_S = 0.5  # what the route answers is not compared, only liveness


def deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


@pytest.fixture(scope="module")
def cluster_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    base = tmp_path_factory.mktemp("hostile-cluster")
    args = ["--cluster", "nats://127.0.0.1:-1", "--cluster_name", "c", "-m", "-1"]
    p = start_pair(base, args)
    try:
        yield p
    finally:
        stop_pair(p)


ROUTE_INPUTS = [
    pytest.param(b'CONNECT {"x":' + deep(1500) + b"}\r\n", id="connect-deep"),
    pytest.param(b'CONNECT {"name":' + deep(1500) + b"}\r\n", id="connect-deep-known-field"),
    pytest.param(b"INFO " + deep(1500) + b"\r\n", id="info-deep-first"),
    pytest.param(
        b'CONNECT {"verbose":false,"name":"z","cluster":"c"}\r\nINFO {"server_id":"NZ","x":'
        + deep(1500)
        + b"}\r\n",
        id="info-deep-after-connect",
    ),
    pytest.param(
        b'CONNECT {"verbose":false,"name":"z","cluster":"c"}\r\n'
        b'INFO {"server_id":"NZ","connect_urls":5,"port":"x"}\r\n',
        id="info-mistyped-after-connect",
    ),
    pytest.param(
        b'CONNECT {"verbose":false,"name":"z","cluster":"c"}\r\nRS+ $G ' + b"*." * 1500 + b"x\r\n",
        id="rsub-1500-tokens",
    ),
    pytest.param(bytes(range(256)) * 4 + b"\r\n", id="garbage"),
]


@pytest.mark.parametrize("data", ROUTE_INPUTS)
def test_route_port_input(cluster_pair: dict[str, ServerProcess], data: bytes) -> None:
    for kind, sp in cluster_pair.items():
        host, port = sp.ports["cluster"][0].split("//")[1].rsplit(":", 1)
        with Observer(sp) as obs:
            with socket.create_connection((host, int(port)), timeout=LIVENESS_S) as s:
                try:  # (trijet's cluster port speaks after the peer's first bytes)
                    s.sendall(data + b"PING\r\n")
                    s.settimeout(ROUTE_READ_S)
                    s.recv(65536)
                except OSError:
                    pass  # closed on us: fine
            obs.assert_serving()
        assert sp.alive(), kind


def _get(url: str) -> tuple[int, dict[str, object]]:
    with urllib.request.urlopen(url, timeout=HTTP_S) as r:
        return r.status, json.loads(r.read())


def test_half_open_http_does_not_lock_out_operators(pair: dict[str, ServerProcess]) -> None:
    for kind, sp in pair.items():
        mon = sp.monitoring_url
        assert mon is not None
        host, port = mon.split("//")[1].rsplit(":", 1)
        socks = []
        try:
            for _ in range(HALF_OPEN):
                s = socket.create_connection((host, int(port)), timeout=LIVENESS_S)
                s.sendall(b"GET /varz HTTP/1.1\r\nHost: x\r\n")  # never finished
                socks.append(s)
            for path in ("/varz", "/healthz", "/jsz"):
                status, doc = _get(mon + path)
                assert status == 200 and doc, (kind, path)
        finally:
            for s in socks:
                s.close()
        assert sp.alive(), kind


def test_dribbled_request_is_cut(pair: dict[str, ServerProcess]) -> None:
    """A request head sent one byte at a time never completes: both servers
    close the connection (nats-server after ~5 s) instead of waiting forever."""
    for kind, sp in pair.items():
        mon = sp.monitoring_url
        assert mon is not None
        host, port = mon.split("//")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=LIVENESS_S) as s:
            s.settimeout(0.5)
            deadline = time.monotonic() + SLOW_CUT_S_MAX
            closed = False
            head = b"GET /varz HTTP/1.1\r\nX-Slow: " + b"x" * 10_000
            for b in head:
                if time.monotonic() > deadline:
                    break
                try:
                    s.sendall(bytes([b]))
                    if s.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue  # the pace of the dribble: one byte per recv timeout
                except OSError:
                    closed = True
                    break
            assert closed, f"{kind}: a dribbled request held its connection open"
        status, _ = _get(mon + "/varz")
        assert status == 200, kind


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connected, silent
        b'CONNECT {"verbose":false}\r\nPUB foo 100\r\nabc',  # payload never finished
        b"CONNECT {" + b'"x":[' * 500,  # control line never finished
        b'CONNECT {"verbose":false}\r\nSUB ' + b"a." * 1000,  # long line never finished
    ],
    ids=["silent", "partial-payload", "partial-connect", "partial-sub"],
)
def test_half_open_clients_do_not_block_others(
    pair: dict[str, ServerProcess], partial: bytes
) -> None:
    for kind, sp in pair.items():
        with Observer(sp) as obs:
            socks = []
            try:
                for _ in range(HALF_OPEN):
                    s = socket.create_connection((sp.host, sp.port), timeout=LIVENESS_S)
                    if partial:
                        s.sendall(partial)
                    socks.append(s)
                obs.assert_serving()
                with Observer(sp) as late:  # a newcomer too
                    late.assert_serving()
            finally:
                for s in socks:
                    s.close()
        assert sp.alive(), kind


@pytest.mark.parametrize(
    "query",
    [
        "/connz?offset=" + "9" * 5000,
        "/connz?limit=-" + "9" * 5000,
        "/subsz?offset=" + "9" * 30,
        "/jsz?offset=" + "9" * 5000,
        "/connz?cid=" + "9" * 5000,
        "/varz?" + "&".join(f"k{i}=v" for i in range(2000)),
    ],
    ids=["connz-offset", "connz-limit", "subsz-offset", "jsz-offset", "connz-cid", "varz-2000"],
)
def test_monitor_query_values(pair: dict[str, ServerProcess], query: str) -> None:
    """Query numbers past int64: the reference's 400 text, not a 500."""
    got = {}
    for kind, sp in pair.items():
        try:
            with urllib.request.urlopen(f"{sp.monitoring_url}{query}", timeout=HTTP_S) as r:
                got[kind] = (r.status, bool(json.loads(r.read())))
        except urllib.error.HTTPError as e:
            got[kind] = (e.code, e.read().decode(errors="replace")[:200])
    assert got["trijet"] == got["reference"]
