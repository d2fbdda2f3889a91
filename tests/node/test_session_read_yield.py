"""A session's reader and the scheduler (``node.session.READ_YIELD_S``): a
chunk that is already there when the reader comes back is read without a
scheduling pass while the reader yielded recently (a sync publisher's next
publish), and with one once it has not yielded for ``READ_YIELD_S`` (a client
that keeps its socket full never holds the event loop for long).  Counting
tests on real sockets (socket pairs): the reader's clock is replaced, so
nothing depends on the machine's speed."""

from __future__ import annotations

import socket
import types
from typing import Any

import pytest
import trio

import node.session as session_mod
from node.config import ServerConfig
from node.protocol.connection import ProtocolConnection, Role
from node.protocol.events import Info, Pong
from node.server import Server

PINGS = 20


async def _reader_checkpoints(monkeypatch: pytest.MonkeyPatch, step_s: float) -> int:
    """Checkpoints the reader's own task takes while it reads ``PINGS`` PINGs
    sent at once, 6 bytes per read (so all but the first read find data
    there), its clock advancing ``step_s`` per look."""
    now = [0.0]

    def clock() -> float:
        now[0] += step_s
        return now[0]

    monkeypatch.setattr(session_mod, "time", types.SimpleNamespace(perf_counter=clock))
    counted = [0]
    orig = trio.lowlevel.checkpoint

    async def counting() -> None:
        if trio.lowlevel.current_task().name.endswith("_reader"):
            counted[0] += 1
        await orig()

    monkeypatch.setattr(trio.lowlevel, "checkpoint", counting)
    server = Server(ServerConfig())
    a, b = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    proto = ProtocolConnection(Role.CLIENT)
    events: list[Any] = []

    async def until(pred: Any) -> None:
        while not pred(events):
            data = await stream.receive_some(65536)
            assert data, "the server closed the connection"
            events.extend(proto.receive_data(data))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                server.serve_stream,
                trio.SocketStream(trio.socket.from_stdlib_socket(b)),
                ("127.0.0.1", 1),
            )
            await until(lambda evs: any(type(e) is Info for e in evs))
            await stream.send_all(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
            await until(lambda evs: any(type(e) is Pong for e in evs))
            monkeypatch.setattr(session_mod, "RECV_BYTES_MAX", 6)
            counted[0] = 0
            await stream.send_all(b"PING\r\n" * PINGS)
            await until(lambda evs: sum(type(e) is Pong for e in evs) >= PINGS + 1)
            n = counted[0]
            nursery.cancel_scope.cancel()
    return n


async def test_a_chunk_already_there_is_read_without_a_scheduling_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the clock never reaches READ_YIELD_S: only the waits for readability yield
    assert await _reader_checkpoints(monkeypatch, 0.0) == 0


async def test_a_reader_that_always_finds_data_still_yields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every look at the clock is READ_YIELD_S later: every read that found
    # data at once yields (all but the first of the PINGS reads)
    n = await _reader_checkpoints(monkeypatch, session_mod.READ_YIELD_S)
    assert n >= PINGS - 1
