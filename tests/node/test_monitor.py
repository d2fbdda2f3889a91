"""Monitoring endpoints: Go formatting, query decoding, the pure data functions, the HTTP shell.

The data functions are exercised on a ``Server`` that is built but not run,
with fake sessions standing in for connections; one in-process test runs
``Server.run`` with a random client port and monitor port and talks NATS and
HTTP to it over trio.
"""

from __future__ import annotations

import json
from typing import Any

import h11
import pytest
import trio

from node.config import ClusterConfig, ServerConfig
from node.monitor import (
    MonitorApp,
    MonitorError,
    ProcStats,
    Query,
    accountz,
    connz,
    gatewayz,
    healthz,
    leafz,
    routez,
    subsz,
    varz,
)
from node.monitor.gofmt import dumps, go_duration, go_time, rtt_string, uptime
from node.server import Server
from node.sysreq import SUBS_PER_ACCOUNT, SUBS_SYSTEM
from node.version import JS_API_LEVEL, NATS_VERSION
from tests.support.monitor import T0, FakeSession, Named, add, make_server

# /varz keys nats-server 2.15.1 returns for a plain server (observed), minus the ones
# trijet leaves out on purpose (see node.monitor.endpoints): feature_flags.
VARZ_KEYS = {
    "server_id", "server_name", "version", "proto", "git_commit", "go", "host", "port",
    "max_connections", "ping_interval", "ping_max", "http_host", "http_port", "http_base_path",
    "https_port", "auth_timeout", "max_control_line", "max_payload", "max_pending", "cluster",
    "gateway", "leaf", "mqtt", "websocket", "jetstream", "tls_timeout", "write_deadline", "start",
    "now", "uptime", "mem", "cores", "gomaxprocs", "cpu", "connections", "total_connections",
    "routes", "remotes", "leafnodes", "in_msgs", "in_bytes", "in_client_msgs", "in_client_bytes",
    "out_msgs", "out_bytes", "out_client_msgs", "out_client_bytes", "slow_consumers",
    "stale_connections", "stalled_clients", "subscriptions", "http_req_stats",
    "config_load_time", "config_digest", "system_account", "slow_consumer_stats",
    "stale_connection_stats", "disk_io_wait_stats",
    "trijet_internal_errors",  # ours: failures contained by the last-resort guards
}  # fmt: skip


# -- Go formatting ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_500, "1.5µs"),
        (617_000, "617µs"),
        (1_234_567, "1.234567ms"),
        (1_000_000_000, "1s"),
        (62_500_000_000, "1m2.5s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_000_000_000, "1h2m3s"),
        (-1_500_000, "-1.5ms"),
    ],
)
def test_go_duration(ns: int, text: str) -> None:
    assert go_duration(ns) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (59, "59s"),
        (62, "1m2s"),
        (3723, "1h2m3s"),
        (2 * 86400 + 3 * 3600 + 4 * 60 + 5, "2d3h4m5s"),
        (366 * 86400 + 1, "1y1d0h0m1s"),
        (-3, "0s"),
    ],
)
def test_uptime(seconds: float, text: str) -> None:
    assert uptime(seconds) == text


def test_go_time() -> None:
    assert go_time(0) == "1970-01-01T00:00:00Z"
    assert go_time(1.5) == "1970-01-01T00:00:01.5Z"
    assert go_time(1.000000001) == "1970-01-01T00:00:01.000000001Z"
    assert go_time(None) == "0001-01-01T00:00:00Z"
    assert go_time(T0) == "2023-11-14T22:13:20Z"


def test_rtt_truncates_to_microseconds_below_a_millisecond() -> None:
    assert rtt_string(0) == "0s"
    assert rtt_string(0.000617891) == "617µs"
    assert rtt_string(0.0012345678) == "1.234568ms"
    assert rtt_string(0.0000005) == "500ns"


def test_dumps_like_go() -> None:
    out = dumps({"a": 2.0, "b": 0.25, "c": [], "d": {}, "e": "617µs"})
    assert out.decode() == ('{\n  "a": 2,\n  "b": 0.25,\n  "c": [],\n  "d": {},\n  "e": "617µs"\n}')
    assert dumps({"status": "ok"}, indent=False) == b'{"status":"ok"}'


# -- query decoding ---------------------------------------------------------------------------


