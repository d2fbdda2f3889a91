"""A replicated stream's publishes across a leader change (trio, in-memory links).

Regression (issue 13, r3 KV bench at 256 in flight): a leader that lost its lead
with publish batches in flight left them unanswered -- their entries were
overwritten by the new leader (provably not committed), the shell only logged
``publish_not_committed`` and the clients waited for their timeout.  Such batches
are now proposed again through the new leader and answered from there.
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
from cluster.stream_fsm import PubResult, StreamStateMachine
from cluster.streams import Stream
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


async def test_batches_overwritten_by_a_new_leader_are_retried_and_answered(
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
            for _ in range(600):  # every replica applies the retried batches
                if all(s.store.state().msgs == N for s in streams.values()):
                    break
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert new != old
    assert streams[old].retried_batches >= 1
    seqs = []
    for payload, got in answers.items():
        assert len(got) == 1, (payload, got)
        assert isinstance(got[0], PubResult) and not got[0].duplicate, got
        seqs.append(got[0].seq)
    assert sorted(seqs) == list(range(1, N + 1))  # each stored once
    for s in streams.values():
        stored = [s.store.load(q).payload for q in range(1, N + 1)]
        assert sorted(stored) == sorted(answers)
