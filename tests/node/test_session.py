"""Sessions over in-memory streams; timers under trio's MockClock."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from node.config import ServerConfig
from node.protocol.connection import ProtocolConnection, Role
from node.protocol.events import PING, Err, Info, Msg
from node.server import Server
from node.session import ClosedReason


class RawClient:
    """The client end of an in-memory connection, parsing what the server sends."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.proto = ProtocolConnection(Role.CLIENT)
        self.events: list[Any] = []
        self.closed = False

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def until(self, pred: Any) -> list[Any]:
        """Read until ``pred(events)`` holds or the server closes."""
        while not pred(self.events):
            data = await self.stream.receive_some(65536)
            if not data:
                self.closed = True
                break
            self.events.extend(self.proto.receive_data(data))
        return self.events


def _has(kind: type, n: int = 1) -> Any:
    return lambda evs: sum(1 for e in evs if type(e) is kind) >= n


async def _connect(server: Server, nursery: trio.Nursery, *, lockstep: bool = False) -> RawClient:
    if lockstep:
        client_end, server_end = trio.testing.lockstep_stream_pair()
    else:
        client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(server.serve_stream, server_end, ("127.0.0.1", 1))
    c = RawClient(client_end)
    await c.until(_has(Info))
    return c


async def test_pub_sub_over_memory_streams() -> None:
    server = Server(ServerConfig())
    async with trio.open_nursery() as nursery:
        a = await _connect(server, nursery)
        b = await _connect(server, nursery)
        await a.send(b'CONNECT {"verbose":false}\r\nSUB foo.* 1\r\nPING\r\n')
        await a.until(lambda evs: PING in evs or any(type(e).__name__ == "Pong" for e in evs))
        await b.send(b'CONNECT {"verbose":false}\r\nPUB foo.bar r 2\r\nhi\r\n')
        await a.until(_has(Msg))
        assert [e for e in a.events if type(e) is Msg] == [Msg(b"foo.bar", b"1", b"r", b"hi")]
        assert server.stats.in_msgs == 1
        nursery.cancel_scope.cancel()


async def test_slow_consumer_pending_bytes(autojump_clock: trio.testing.MockClock) -> None:
    cfg = ServerConfig(max_pending=4096)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        slow = await _connect(server, nursery, lockstep=True)
        await slow.send(b'CONNECT {"verbose":false}\r\nSUB s 1\r\nPING\r\n')
        await slow.until(lambda evs: any(type(e).__name__ == "Pong" for e in evs))
        slow_session = server.clients[1]
        pub = await _connect(server, nursery)
        # the slow client stops reading; the publisher floods
        payload = b"x" * 512
        await pub.send(
            b'CONNECT {"verbose":false}\r\n' + (b"PUB s 512\r\n" + payload + b"\r\n") * 64
        )
        with trio.fail_after(30):
            await slow_session.wait_closed()
        assert slow_session.closing is ClosedReason.SLOW_CONSUMER_PENDING
        assert server.stats.slow_consumers == 1
        # the publisher is unaffected
        await pub.send(b"PING\r\n")
        await pub.until(lambda evs: any(type(e).__name__ == "Pong" for e in evs))
        nursery.cancel_scope.cancel()


async def test_slow_consumer_write_deadline(autojump_clock: trio.testing.MockClock) -> None:
    cfg = ServerConfig(write_deadline_s=2.0)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        slow = await _connect(server, nursery, lockstep=True)
        await slow.send(b'CONNECT {"verbose":false}\r\nSUB s 1\r\nPING\r\n')
        await slow.until(lambda evs: any(type(e).__name__ == "Pong" for e in evs))
        slow_session = server.clients[1]
        pub = await _connect(server, nursery)
        await pub.send(b'CONNECT {"verbose":false}\r\nPUB s 2\r\nhi\r\n')
        with trio.fail_after(30):
            await slow_session.wait_closed()
        assert slow_session.closing is ClosedReason.SLOW_CONSUMER_DEADLINE
        assert server.stats.slow_consumers == 1
        nursery.cancel_scope.cancel()