def test_query_errors_use_nats_server_text() -> None:
    q = Query.parse("limit=abc&cid=-1&subs=xyz&state=bogus&offset=99999999999999999999")
    with pytest.raises(MonitorError) as e:
        q.int("limit")
    assert e.value.status == 400
    assert e.value.text == (
        "Error decoding int for 'limit': strconv.Atoi: parsing \"abc\": invalid syntax"
    )
    with pytest.raises(MonitorError) as e:
        q.uint64("cid")
    assert e.value.text == (
        "Error decoding uint64 for 'cid': strconv.ParseUint: parsing \"-1\": invalid syntax"
    )
    with pytest.raises(MonitorError) as e:
        q.subs()
    assert e.value.text == (
        "Error decoding boolean for 'subs': strconv.ParseBool: parsing \"xyz\": invalid syntax"
    )
    with pytest.raises(MonitorError) as e:
        q.state()
    assert e.value.text == "Error decoding state for bogus"
    with pytest.raises(MonitorError) as e:
        q.int("offset")
    assert e.value.text.endswith(": value out of range")


def test_query_values() -> None:
    q = Query.parse("a=1&a=0&b=T&c=detail&d=-5&e=")
    assert q.bool("a") is True  # the first value wins
    assert q.bool("b") is True
    assert q.bool("e") is False
    assert q.bool("missing") is False
    assert Query({"subs": "detail"}).subs() == (False, True)
    assert Query({"subs": "1"}).subs() == (True, False)
    assert q.int("d") == -5


# -- /connz -----------------------------------------------------------------------------------


def test_connz_open_connections(populated: Server) -> None:
    doc = connz(populated, now=T0 + 100)
    assert list(doc) == [
        "server_id", "now", "num_connections", "total", "offset", "limit", "connections",
    ]  # fmt: skip
    assert doc["server_id"] == populated.server_id
    assert doc["now"] == go_time(T0 + 100)
    assert (doc["num_connections"], doc["total"], doc["offset"], doc["limit"]) == (3, 3, 0, 1024)
    first = doc["connections"][0]
    assert first == {
        "cid": 1,
        "kind": "Client",
        "type": "nats",
        "ip": "127.0.0.1",
        "port": 40001,
        "start": go_time(T0 + 1),
        "last_activity": go_time(T0 + 1),
        "rtt": "300µs",
        "uptime": "1m39s",
        "idle": "1m39s",
        "pending_bytes": 0,
        "in_msgs": 5,
        "out_msgs": 1,
        "in_bytes": 50,
        "out_bytes": 0,
        "subscriptions": 2,
    }
    third = doc["connections"][2]
    assert (third["name"], third["lang"], third["version"]) == ("c3", "python", "2.0")


def test_connz_subscriptions(populated: Server) -> None:
    doc = connz(populated, Query({"subs": "1"}), now=T0 + 100)
    assert doc["connections"][0]["subscriptions_list"] == ["foo", "bar"]
    assert "subscriptions_list" not in doc["connections"][1]  # no subs: key omitted
    doc = connz(populated, Query({"subs": "detail"}), now=T0 + 100)
    assert doc["connections"][0]["subscriptions_list_detail"] == [
        {"subject": "foo", "sid": "1", "msgs": 0, "cid": 1},
        {"subject": "bar", "qgroup": "q", "sid": "2", "msgs": 0, "cid": 1},
    ]


def test_connz_closed_connections(populated: Server) -> None:
    doc = connz(populated, Query({"state": "closed", "subs": "detail"}), now=T0 + 500)
    assert doc["total"] == 1
    (closed,) = doc["connections"]
    assert closed["cid"] == 4
    assert closed["stop"] == go_time(T0 + 64)
    assert closed["reason"] == "Client Closed"
    assert closed["uptime"] == "1m0s"  # measured to stop, not to now
    assert closed["subscriptions"] == 1
    assert closed["subscriptions_list_detail"] == [
        {"account": "$G", "account_tag": "$G", "subject": "gone", "sid": "9", "msgs": 0, "cid": 4}
    ]
    keys = list(closed)
    assert keys.index("stop") == keys.index("last_activity") + 1
    doc = connz(populated, Query({"state": "any"}), now=T0 + 500)
    assert [c["cid"] for c in doc["connections"]] == [1, 2, 3, 4]
    assert doc["total"] == 4


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("cid", [1, 2, 3]),
        ("start", [1, 2, 3]),
        ("subs", [1, 3, 2]),
        ("pending", [3, 1, 2]),
        ("msgs_to", [2, 1, 3]),
        ("msgs_from", [1, 2, 3]),
        ("bytes_to", [2, 1, 3]),
        ("bytes_from", [1, 2, 3]),
        ("last", [3, 2, 1]),
        ("idle", [1, 2, 3]),
        ("uptime", [3, 2, 1]),
        ("rtt", [1, 2, 3]),
    ],
)
def test_connz_sort(populated: Server, sort: str, order: list[int]) -> None:
    populated.clients[2].last_activity_wall = T0 + 2.5
    doc = connz(populated, Query({"sort": sort}), now=T0 + 100)
    assert [c["cid"] for c in doc["connections"]] == order


