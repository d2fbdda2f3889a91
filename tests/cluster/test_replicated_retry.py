"""A replicated stream's publishes across a leader change (trio, in-memory links).

Regressions (issue 13): a leader that lost its lead with publish batches in flight
left them unanswered -- their entries were overwritten by the new leader (provably
not committed), the shell only logged ``publish_not_committed`` and the clients
waited for their timeout; they are now answered with nats-server's 503 no-responders
status (late, so a PubAck of the new leader for the same message, captured there
too, comes first).  And a replica
that captured publishes as leader but had lost the lead by the time it proposed
them forwarded them to the new leader, which may have captured the same messages:
r3_bench (main, sync always, C async 20,000) stored 1,150 of them twice and acked
them twice.  Publishes are now proposed leader-only: never forwarded.
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
from cluster.stream_fsm import StreamStateMachine
from cluster.streams import NOT_COMMITTED, Stream
from raft.errors import RaftError
from store.api import StreamStore
from store.memory import MemoryStreamStore

IDS = ["a", "b", "c"]
N = 40


def _stream(n: str, net: FakeNetwork, d: Path) -> Stream:
    cfg = StreamConfig(name="S", subjects=("s.>",), num_replicas=3)  # type: ignore[call-arg]

    def make(fsm: StreamStateMachine, store: StreamStore) -> ReplicatedGroup:
        return ReplicatedGroup(
            "S-R3F-retry", n, IDS, fsm, store, net.links(n), d / n, random.Random(n)
        )

    return Stream(cfg, MemoryStreamStore(), 0, group_factory=make)


async def _leader(streams: dict[str, Stream], but: str | None = None) -> str:
    for _ in range(1200):  # bounded: 60 s of (mock) time
        for n, s in streams.items():
            if n != but and s.replicated is not None and s.replicated.is_leader:
                return n
        await trio.sleep(0.05)
    raise AssertionError("no leader")


async def test_batches_overwritten_by_a_new_leader_are_answered_not_committed(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(3)
    streams = {n: _stream(n, net, tmp_path) for n in IDS}
    answers: dict[bytes, list[Any]] = {}
    all_answered = trio.Event()

    def on_result(payload: bytes, result: Any) -> None:
        answers[payload].append(result)
        if all(answers.values()):
            all_answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for s in streams.values():
            await nursery.start(s.run)
        with trio.fail_after(60):
            old = await _leader(streams)
            others = [n for n in IDS if n != old]
            net.sim.isolate(old, others)  # its entries can no longer commit
            for i in range(N):
                payload = b"m%d" % i
                answers[payload] = []
                streams[old].offer("s.x", None, payload, partial(on_result, payload))
            await trio.sleep(0.2)  # proposed and appended on the isolated leader only
            assert streams[old].replicated is not None
            assert streams[old].replicated.raft.core.journal.last_index > 1
            new = await _leader(streams, but=old)
            await trio.sleep(0.5)  # the new leader commits entries of its own term
            net.sim.heal()
            await all_answered.wait()
        nursery.cancel_scope.cancel()
    assert new != old
    assert streams[old].refused_batches >= 1
    for payload, got in answers.items():
        assert got == [NOT_COMMITTED], (payload, got)
    for s in streams.values():  # the new leader's log won: none of them stored
        assert s.store.state().msgs == 0


async def test_a_replica_that_lost_the_lead_never_forwards_captured_publishes(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(5)
    streams = {n: _stream(n, net, tmp_path) for n in IDS}
    got: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for s in streams.values():
            await nursery.start(s.run)
        with trio.fail_after(60):
            lead = await _leader(streams)
            follower = next(n for n in IDS if n != lead)
            # a stale capture: the message reached a replica that no longer leads
            streams[follower].offer("s.x", None, b"stale", got.append)
            for _ in range(100):
                if got:
                    break
                await trio.sleep(0.1)
            for _ in range(10):  # a forwarded copy would have committed by now
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert got == [NOT_COMMITTED]
    for s in streams.values():
        assert s.store.state().msgs == 0


async def test_a_deposed_leader_that_does_not_know_it_fails_its_read_barrier(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """STREAM.MSG.GET reads after ``read_barrier`` (issue 13, chaos KV CAS linearizability
    with pause-leader/partition-leader): a leader cut off from the others keeps believing
    it leads for up to its fallback timeout and answered reads from a store the new leader
    had already moved past.  Its barrier cannot commit; the real leader's does."""
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(7)
    streams = {n: _stream(n, net, tmp_path) for n in IDS}
    outcome: list[BaseException | None] = []

    async def barrier(rg: ReplicatedGroup) -> None:
        try:
            await rg.raft.read_barrier()
        except RaftError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for s in streams.values():
            await nursery.start(s.run)
        with trio.fail_after(60):
            old = await _leader(streams)
            rg_old = streams[old].replicated
            assert rg_old is not None
            await rg_old.raft.read_barrier()  # the leader, connected: passes
            net.sim.isolate(old, [n for n in IDS if n != old])
            assert rg_old.is_leader  # it does not know yet
            nursery.start_soon(barrier, rg_old)
            new = await _leader(streams, but=old)
            rg_new = streams[new].replicated
            assert rg_new is not None
            await rg_new.raft.read_barrier()
            net.sim.heal()
            for _ in range(600):
                if outcome:
                    break
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert len(outcome) == 1 and isinstance(outcome[0], RaftError), outcome
