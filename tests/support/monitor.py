"""Fakes for the monitoring tests: a ``Server`` built but not run, with fake
sessions standing in for connections (``tests/node/test_monitor*.py``)."""

from __future__ import annotations

from typing import Any

from node.config import ServerConfig
from node.server import Server
from node.session import ClosedReason, Subscription

T0 = 1_700_000_000.0  # a fixed wall time for deterministic documents


class FakeSession:
    """The fields /connz reads from a ClientSession."""

    internal = False

    def __init__(self, cid: int, start: float, **kw: Any) -> None:
        self.cid = cid
        self.ip = "127.0.0.1"
        self.port = 40000 + cid
        self.start_wall = start
        self.last_activity_wall = kw.pop("last", start)
        self.rtt_s = kw.pop("rtt_s", 0.0)
        self.pending_bytes = kw.pop("pending", 0)
        self.in_msgs = kw.pop("in_msgs", 0)
        self.out_msgs = kw.pop("out_msgs", 0)
        self.in_bytes = kw.pop("in_bytes", 0)
        self.out_bytes = kw.pop("out_bytes", 0)
        self.name = kw.pop("name", "")
        self.lang = kw.pop("lang", "")
        self.version = kw.pop("version", "")
        self.user = kw.pop("user", None)
        self.tls_info = kw.pop("tls_info", None)
        self.closing: ClosedReason | None = kw.pop("closing", None)
        self.stop_wall: float | None = kw.pop("stop", None)
        self.subs: dict[bytes, Subscription] = {}
        self.final_subs: list[Subscription] = []
        self.headers = True
        self.echo = True
        self.deliver_filter = None
        self.resp_perms = None
        assert not kw, kw

    def add_sub(self, server: Server, subject: str, sid: str, queue: str | None = None) -> Any:
        sub = Subscription(self, subject.encode(), queue.encode() if queue else None, sid.encode())
        self.subs[sub.sid] = sub
        server.sublist.insert(sub)
        return sub

    def close_at(self, server: Server, stop: float, reason: ClosedReason) -> None:
        self.closing = reason
        self.stop_wall = stop
        self.final_subs = list(self.subs.values())
        for sub in self.subs.values():
            server.sublist.remove(sub)
        self.subs.clear()
        del server.clients[self.cid]
        server.closed_clients.append(self)  # type: ignore[arg-type]

    def enqueue(self, data: bytes) -> None:
        self.out_msgs += 1


class Named:
    def __init__(self, name: str | None = None, nkey: str | None = None) -> None:
        self.name = name
        self.nkey = nkey


def make_server(**cfg: Any) -> Server:
    server = Server(ServerConfig(host="127.0.0.1", port=4222, **cfg))
    server.start_wall = server.config_load_time = T0
    server.client_port = 4222
    return server


def add(server: Server, s: FakeSession) -> FakeSession:
    server.clients[s.cid] = s  # type: ignore[assignment]
    server.stats.total_connections += 1
    return s


def populated_server() -> Server:
    """Three open clients and one closed one, with distinct counters."""
    server = make_server()
    a = add(server, FakeSession(1, T0 + 1, in_msgs=5, out_msgs=1, in_bytes=50, rtt_s=0.0003))
    add(server, FakeSession(2, T0 + 2, in_msgs=1, out_msgs=9, out_bytes=90, last=T0 + 50))
    c = add(server, FakeSession(3, T0 + 3, pending=7, name="c3", lang="python", version="2.0"))
    d = add(server, FakeSession(4, T0 + 4, user=Named(name="bob")))
    a.add_sub(server, "foo", "1")
    a.add_sub(server, "bar", "2", queue="q")
    c.add_sub(server, "foo.*", "1")
    d.add_sub(server, "gone", "9")
    d.close_at(server, T0 + 64, ClosedReason.CLIENT_CLOSED)
    return server