def test_connz_sort_errors(populated: Server) -> None:
    with pytest.raises(MonitorError) as e:
        connz(populated, Query({"sort": "CID"}))
    assert (e.value.status, e.value.text) == (400, "invalid sorting option: CID")
    with pytest.raises(MonitorError) as e:
        connz(populated, Query({"sort": "stop"}))
    assert e.value.text == "sort by stop only valid on closed connections"
    with pytest.raises(MonitorError) as e:
        connz(populated, Query({"sort": "reason", "state": "any"}))
    assert e.value.text == "sort by reason only valid on closed connections"
    doc = connz(populated, Query({"sort": "stop", "state": "closed"}))
    assert [c["cid"] for c in doc["connections"]] == [4]


def test_connz_paging_and_cid(populated: Server) -> None:
    doc = connz(populated, Query({"offset": "1", "limit": "1"}), now=T0 + 100)
    assert (doc["num_connections"], doc["total"], doc["offset"], doc["limit"]) == (1, 3, 1, 1)
    assert doc["connections"][0]["cid"] == 2
    doc = connz(populated, Query({"offset": "7"}), now=T0 + 100)
    assert doc["connections"] == [] and doc["num_connections"] == 0
    doc = connz(populated, Query({"offset": "-3", "limit": "0"}), now=T0 + 100)
    assert (doc["offset"], doc["limit"], doc["num_connections"]) == (0, 1024, 3)
    doc = connz(populated, Query({"cid": "3"}), now=T0 + 100)
    assert [c["cid"] for c in doc["connections"]] == [3] and doc["limit"] == 1
    doc = connz(populated, Query({"cid": "99"}), now=T0 + 100)
    assert (doc["connections"], doc["total"], doc["limit"]) == ([], 3, 1)
    doc = connz(populated, Query({"cid": "4", "state": "any"}), now=T0 + 100)
    assert [c["cid"] for c in doc["connections"]] == [4]


def test_connz_auth_user_and_account_filters(populated: Server) -> None:
    populated.clients[2].user = Named(name="alice")
    doc = connz(populated, Query({"auth": "true"}), now=T0 + 100)
    assert doc["connections"][1]["authorized_user"] == "alice"
    assert "authorized_user" not in doc["connections"][0]
    doc = connz(populated, Query({"user": "alice"}), now=T0 + 100)
    assert [c["cid"] for c in doc["connections"]] == [2]
    assert doc["total"] == 3  # nats-server counts before the user filter
    doc = connz(populated, Query({"user": "bob", "state": "closed"}), now=T0 + 100)
    assert [c["cid"] for c in doc["connections"]] == [4]
    doc = connz(populated, Query({"acc": "$G"}), now=T0 + 100)
    assert doc["num_connections"] == 3
    doc = connz(populated, Query({"acc": "$SYS"}), now=T0 + 100)
    assert doc["connections"] == [] and doc["total"] == 0
    doc = connz(populated, Query({"acc": "nope"}), now=T0 + 100)
    assert doc["connections"] is None and doc["server_id"] == ""


def test_connz_tls_fields() -> None:
    server = make_server()
    add(server, FakeSession(1, T0, tls_info={"tls_version": "1.3", "tls_cipher_suite": "X"}))
    (c,) = connz(server, now=T0)["connections"]
    assert (c["tls_version"], c["tls_cipher_suite"]) == ("1.3", "X")


# -- /subsz -----------------------------------------------------------------------------------


