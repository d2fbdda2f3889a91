"""Publishes with a ``Nats-Msg-Id`` that a replica captured but never appended go to the
new leader (``cluster.reroute``; trio, in-memory links, mock clock).

Issue 13, graceful stepdown gap: the outgoing leader holds new entries while its
successor catches up, and refuses what it captured meanwhile once it follows; its
publishers waited for their timeout (0.25 s in r3_bench) and retried.  Those with a msg
id are now forwarded to the new leader (the stream's dedupe keeps one copy if the new
leader captured the same message too) and answered with their PubAck; those without
one keep the late NOT_COMMITTED (``test_replicated_retry``).
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import trio
import trio.testing

from chaos.net import FakeNetwork
from cluster.model import StreamConfig
from cluster.replicated import ReplicatedGroup
from cluster.reroute import reroutable, split
from cluster.stream_fsm import PubResult, StreamStateMachine
from cluster.streams import NOT_COMMITTED, Stream
from raft.errors import NoLeader, NotLeader, ProposalDropped, QueueFull
from store.api import StreamStore
from store.memory import MemoryStreamStore

IDS = ["a", "b", "c"]
N = 30


def _hdr(msg_id: str) -> bytes:
    return f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode()


def _stream(n: str, net: FakeNetwork, d: Path) -> Stream:
    cfg = StreamConfig(name="S", subjects=("s.>",), num_replicas=3)  # type: ignore[call-arg]

    def make(fsm: StreamStateMachine, store: StreamStore) -> ReplicatedGroup:
        # no worker threads: the mock clock alone decides (deterministic under load)
        return ReplicatedGroup(
            "S-R3F-reroute",
            n,
            IDS,
            fsm,
            store,
            net.links(n),
            d / n,
            random.Random(n),
            durable_store=False,
            fsync_in_thread=False,
        )

    return Stream(cfg, MemoryStreamStore(), 0, group_factory=make)


async def _leader(streams: dict[str, Stream], but: str | None = None) -> str:
    for _ in range(1200):  # bounded: 60 s of (mock) time
        for n, s in streams.items():
            if n != but and s.replicated is not None and s.replicated.is_leader:
                return n
        await trio.sleep(0.05)
    raise AssertionError("no leader")


async def _replicas_hold(streams: dict[str, Stream], msgs: int) -> None:
    for _ in range(600):  # bounded: 60 s of (mock) time
        if all(s.store.state().msgs == msgs for s in streams.values()):
            return
        await trio.sleep(0.1)
    raise AssertionError([s.store.state().msgs for s in streams.values()])


def test_split_and_reroutable() -> None:
    with_id = ("s.x", _hdr("m1"), b"1", None)
    empty_id = ("s.x", b"NATS/1.0\r\nNats-Msg-Id: \r\n\r\n", b"2", None)
    plain = ("s.x", None, b"3", None)
    other = ("s.x", b"NATS/1.0\r\nX: y\r\n\r\n", b"4", None)
    batch = [with_id, empty_id, plain, other]
    assert split(batch, 120 * 10**9) == ([with_id], [empty_id, plain, other])
    assert split(batch, 0) == ([], batch)  # no duplicate window: no dedupe to rely on
    assert reroutable(NotLeader("b")) and reroutable(NoLeader("none"))
    assert reroutable(ProposalDropped("overwritten", maybe_committed=False))
    assert not reroutable(ProposalDropped("unknown", maybe_committed=True))
    assert not reroutable(QueueFull("full"))


async def test_a_stale_capture_with_a_msg_id_is_stored_once_through_the_leader(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(11)
    streams = {n: _stream(n, net, tmp_path) for n in IDS}
    got: dict[str, list[Any]] = {"stale": [], "leader": [], "plain": []}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for s in streams.values():
            await nursery.start(s.run)
        with trio.fail_after(60):
            lead = await _leader(streams)
            follower = next(n for n in IDS if n != lead)
            # the same message reached a replica that no longer leads and the leader
            streams[follower].offer("s.x", _hdr("m1"), b"one", got["stale"].append)
            streams[lead].offer("s.x", _hdr("m1"), b"one", got["leader"].append)
            streams[follower].offer("s.x", None, b"no id", got["plain"].append)
            for _ in range(300):
                if all(got.values()):
                    break
                await trio.sleep(0.1)
            await _replicas_hold(streams, 1)
        nursery.cancel_scope.cancel()
    assert got["plain"] == [NOT_COMMITTED]  # without an id: never forwarded
    (a,), (b,) = got["stale"], got["leader"]
    assert isinstance(a, PubResult) and isinstance(b, PubResult), (a, b)
    assert a.seq == b.seq == 1 and sorted([a.duplicate, b.duplicate]) == [False, True]
    assert streams[follower].rerouted_msgs == 1


async def test_publishes_held_by_a_stepdown_are_answered_through_the_new_leader(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(13)
    streams = {n: _stream(n, net, tmp_path) for n in IDS}
    answers: dict[str, list[Any]] = {}
    all_answered = trio.Event()

    def on_result(mid: str, result: Any) -> None:
        answers[mid].append(result)
        if all(answers.values()):
            all_answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for s in streams.values():
            await nursery.start(s.run)
        with trio.fail_after(60):
            old = await _leader(streams)
            rg = streams[old].replicated
            assert rg is not None
            nursery.start_soon(rg.step_down)
            await rg.raft.wait_cycle()  # the transfer holds new entries from here
            for i in range(N):
                mid = f"m{i}"
                answers[mid] = []
                streams[old].offer("s.x", _hdr(mid), mid.encode(), partial(on_result, mid))
            await all_answered.wait()
            new = await _leader(streams)
            await _replicas_hold(streams, N)
        nursery.cancel_scope.cancel()
    assert new != old
    assert streams[old].rerouted_msgs > 0
    results = [got for got in answers.values()]
    assert all(len(r) == 1 and isinstance(r[0], PubResult) for r in results), results
    seqs = sorted(r[0].seq for r in results)
    assert seqs == list(range(1, N + 1))  # each stored once, none lost
