"""Sessions on real sockets (socket pairs): a router batch for an idle client
is written by the routing reader itself (``ClientSession.flush_batch``), and
whatever does not fit -- a large batch, a full socket, a batch over
``max_pending`` -- still arrives whole and in order, or makes a slow consumer."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio

from node.config import ServerConfig
from node.outbound import Outbound
from node.protocol.connection import ProtocolConnection, Role
from node.protocol.events import Info, Msg, Pong
from node.server import Server
from node.session import DIRECT_WRITE_BYTES_MAX, ClosedReason


class SockClient:
    """The client end of a socket pair, parsing what the server sends."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.proto = ProtocolConnection(Role.CLIENT)
        self.events: list[Any] = []

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def until(self, pred: Any) -> list[Any]:
        """Read until ``pred(events)`` holds (or the server closes)."""
        while not pred(self.events):
            data = await self.stream.receive_some(65536)
            if not data:
                break
            self.events.extend(self.proto.receive_data(data))
        return self.events

    def msgs(self) -> list[Msg]:
        return [e for e in self.events if type(e) is Msg]


async def _connect(server: Server, nursery: trio.Nursery, *, small_buffers: bool = False) -> Any:
    a, b = socket.socketpair()
    if small_buffers:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client = SockClient(trio.SocketStream(trio.socket.from_stdlib_socket(a)))
    nursery.start_soon(
        server.serve_stream, trio.SocketStream(trio.socket.from_stdlib_socket(b)), ("127.0.0.1", 1)
    )
    await client.until(lambda evs: any(type(e) is Info for e in evs))
    await client.send(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
    return client


def _pongs(n: int) -> Any:
    return lambda evs: sum(1 for e in evs if type(e) is Pong) >= n


async def test_request_reply_hops_are_written_by_the_routing_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counting test: sequential requests and answers between two idle clients
    never take the general flush path (account, wake the writer, take), and
    every answer arrives, in order, with its bytes."""
    general: list[int] = []
    orig = Outbound.flush_batch

    def counting(self: Outbound) -> None:
        general.append(1)
        orig(self)

    server = Server(ServerConfig())
    async with trio.open_nursery() as nursery:
        rep = await _connect(server, nursery)
        req = await _connect(server, nursery)
        await rep.send(b"SUB svc 1\r\nPING\r\n")
        await rep.until(_pongs(1))
        await req.send(b"SUB _INBOX.x.* 2\r\nPING\r\n")
        await req.until(_pongs(1))
        monkeypatch.setattr(Outbound, "flush_batch", counting)
        n = 20
        with trio.fail_after(30):
            for i in range(n):
                await req.send(b"PUB svc _INBOX.x.%d 3\r\nq%02d\r\n" % (i, i))
                await rep.until(lambda evs, k=i + 1: len([e for e in evs if type(e) is Msg]) >= k)
                got = rep.msgs()[-1]
                assert (got.subject, got.reply, got.payload) == (
                    b"svc",
                    b"_INBOX.x.%d" % i,
                    b"q%02d" % i,
                )
                await rep.send(b"PUB %b 3\r\na%02d\r\n" % (got.reply, i))
                await req.until(lambda evs, k=i + 1: len([e for e in evs if type(e) is Msg]) >= k)
        assert [(m.subject, m.payload) for m in req.msgs()] == [
            (b"_INBOX.x.%d" % i, b"a%02d" % i) for i in range(n)
        ]
        assert general == []
        nursery.cancel_scope.cancel()


async def test_large_batches_and_a_full_socket_keep_every_byte_in_order() -> None:
    """A batch over ``DIRECT_WRITE_BYTES_MAX`` and a subscriber that reads
    nothing for a while (its socket fills, a send is partial): the rest goes
    through the writer, and every message arrives whole and in order."""
    server = Server(ServerConfig())
    async with trio.open_nursery() as nursery:
        sub = await _connect(server, nursery, small_buffers=True)
        await sub.send(b"SUB s 1\r\nPING\r\n")
        await sub.until(_pongs(1))
        pub = await _connect(server, nursery)
        sizes = [10, 70000, 1, 3000, DIRECT_WRITE_BYTES_MAX + 1, 5, 20000, 7]
        for i, size in enumerate(sizes):
            body = bytes([97 + i]) * size
            await pub.send(b"PUB s %d\r\n%b\r\n" % (size, body))
        await pub.send(b"PING\r\n")
        await pub.until(_pongs(1))  # all routed while the subscriber read nothing
        with trio.fail_after(30):
            await sub.until(lambda evs: len([e for e in evs if type(e) is Msg]) >= len(sizes))
        assert [m.payload for m in sub.msgs()] == [
            bytes([97 + i]) * size for i, size in enumerate(sizes)
        ]
        nursery.cancel_scope.cancel()


async def test_a_batch_over_max_pending_on_a_socket_is_a_slow_consumer() -> None:
    server = Server(ServerConfig(max_pending=4096))
    async with trio.open_nursery() as nursery:
        sub = await _connect(server, nursery, small_buffers=True)
        await sub.send(b"SUB s 1\r\nPING\r\n")
        await sub.until(_pongs(1))
        session = server.clients[1]
        pub = await _connect(server, nursery)
        await pub.send(b"PUB s 5000\r\n" + b"x" * 5000 + b"\r\n")
        with trio.fail_after(30):
            await session.wait_closed()
        assert session.closing is ClosedReason.SLOW_CONSUMER_PENDING
        nursery.cancel_scope.cancel()