def test_subsz_counts_and_list(populated: Server) -> None:
    populated.sublist.match(b"foo")
    populated.sublist.match(b"foo")
    populated.sublist.match(b"foo.x")
    populated.sublist.match(b"nothing")
    doc = subsz(populated, now=T0)
    assert list(doc)[:10] == [
        "server_id", "now", "num_subscriptions", "num_cache", "num_inserts", "num_removes",
        "num_matches", "cache_hit_rate", "max_fanout", "avg_fanout",
    ]  # fmt: skip
    base = internal_subs(populated)  # the server's own services (node.sysreq)
    assert doc["num_subscriptions"] == 3 + base
    assert (doc["num_inserts"], doc["num_removes"], doc["num_matches"]) == (4 + base, 1, 4)
    assert doc["num_cache"] == 3
    assert doc["cache_hit_rate"] == 0.25
    assert doc["max_fanout"] == 1
    assert doc["avg_fanout"] == pytest.approx(2 / 3)
    assert (doc["total"], doc["offset"], doc["limit"]) == (0, 0, 1024)
    assert "subscriptions_list" not in doc
    doc = subsz(populated, Query({"subs": "1"}), now=T0)
    assert doc["total"] == 3 + base
    clients = [s for s in doc["subscriptions_list"] if not s["subject"].startswith("$SYS.")]
    subjects = sorted(s["subject"] for s in clients)
    assert subjects == ["bar", "foo", "foo.*"]
    assert all(s["account"] == "$G" for s in clients)
    doc = subsz(populated, Query({"subs": "1", "test": "foo.x"}), now=T0)
    assert [s["subject"] for s in doc["subscriptions_list"]] == ["foo.*"]
    doc = subsz(populated, Query({"subs": "1", "offset": "1", "limit": "1"}), now=T0)
    assert len(doc["subscriptions_list"]) == 1 and doc["total"] == 3 + base


def test_subsz_rejects_wildcard_test_subject(populated: Server) -> None:
    with pytest.raises(MonitorError) as e:
        subsz(populated, Query({"test": "foo.*"}))
    assert e.value.text == "invalid test subject, must be valid publish subject: foo.*"


# -- /varz ------------------------------------------------------------------------------------


def test_varz_keys_and_values(populated: Server) -> None:
    populated.stats.in_msgs, populated.stats.in_bytes = 7, 70
    populated.router.out_msgs, populated.router.out_bytes = 3, 30
    populated.http_req_stats["/varz"] = 2
    proc = ProcStats(rss_bytes=1234, cpu_percent=1.5, cores=4)
    v = varz(populated, now=T0 + 3723, proc=proc)
    assert set(v) == VARZ_KEYS
    assert v["version"] == NATS_VERSION
    assert v["uptime"] == "1h2m3s"
    assert v["start"] == go_time(T0) and v["now"] == go_time(T0 + 3723)
    assert (v["mem"], v["cpu"], v["cores"], v["gomaxprocs"]) == (1234, 1.5, 4, 4)
    assert (v["connections"], v["total_connections"]) == (3, 4)
    assert v["subscriptions"] == 3 + internal_subs(populated)
    assert (v["in_msgs"], v["in_bytes"], v["out_msgs"], v["out_bytes"]) == (7, 70, 3, 30)
    assert v["ping_interval"] == 120_000_000_000 and v["write_deadline"] == 10_000_000_000
    assert v["http_req_stats"] == {"/varz": 2}
    assert v["cluster"] == {} and v["jetstream"] == {}
    assert v["system_account"] == "$SYS"


def test_varz_cluster_and_jetstream_sections(tmp_path: Any) -> None:
    server = make_server(
        cluster=ClusterConfig(
            name="cx", host="127.0.0.1", port=6222, routes=["nats://u:p@10.0.0.2:6222"]
        )
    )
    server.cfg.jetstream.enabled = True
    server.cfg.jetstream.store_dir = str(tmp_path)
    server.cfg.jetstream.max_memory_store = 1 << 20
    v = varz(server, now=T0)
    assert v["cluster"] == {
        "name": "cx",
        "addr": "127.0.0.1",
        "cluster_port": 6222,
        "auth_timeout": 2.0,
        "urls": ["10.0.0.2:6222"],
        "tls_timeout": 2.0,
        "pool_size": 3,
    }
    js = v["jetstream"]
    assert list(js) == ["config", "stats", "limits"]
    assert js["config"]["max_memory"] == 1 << 20
    assert js["config"]["store_dir"] == str(tmp_path / "jetstream")
    assert js["config"]["sync_interval"] == 120_000_000_000
    assert js["stats"]["api"] == {"level": JS_API_LEVEL, "total": 0, "errors": 0}


# -- /jsz /healthz and the small ones ---------------------------------------------------------