async def test_stale_connection(autojump_clock: trio.testing.MockClock) -> None:
    cfg = ServerConfig(ping_interval_s=1.0, ping_max=2)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        c = await _connect(server, nursery)
        t0 = trio.current_time()
        await c.send(b'CONNECT {"verbose":false}\r\n')
        events = await c.until(lambda evs: False)  # read until the server closes
        pings = [e for e in events if e == PING]
        assert len(pings) == 2
        assert events[-1] == Err("Stale Connection")
        assert c.closed
        # PINGs at ~1 s and ~2 s (plus up to 20% jitter on the first), error at ~3 s
        assert 3.0 <= trio.current_time() - t0 <= 3.5
        assert server.stats.stale_connections == 1
        nursery.cancel_scope.cancel()


async def test_pongs_keep_connection_alive(autojump_clock: trio.testing.MockClock) -> None:
    cfg = ServerConfig(ping_interval_s=1.0, ping_max=2)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        c = await _connect(server, nursery)
        await c.send(b'CONNECT {"verbose":false}\r\n')
        for i in range(1, 6):
            await c.until(lambda evs, i=i: sum(1 for e in evs if e == PING) >= i)
            await c.send(b"PONG\r\n")
        assert not c.closed
        assert not server.closed_clients
        nursery.cancel_scope.cancel()


async def test_auth_timeout(autojump_clock: trio.testing.MockClock) -> None:
    cfg = ServerConfig()
    cfg.auth.token = "s3cret"
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        c = await _connect(server, nursery)
        info = c.events[0]
        assert info.fields["auth_required"] is True
        events = await c.until(lambda evs: False)
        assert events[-1] == Err("Authentication Timeout")
        assert server.closed_clients[0].closing is ClosedReason.AUTH_TIMEOUT
        nursery.cancel_scope.cancel()


async def test_auth_required_before_other_ops() -> None:
    cfg = ServerConfig()
    cfg.auth.token = "s3cret"
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        c = await _connect(server, nursery)
        await c.send(b"SUB foo 1\r\n")
        events = await c.until(lambda evs: False)
        assert events[-1] == Err("Authorization Violation")
        ok = await _connect(server, nursery)
        await ok.send(b'CONNECT {"auth_token":"s3cret","verbose":false}\r\nPING\r\n')
        await ok.until(lambda evs: any(type(e).__name__ == "Pong" for e in evs))
        nursery.cancel_scope.cancel()


async def test_max_connections() -> None:
    cfg = ServerConfig(max_connections=1)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        await _connect(server, nursery)
        client_end, server_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.serve_stream, server_end, ("127.0.0.1", 2))
        c = RawClient(client_end)
        events = await c.until(lambda evs: False)
        assert events[-1] == Err("maximum connections exceeded")
        nursery.cancel_scope.cancel()


async def test_deliveries_before_a_protocol_error_are_written_before_the_err() -> None:
    """The chunk's own deliveries (batched until the router's flush) still go
    out, then the -ERR, then the close (as nats-server)."""
    server = Server(ServerConfig())
    async with trio.open_nursery() as nursery:
        c = await _connect(server, nursery)
        await c.send(
            b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB foo 1\r\nPUB foo 5\r\nhello\r\nC\r\n'
        )
        with trio.fail_after(5):
            await c.until(lambda evs: False)  # until the server closes
        assert c.closed
        kinds = [type(e) for e in c.events if type(e) in (Msg, Err)]
        assert kinds == [Msg, Err]
        assert [e for e in c.events if type(e) is Msg] == [Msg(b"foo", b"1", None, b"hello")]
        nursery.cancel_scope.cancel()


async def test_unexpected_exception_closes_only_that_connection() -> None:
    """Last resort: a bug met while handling one client's input closes that
    connection (counted in /varz trijet_internal_errors); others go on."""
    server = Server(ServerConfig())
    add_sub = server.add_sub

    def broken(sub: Any) -> None:
        if sub.subject == b"boom":
            raise RuntimeError("a bug")
        add_sub(sub)

    server.add_sub = broken  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        bad = await _connect(server, nursery)
        good = await _connect(server, nursery)
        await bad.send(b'CONNECT {"verbose":false}\r\nSUB boom 1\r\n')
        await bad.until(lambda _evs: False)  # until the server closes it
        assert bad.closed
        assert server.stats.internal_errors == 1
        await good.send(b'CONNECT {"verbose":false}\r\nSUB fine 1\r\nPING\r\n')
        await good.until(lambda evs: any(type(e).__name__ == "Pong" for e in evs))
        closed = [c for c in server.closed_clients if c.closing is ClosedReason.INTERNAL_ERROR]
        assert len(closed) == 1
        nursery.cancel_scope.cancel()
