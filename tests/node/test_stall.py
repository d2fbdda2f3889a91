"""Fast-producer stall (nats-server's stall gate) over in-memory streams, under MockClock.

The consumer and the producer are lockstep streams: the consumer's writer stays in
``send_all`` until the test reads (a consumer that is not reading), and the
producer's ``send_all`` returns only once the server's reader has taken the
bytes -- so a second send returns only when the reader has finished the chunk
before, stall included.  Times are the mock clock's (virtual, deterministic).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from node.config import ServerConfig
from node.internal import InternalClient
from node.protocol.events import Msg, Pong
from node.server import Server
from node.session import ClientSession
from node.stall import STALL_S_MIN, STALL_S_TOTAL, stall_threshold
from tests.node.test_session import RawClient, _connect, _has

MAX_PENDING = 65536
PAYLOAD = b"x" * 1000
#: one MSG as the consumer receives it (``MSG s 1 1000\r\n`` + payload + CRLF)
MSG_BYTES = len(b"MSG s 1 1000\r\n") + len(PAYLOAD) + 2
#: messages that take the consumer over the stall threshold but not over max_pending
N_OVER = stall_threshold(MAX_PENDING) // MSG_BYTES + 1


def _pubs(n: int) -> bytes:
    return (b"PUB s 1000\r\n" + PAYLOAD + b"\r\n") * n


async def _setup(
    nursery: trio.Nursery, **cfg: Any
) -> tuple[Server, RawClient, ClientSession, RawClient]:
    server = Server(ServerConfig(max_pending=MAX_PENDING, **cfg))
    slow = await _connect(server, nursery, lockstep=True)
    await slow.send(b'CONNECT {"verbose":false}\r\nSUB s 1\r\nPING\r\n')
    await slow.until(_has(Pong))
    consumer = server.clients[1]
    prod = await _connect(server, nursery, lockstep=True)
    await prod.send(b'CONNECT {"verbose":false}\r\n')
    assert N_OVER * MSG_BYTES < MAX_PENDING
    return server, slow, consumer, prod


async def _chunk_time(prod: RawClient, chunk: bytes) -> float:
    """Virtual time from handing ``chunk`` to the server until its reader is
    ready for the next one (its stall, if any, is over)."""
    t0 = trio.current_time()
    await prod.send(chunk)
    await prod.send(b"PING\r\n")  # taken once the reader reads again
    return trio.current_time() - t0


async def test_producer_waits_for_a_consumer_over_the_threshold_at_most_the_cap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        server, _slow, consumer, prod = await _setup(nursery)
        waited = await _chunk_time(prod, _pubs(N_OVER))
        # the consumer never reads: 2 ms waits one after another, 10 ms in all
        assert waited == pytest.approx(STALL_S_TOTAL, abs=1e-6)
        assert consumer.stalls == round(STALL_S_TOTAL / STALL_S_MIN)
        assert server.stats.stalled_clients == consumer.stalls
        assert consumer.closing is None  # not a slow consumer: under max_pending
        # the next chunk to the still-gated consumer waits the cap again, no more
        waited = await _chunk_time(prod, _pubs(1))
        assert waited == pytest.approx(STALL_S_TOTAL, abs=1e-6)
        nursery.cancel_scope.cancel()


async def test_producer_is_released_when_the_consumer_drains(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        _server, slow, consumer, prod = await _setup(nursery)
        t0 = trio.current_time()
        await prod.send(_pubs(N_OVER))
        assert consumer._gate is not None  # the chunk closed the gate
        nursery.start_soon(slow.until, _has(Msg, N_OVER))  # the consumer reads again
        await prod.send(b"PING\r\n")
        # released by the drain, before the first wait ran out
        assert trio.current_time() - t0 < STALL_S_MIN
        assert consumer._gate is None
        assert consumer.stalls == 1
        await slow.until(_has(Msg, N_OVER))
        nursery.cancel_scope.cancel()


async def test_no_fast_producer_stall_drops_for_the_gated_consumer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        server, slow, consumer, prod = await _setup(nursery, no_fast_producer_stall=True)
        assert await _chunk_time(prod, _pubs(N_OVER)) == 0  # no wait
        assert consumer._gate is not None
        # while gated, what the producer routes to it is dropped (counted out, as the
        # reference counts it), not queued: the consumer is not cut
        assert await _chunk_time(prod, _pubs(5)) == 0
        assert consumer.out_msgs == N_OVER + 5
        await slow.until(_has(Msg, N_OVER))
        await slow.send(b"PING\r\n")
        events = await slow.until(_has(Pong, 2))
        assert sum(1 for e in events if type(e) is Msg) == N_OVER
        assert consumer.closing is None
        assert consumer.stalls == 0 and server.stats.stalled_clients == 0
        # drained: the gate is open, messages are delivered again
        assert consumer._gate is None
        await prod.send(_pubs(1))
        await slow.until(_has(Msg, N_OVER + 1))
        nursery.cancel_scope.cancel()


async def test_internal_producer_is_neither_stalled_nor_dropped_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for no_stall in (False, True):
        async with trio.open_nursery() as nursery:
            server, slow, consumer, prod = await _setup(nursery, no_fast_producer_stall=no_stall)
            await _chunk_time(prod, _pubs(N_OVER))
            assert consumer._gate is not None
            internal = InternalClient(server, "test")
            assert internal.publish(b"s", PAYLOAD) == 1  # synchronous, never waits
            assert server.stall_gates.met == []  # nothing noted for a stall
            assert not server.stall_gates.producing
            # queued, not dropped: the consumer gets it after the first batch
            await slow.until(_has(Msg, N_OVER + 1))
            nursery.cancel_scope.cancel()


async def test_reload_switches_the_stall(autojump_clock: trio.testing.MockClock) -> None:
    from node.reload import apply
    from node.reloaddiff import diff

    async with trio.open_nursery() as nursery:
        server, _slow, consumer, prod = await _setup(nursery)
        new = ServerConfig(max_pending=MAX_PENDING, no_fast_producer_stall=True)
        plan = diff(server.cfg, new)
        assert "Reloaded: fast producers will not be stalled" in plan.notices
        apply(server, new, plan)
        assert await _chunk_time(prod, _pubs(N_OVER)) == 0
        assert consumer.stalls == 0
        nursery.cancel_scope.cancel()


def test_no_fast_producer_stall_is_parsed(tmp_path: Any) -> None:
    from node.config import load

    path = tmp_path / "s.conf"
    path.write_text("no_fast_producer_stall: true\n")
    c = load(["-c", str(path)])
    assert c.no_fast_producer_stall is True and c.warnings == []
    assert Server(c).stall_gates.no_stall is True
    path.write_text("port: 4222\n")
    assert load(["-c", str(path)]).no_fast_producer_stall is False


def test_reload_notices_as_the_reference() -> None:
    from node.reloaddiff import diff

    on, off = ServerConfig(), ServerConfig(no_fast_producer_stall=True)
    assert "Reloaded: fast producers will not be stalled" in diff(on, off).notices
    assert "Reloaded: fast producers will be stalled" in diff(off, on).notices
    assert not any("fast producers" in n for n in diff(on, ServerConfig()).notices)


def test_connz_stalls_omitted_when_zero_and_varz_counts() -> None:
    from node.monitor.connz import connz
    from node.monitor.endpoints import varz
    from tests.support.monitor import FakeSession, add, make_server

    server = make_server()
    quiet = add(server, FakeSession(1, 1000.0))
    stalled = add(server, FakeSession(2, 1000.0))
    stalled.stalls = 3  # type: ignore[attr-defined]
    server.stats.stalled_clients = 3
    conns = connz(server, now=1100.0)["connections"]
    assert "stalls" not in conns[0]
    # after out_bytes, before subscriptions, as nats-server's ConnInfo
    keys = list(conns[1])
    assert conns[1]["stalls"] == 3
    assert keys.index("stalls") == keys.index("out_bytes") + 1
    assert keys.index("subscriptions") == keys.index("stalls") + 1
    assert quiet is not None
    assert varz(server, now=1100.0)["stalled_clients"] == 3