def test_healthz(populated: Server) -> None:
    assert healthz(populated) == (200, {"status": "ok"})
    # JetStream off: nats-server stops checking and says ok, whatever the JS flags say
    assert healthz(populated, Query({"js-enabled-only": "true"})) == (200, {"status": "ok"})
    status, body = healthz(populated, Query({"stream": "S"}))
    assert status == 400
    assert body == {
        "status": "error",
        "error": '"account" must not be empty when checking stream health',
    }
    with pytest.raises(MonitorError):
        healthz(populated, Query({"js-enabled-only": "maybe"}))


def test_small_documents(populated: Server) -> None:
    assert routez(populated, now=T0) == {
        "server_id": populated.server_id,
        "server_name": populated.server_name,
        "now": go_time(T0),
        "num_routes": 0,
        "routes": [],
    }
    assert accountz(populated, now=T0)["accounts"] == ["$G", "$SYS"]
    detail = accountz(populated, Query({"acc": "$G"}), now=T0)["account_detail"]
    assert (detail["client_connections"], detail["subscriptions"]) == (3, 3 + SUBS_PER_ACCOUNT)
    with pytest.raises(MonitorError) as e:
        accountz(populated, Query({"acc": "X"}))
    assert e.value.text == "Account X does not exist"
    assert leafz(populated, now=T0)["leafs"] == []
    assert gatewayz(populated, now=T0)["outbound_gateways"] == {}


# -- the HTTP app without sockets -------------------------------------------------------------


def test_app_routing_counting_and_errors(populated: Server) -> None:
    app = MonitorApp(populated)
    r = app.handle("GET", "/varz")
    assert r.status == 200 and r.header("Content-Type") == "application/json"
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert json.loads(r.body)["http_req_stats"] == {"/varz": 1}
    r = app.handle("GET", "/nope")
    assert (r.status, r.body) == (404, b"404 page not found\n")
    r = app.handle("GET", "/connz?sort=foo")
    assert (r.status, r.body) == (400, b"invalid sorting option: foo")
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    r = app.handle("GET", "/healthz")
    assert r.body == b'{"status":"ok"}'
    r = app.handle("GET", "/")
    assert r.status == 200 and b"/connz" in r.body
    app.handle("GET", "/subscriptionsz")
    stats = populated.http_req_stats
    assert stats["/connz"] == 1 and stats["/healthz"] == 1 and stats["/"] == 1
    assert stats["/subsz"] == 1


def test_app_base_path() -> None:
    server = make_server(http_base_path="/mon/")
    app = MonitorApp(server)
    assert app.handle("GET", "/mon/varz").status == 200
    assert app.handle("GET", "/mon").status == 200
    assert app.handle("GET", "/varz").status == 404


# -- in-process: Server.run with the monitor --------------------------------------------------


