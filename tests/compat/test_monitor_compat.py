"""Differential: monitoring endpoints of the reference nats-server and trijet, same traffic.

Both servers run as processes on 127.0.0.1 with random client and monitor
ports (``-p -1 -m -1``); readiness is the ports file each writes
(``nats-server_<pid>.ports`` / ``trijet-server_<pid>.ports``).  The same raw
NATS traffic goes to both; then the JSON documents are compared: key sets
exactly (minus the documented exceptions below), and the values that must
agree.  Volatile values (ids, times, ports, rtt, memory, cpu) are ignored.

Counters that the reference's internal system clients also move (``/varz``
``subscriptions``, ``in_msgs`` …, ``/subsz`` totals) are compared as deltas
from a baseline taken before the traffic.

Documented, intentional differences:
* ``VARZ_KEYS_ONLY_REFERENCE``: ``feature_flags`` (nats-server's internal
  JetStream switches; nothing in trijet to report).  ``gomaxprocs`` is
  present in both; trijet reports the number of usable cores there.
* ``version`` (trijet advertises nats-server 2.10.24), ``git_commit``, ``go``.
* The reference has internal system-account subscriptions and connections
  (cids 1–4 on 2.15); trijet has none, so absolute subscription counts and
  cids differ and are compared relative to a baseline / by order.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import pytest
import trio

VARZ_KEYS_ONLY_REFERENCE = {"feature_flags"}
# trijet's own counter of failures its last-resort guards contained
VARZ_KEYS_ONLY_TRIJET = {"trijet_internal_errors"}
START_S_MAX = 15.0
PORTS_POLL_S = 0.02
# pending_bytes races with the servers' own PINGs (e.g. one queued when the client closed)
CONN_VOLATILE = {
    "cid", "port", "start", "last_activity", "stop", "rtt", "uptime", "idle", "pending_bytes",
}  # fmt: skip
SUB_VOLATILE = {"cid"}


def reference_binary() -> str | None:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("nats-server")


REFERENCE = reference_binary()
pytestmark = pytest.mark.skipif(REFERENCE is None, reason="reference nats-server not installed")


class Proc:
    """A started server process and its ports."""

    def __init__(self, popen: trio.Process, nats_port: int, http_port: int) -> None:
        self.popen = popen
        self.nats_port = nats_port
        self.http_port = http_port


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].rstrip("/"))


@asynccontextmanager
async def run_server(kind: str, workdir: Path) -> AsyncIterator[Proc]:
    """Start ``kind`` ("reference" or "trijet"), wait for its ports file, kill it on exit."""
    d = workdir / kind
    d.mkdir()
    common = ["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "--ports_file_dir", str(d)]
    if kind == "reference":
        assert REFERENCE is not None
        argv, prefix = [REFERENCE, *common], "nats-server"
    else:
        argv, prefix = [sys.executable, "-m", "node", *common], "trijet-server"
    log = open(d / "server.log", "wb")  # noqa: ASYNC230 - a local log file, closed in finally
    popen = await trio.lowlevel.open_process(
        argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(d), env={**os.environ}
    )
    try:
        ports_file = d / f"{prefix}_{popen.pid}.ports"
        with trio.fail_after(START_S_MAX):
            while not ports_file.exists():
                if popen.poll() is not None:
                    raise RuntimeError(f"{kind} exited: {(d / 'server.log').read_text()}")
                await trio.sleep(PORTS_POLL_S)
        ports = json.loads(ports_file.read_text())
        yield Proc(popen, _port_of(ports["nats"][0]), _port_of(ports["monitoring"][0]))
    finally:
        if popen.poll() is None:
            popen.kill()
        with trio.move_on_after(10):
            await popen.wait()
        log.close()


async def http_get(port: int, target: str) -> tuple[int, bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    req = h11.Request(method="GET", target=target, headers=[("Host", "127.0.0.1")])
    await stream.send_all(conn.send(req) + conn.send(h11.EndOfMessage()))
    status, body = 0, b""
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(ev, h11.Response):
                status = ev.status_code
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
                return status, body
    finally:
        await stream.aclose()


async def get_json(port: int, target: str) -> dict[str, Any]:
    status, body = await http_get(port, target)
    assert status == 200, (target, status, body)
    doc: dict[str, Any] = json.loads(body)
    return doc


async def read_until(stream: trio.SocketStream, needle: bytes) -> bytes:
    buf = b""
    while needle not in buf:
        data = await stream.receive_some(65536)
        assert data, f"closed before {needle!r}: {buf!r}"
        buf += data
    return buf


async def traffic(port: int) -> trio.SocketStream:
    """Client A (kept open): two subs, one publish it receives. Client B: a sub, then a clean close."""
    a = await trio.open_tcp_stream("127.0.0.1", port)
    await read_until(a, b"\r\n")
    await a.send_all(
        b'CONNECT {"verbose":false,"name":"mon-a","lang":"raw","version":"1.0"}\r\n'
        b"SUB foo 1\r\nSUB bar q 2\r\nPUB foo 5\r\nhello\r\nPUB nobody 3\r\nabc\r\nPING\r\n"
    )
    got = await read_until(a, b"PONG\r\n")
    assert b"MSG foo 1 5\r\nhello\r\n" in got
    b = await trio.open_tcp_stream("127.0.0.1", port)
    await read_until(b, b"\r\n")
    await b.send_all(b'CONNECT {"verbose":false}\r\nSUB baz 9\r\nPING\r\n')
    await read_until(b, b"PONG\r\n")
    await b.aclose()  # everything read: a clean close ("Client Closed")
    return a


async def wait_closed(port: int) -> None:
    with trio.fail_after(10):
        while True:
            doc = await get_json(port, "/connz?state=closed")
            if doc["connections"]:
                return
            await trio.sleep(PORTS_POLL_S)


def strip(d: dict[str, Any], volatile: set[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in volatile}


ERROR_CASES = [
    "/connz?sort=foo",
    "/connz?sort=stop",
    "/connz?sort=reason&state=any",
    "/connz?limit=abc",
    "/connz?offset=1.5",
    "/connz?cid=-1",
    "/connz?state=xyz",
    "/connz?subs=maybe",
    "/connz?auth=2",
    "/subsz?test=foo.*",
    "/subsz?limit=x",
    "/subsz?subs=nope",
    "/healthz?js-enabled-only=perhaps",
    "/accountz?acc=NOPE",
    "/nope",
    "/varz/x",
]


async def test_monitor_matches_reference(tmp_path: Path) -> None:
    async with run_server("reference", tmp_path) as ref, run_server("trijet", tmp_path) as tri:
        servers = {"reference": ref, "trijet": tri}
        base = {k: await get_json(p.http_port, "/varz") for k, p in servers.items()}
        base_subsz = {k: await get_json(p.http_port, "/subsz") for k, p in servers.items()}
        keep = {k: await traffic(p.nats_port) for k, p in servers.items()}
        for p in servers.values():
            await wait_closed(p.http_port)

        docs: dict[str, dict[str, Any]] = {}
        for k, p in servers.items():
            docs[k] = {
                path: await get_json(p.http_port, path)
                for path in (
                    "/varz",
                    "/connz?subs=1",
                    "/connz?state=closed&subs=detail",
                    "/connz?state=any&sort=msgs_from",
                    "/subsz?subs=1&test=foo",
                    "/subsz",
                    "/routez",
                    "/accountz",
                    "/jsz",
                    "/leafz",
                    "/gatewayz",
                )
            }
        r, t = docs["reference"], docs["trijet"]

        # /varz: keys, then values that must agree
        rv, tv = r["/varz"], t["/varz"]
        assert set(rv) - set(tv) == VARZ_KEYS_ONLY_REFERENCE
        assert set(tv) - set(rv) == VARZ_KEYS_ONLY_TRIJET
        for key in ("cluster", "gateway", "leaf", "mqtt", "websocket", "jetstream"):
            assert rv[key] == tv[key], key
        for key in (
            "proto", "host", "max_connections", "ping_interval", "ping_max", "http_host",
            "http_base_path", "https_port", "auth_timeout", "max_control_line", "max_payload",
            "max_pending", "tls_timeout", "write_deadline", "connections", "routes", "remotes",
            "leafnodes", "slow_consumers", "stale_connections", "stalled_clients",
            "system_account", "config_digest", "slow_consumer_stats", "stale_connection_stats",
        ):  # fmt: skip
            assert rv[key] == tv[key], key
        for key in (
            "total_connections", "in_msgs", "in_bytes", "in_client_msgs", "in_client_bytes",
            "out_msgs", "out_bytes", "out_client_msgs", "out_client_bytes", "subscriptions",
        ):  # fmt: skip
            assert rv[key] - base["reference"][key] == tv[key] - base["trijet"][key], key
        assert set(rv["http_req_stats"]) == set(tv["http_req_stats"])

        # /connz: open connections with subscription lists
        for path in ("/connz?subs=1", "/connz?state=closed&subs=detail"):
            rc, tc = r[path], t[path]
            assert set(rc) == set(tc), path
            for key in ("num_connections", "total", "offset", "limit"):
                assert rc[key] == tc[key], (path, key)
            assert len(rc["connections"]) == len(tc["connections"])
            for a, b in zip(rc["connections"], tc["connections"], strict=True):
                assert set(a) == set(b), (path, a, b)
                for c in (a, b):  # nats-server lists a client's subs in Go map order
                    c.get("subscriptions_list", []).sort()
                assert strip(a, CONN_VOLATILE | {"subscriptions_list_detail"}) == strip(
                    b, CONN_VOLATILE | {"subscriptions_list_detail"}
                ), path
                da = [strip(s, SUB_VOLATILE) for s in a.get("subscriptions_list_detail", [])]
                db = [strip(s, SUB_VOLATILE) for s in b.get("subscriptions_list_detail", [])]
                assert sorted(da, key=json.dumps) == sorted(db, key=json.dumps)
        order = [
            [c["name"] if "name" in c else c["subscriptions"] for c in d[k]["connections"]]
            for d, k in (
                (r, "/connz?state=any&sort=msgs_from"),
                (t, "/connz?state=any&sort=msgs_from"),
            )
        ]
        assert order[0] == order[1]

        # /subsz
        rs, ts = r["/subsz?subs=1&test=foo"], t["/subsz?subs=1&test=foo"]
        assert set(rs) == set(ts)
        assert (rs["total"], rs["offset"], rs["limit"]) == (ts["total"], ts["offset"], ts["limit"])
        assert [strip(s, SUB_VOLATILE) for s in rs["subscriptions_list"]] == [
            strip(s, SUB_VOLATILE) for s in ts["subscriptions_list"]
        ]
        assert set(r["/subsz"]) == set(t["/subsz"])
        for key in ("num_subscriptions", "num_inserts", "num_removes"):
            delta_r = r["/subsz"][key] - base_subsz["reference"][key]
            delta_t = t["/subsz"][key] - base_subsz["trijet"][key]
            assert delta_r == delta_t, key

        # the small documents: same keys, same non-volatile values
        r["/accountz"]["accounts"].sort()  # Go map order
        t["/accountz"]["accounts"].sort()
        for path in ("/routez", "/accountz", "/jsz", "/leafz", "/gatewayz"):
            assert list(r[path]) == list(t[path]), path
            vol = {"server_id", "server_name", "now"}
            assert strip(r[path], vol) == strip(t[path], vol), path

        # /healthz and the error answers: status and body byte for byte
        for target in ["/healthz", "/healthz?js-enabled-only=true", *ERROR_CASES]:
            got = [await http_get(p.http_port, target) for p in servers.values()]
            assert got[0] == got[1], target

        for stream in keep.values():
            await stream.aclose()
