"""Deliveries sent ahead of their commit (``cluster.consumer_ahead``), trio in memory.

A replicated consumer's shell over a fake stream group whose commits the
test holds back: an ack-``none`` consumer sends at once (gapless consumer
sequences, the next pick after what was sent, ``num_pending`` without it) and
its committed state catches up once the group commits; a lead change with
deliveries still uncommitted sends them again from the committed position
(at-least-once, none skipped); an explicit-ack consumer sends nothing before
its delivery is committed, as nats-server's ``replicateDeliveries``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from cluster.consumer_fsm import ConsumerStateMachine, policy_of
from cluster.consumer_link import StreamGroupLink
from cluster.consumer_model import AckPolicy, ConsumerConfig
from cluster.consumers import Consumer
from cluster.ops import ConsumerCreated, ConsumerDelivered
from raft.errors import NotLeader
from store.memory import MemoryConsumerStore, MemoryStreamStore

WAIT_S = 5.0


class HeldGroup:
    """A stream group whose commits wait for ``release`` (or fail with ``fail``)."""

    def __init__(self, fsm: ConsumerStateMachine) -> None:
        self.fsm = fsm
        self.log: list[Any] = []
        self.gate = trio.Event()
        self.failing = False

    async def propose(self, op: Any) -> Any:
        self.log.append(op)
        await self.gate.wait()
        if self.failing:
            raise NotLeader("lost the lead")
        return self.fsm.apply_op(op)

    def release(self) -> None:
        self.gate.set()


def make(ack: AckPolicy, n: int = 10) -> tuple[Consumer, HeldGroup, MemoryStreamStore]:
    store = MemoryStreamStore()
    for i in range(n):
        store.append("s.a", b"", b"%d" % i, i + 1)
    cfg = ConsumerConfig(durable_name="D", ack_policy=ack)
    fsm = ConsumerStateMachine("D", MemoryConsumerStore())
    fsm.apply_op(ConsumerCreated("D", policy_of(cfg), 1, ()))
    group = HeldGroup(fsm)
    stream: Any = SimpleNamespace(cfg=SimpleNamespace(name="S"), store=store, listeners=[])
    c = Consumer(stream, "D", cfg, MemoryConsumerStore(), 1, fsm=fsm, link=StreamGroupLink(group))
    return c, group, store


async def lead(c: Consumer) -> None:
    c.set_leading(True)
    c.ready.set()


async def wait_for(pred: Any) -> None:
    """Let every task run until ``pred()`` holds (bounded in rounds and time)."""
    with trio.fail_after(WAIT_S):
        for _ in range(100):
            if pred():
                return
            await trio.testing.wait_all_tasks_blocked()
    raise AssertionError("condition never held")


async def test_ack_none_sends_ahead_and_commits_after() -> None:
    c, group, _ = make(AckPolicy.NONE)
    sent: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        await lead(c)
        for _ in range(2):
            got, _ = await c.deliver(3, send=lambda g: sent.extend((d.sseq, d.dseq) for _, d in g))
            assert len(got) == 3
        # sent before any commit, gapless, the second pick after the first
        assert sent == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]
        assert c.fsm.dseq == 0 and c.fsm.next_sseq == 1
        assert c.ahead.unapplied == 6 and c.has_messages()
        assert c.num_pending() - c.ahead.unapplied == 4
        group.release()
        await wait_for(lambda: c.fsm.next_sseq == 7 and c.ahead.unapplied == 0)
        assert c.fsm.dseq == 6  # the committed sequences are the ones sent
        assert all(isinstance(op, ConsumerDelivered) for op in group.log)
        assert sorted(s for op in group.log for s in op.sseqs) == [1, 2, 3, 4, 5, 6]
        got, _ = await c.deliver(10, send=lambda g: sent.extend((d.sseq, d.dseq) for _, d in g))
        assert [(m.seq, d.dseq) for m, d in got] == [(s, s) for s in range(7, 11)]
        await wait_for(lambda: c.fsm.next_sseq == 11)
        nursery.cancel_scope.cancel()


async def test_ack_none_lead_change_resends_uncommitted() -> None:
    c, group, _ = make(AckPolicy.NONE)
    seen: list[int] = []

    def send(g: Any) -> None:
        seen.extend(m.seq for m, _ in g)

    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        await lead(c)
        await c.deliver(4, send=send)  # 1..4 sent, never committed
        group.failing = True
        c.set_leading(False)
        group.release()
        await wait_for(lambda: c.ahead.unapplied == 0)
        assert c.fsm.next_sseq == 1  # nothing committed
        group.failing = False
        await lead(c)
        got, _ = await c.deliver(10, send=send)
        # the new leadership starts from the committed position: none skipped
        assert [m.seq for m, _ in got] == list(range(1, 11))
        assert [d.dseq for _, d in got] == list(range(1, 11))
        await wait_for(lambda: c.fsm.next_sseq == 11)
        assert sorted(set(seen)) == list(range(1, 11))
        nursery.cancel_scope.cancel()


async def test_explicit_ack_sends_only_after_commit() -> None:
    c, group, _ = make(AckPolicy.EXPLICIT)
    sent: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        await lead(c)
        done = trio.Event()

        async def fetch() -> None:
            await c.deliver(3, send=lambda g: sent.extend(m.seq for m, _ in g))
            done.set()

        nursery.start_soon(fetch)
        await wait_for(lambda: len(group.log) == 1)  # proposed, held
        assert not c.ahead.usable() and sent == [] and not done.is_set()
        group.release()
        with trio.fail_after(WAIT_S):
            await done.wait()
        assert sent == [1, 2, 3] and sorted(c.fsm.pending) == [1, 2, 3]
        nursery.cancel_scope.cancel()


class AppliedFirstGroup(HeldGroup):
    """Applies each proposal when released but hands its result back only at
    ``answer``: the window between a commit's apply (every replica, the
    leader's state machine included) and the proposer's task running again."""

    def __init__(self, fsm: ConsumerStateMachine) -> None:
        super().__init__(fsm)
        self.answer = trio.Event()

    async def propose(self, op: Any) -> Any:
        self.log.append(op)
        await self.gate.wait()
        out = self.fsm.apply_op(op)
        await self.answer.wait()
        return out


async def test_pending_in_ack_subjects_right_while_the_proposer_has_not_resumed() -> None:
    """Regression (CI flake of a Spark range read on R3): the ack subjects'
    pending of a batch picked after an apply, before the proposer resumed,
    said 0 with 4 messages left, and the reader stopped short."""
    store = MemoryStreamStore()
    for i in range(10):
        store.append("s.a", b"", b"%d" % i, i + 1)
    cfg = ConsumerConfig(durable_name="D", ack_policy=AckPolicy.NONE)
    fsm = ConsumerStateMachine("D", MemoryConsumerStore())
    fsm.apply_op(ConsumerCreated("D", policy_of(cfg), 1, ()))
    group = AppliedFirstGroup(fsm)
    stream: Any = SimpleNamespace(cfg=SimpleNamespace(name="S"), store=store, listeners=[])
    c = Consumer(stream, "D", cfg, MemoryConsumerStore(), 1, fsm=fsm, link=StreamGroupLink(group))
    async with trio.open_nursery() as nursery:
        await nursery.start(c.run)
        await lead(c)
        await c.deliver(3)  # 1..3 sent ahead, proposed
        assert c.pending_after_pick == 7
        group.release()
        await wait_for(lambda: c.fsm.next_sseq == 4)  # applied; the proposer still waits
        assert c.ahead.unapplied == 0 and c.num_pending() == 7
        got, _ = await c.deliver(3)
        assert [m.seq for m, _ in got] == [4, 5, 6]
        assert c.pending_after_pick == 4  # was 1 - 3 -> 0 before the fix
        assert c.has_messages()
        group.answer.set()
        await wait_for(lambda: c.fsm.next_sseq == 7)
        got, _ = await c.deliver(10)
        assert [m.seq for m, _ in got] == [7, 8, 9, 10] and c.pending_after_pick == 0
        nursery.cancel_scope.cancel()