async def http_get(port: int, target: str, method: str = "GET") -> tuple[int, bytes]:
    """One HTTP/1.1 request over a fresh trio TCP stream (h11 client)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    req = h11.Request(method=method, target=target, headers=[("Host", "127.0.0.1")])
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


async def read_until(stream: trio.SocketStream, needle: bytes) -> bytes:
    buf = b""
    while needle not in buf:
        data = await stream.receive_some(65536)
        assert data, f"closed before {needle!r}: {buf!r}"
        buf += data
    return buf


async def test_server_run_with_monitor() -> None:
    cfg = ServerConfig(host="127.0.0.1", port=-1, http_port=-1)
    server = Server(cfg)
    closed = trio.Event()
    client_closed = server.client_closed

    def on_closed(session: Any) -> None:
        client_closed(session)
        closed.set()

    server.client_closed = on_closed  # type: ignore[method-assign]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            port = server.http_port
            assert port > 0
            c1 = await trio.open_tcp_stream("127.0.0.1", server.client_port)
            await read_until(c1, b"\r\n")
            await c1.send_all(
                b'CONNECT {"verbose":false,"name":"c1","lang":"test","version":"9"}\r\n'
                b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n"
            )
            assert b"MSG foo 1 2\r\nhi\r\n" in await read_until(c1, b"PONG\r\n")
            c2 = await trio.open_tcp_stream("127.0.0.1", server.client_port)
            await read_until(c2, b"\r\n")
            await c2.send_all(b"CONNECT {}\r\nSUB bar q 7\r\nPING\r\n")
            await read_until(c2, b"PONG\r\n")

            status, body = await http_get(port, "/varz")
            assert status == 200
            v = json.loads(body)
            assert set(v) == VARZ_KEYS
            assert (v["connections"], v["total_connections"]) == (2, 2)
            assert v["subscriptions"] == 2 + internal_subs(server)
            assert (v["in_msgs"], v["in_bytes"], v["out_msgs"], v["out_bytes"]) == (1, 2, 1, 2)
            assert v["port"] == server.client_port and v["http_port"] == port

            status, body = await http_get(port, "/connz?subs=1")
            doc = json.loads(body)
            assert (doc["num_connections"], doc["total"]) == (2, 2)
            first, second = doc["connections"]
            assert first["subscriptions_list"] == ["foo"]
            assert (first["in_msgs"], first["out_msgs"], first["in_bytes"], first["out_bytes"]) == (
                1,
                1,
                2,
                2,
            )
            assert (first["name"], first["lang"], first["version"]) == ("c1", "test", "9")
            assert second["subscriptions_list"] == ["bar"]

            status, body = await http_get(port, "/subsz?subs=1")
            doc = json.loads(body)
            assert doc["num_subscriptions"] == 2 + internal_subs(server)
            got = {
                (s["subject"], s.get("qgroup"), s["msgs"])
                for s in doc["subscriptions_list"]
                if not s["subject"].startswith("$SYS.")
            }
            assert got == {("foo", None, 1), ("bar", "q", 0)}

            await c2.aclose()
            await closed.wait()
            status, body = await http_get(port, "/connz?state=closed&subs=detail")
            doc = json.loads(body)
            (closed,) = doc["connections"]
            assert closed["reason"] == "Client Closed"
            assert closed["subscriptions"] == 1
            assert closed["subscriptions_list_detail"][0]["qgroup"] == "q"

            assert await http_get(port, "/healthz") == (200, b'{"status":"ok"}')
            status, body = await http_get(port, "/jsz")
            assert status == 200 and json.loads(body)["disabled"] is True
            status, body = await http_get(port, "/does-not-exist")
            assert (status, body) == (404, b"404 page not found\n")
            status, body = await http_get(port, "/varz", method="HEAD")
            assert (status, body) == (200, b"")
            status, body = await http_get(port, "/connz?state=xyz")
            assert (status, body) == (400, b"Error decoding state for xyz")

            # keep-alive: two requests on one connection
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(
                b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /routez HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            got_both = await read_until(stream, b'"routes": []')
            assert got_both.count(b"HTTP/1.1 200 OK") == 2
            await stream.aclose()

            status, body = await http_get(port, "/varz")
            stats = json.loads(body)["http_req_stats"]
            assert stats["/varz"] == 3 and stats["/connz"] == 2 and stats["/healthz"] == 2

            await c1.aclose()
            server.shutdown()


def test_routez_lists_registered_routes(populated: Server) -> None:
    class FakeRoute:
        rid, remote_id, remote_name, solicited, configured = 1, "NABC", "srvB", True, True
        ip, port, start_wall, last_activity_wall, rtt_s = "10.0.0.2", 6222, T0, T0 + 10, 0.0005
        pending_bytes, in_msgs, out_msgs, in_bytes, out_bytes = 0, 3, 4, 30, 40
        remote_subs: dict[Any, Any] = {}

    populated.routes.by_id = {"NABC": FakeRoute()}  # type: ignore[dict-item]
    doc = routez(populated, now=T0 + 70)
    assert doc["num_routes"] == 1
    (r,) = doc["routes"]
    assert (r["rid"], r["remote_name"], r["did_solicit"], r["rtt"]) == (1, "srvB", True, "500µs")
    assert (r["uptime"], r["idle"], r["in_msgs"], r["subscriptions"]) == ("1m10s", "1m0s", 3, 0)
    assert varz(populated, now=T0)["routes"] == 1


def internal_subs(server: Server) -> int:
    """Subscriptions of the server's own ``$SYS.REQ`` services over all its accounts."""
    return SUBS_PER_ACCOUNT * len(server.accounts) + SUBS_SYSTEM


def test_http_date_is_what_email_utils_writes() -> None:
    import email.utils

    from node.monitor.httpd import http_date

    for t in (0.0, 951_782_400.0, 1_000_000_000.0, 1_795_000_000.5, 4_102_444_799.0):
        assert http_date(t) == email.utils.formatdate(t, usegmt=True)
