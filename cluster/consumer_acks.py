"""A consumer's ack queue: acks in from the router, proposed in batches.

Acks arrive synchronously from the router (``offer_ack``, ``offer_plain_ack``,
``offer_plain_acks``), are queued (bounded by ``ACK_QUEUE_MAX``) and proposed
by the consumer's ack loop in batches of about ``ACKS_PER_OP_MAX``: runs of
plain acks as one ``ConsumerAcked`` (sequence arrays), the others as one
``ConsumerAcks``; each ack's callback then gets its ``AckOutcome`` (ack sync
replies, answered only once the state holding them is durable).  Stream
purges reach the state machine through the same loop (``ConsumerStreamFirst``).
A batch whose proposal fails (a replicated consumer whose stream lost its
lead or quorum) is dropped: its acks are not answered.

:class:`AckQueue` is a mixin of :class:`cluster.consumers.Consumer`, which
owns the attributes it uses (set in ``Consumer.__init__``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from cluster.consumer_link import ConsumerGone
from cluster.ops import AckItem, AckKind, ConsumerAcked, ConsumerAcks, ConsumerStreamFirst
from raft.errors import RaftError

if TYPE_CHECKING:
    from cluster.consumer_fsm import ConsumerOutcome
    from cluster.ops import ConsumerOp
    from cluster.retention import Retention

log = logging.getLogger(__name__)

ACK_QUEUE_MAX = 100_000
ACKS_PER_OP_MAX = 4096

#: callback(outcome) for one queued ack
OnAck = Callable[[Any], None]


class AckQueue:
    """The ack queue of a :class:`~cluster.consumers.Consumer` (a mixin)."""

    name: str
    retention: Retention | None
    #: queued acks in arrival order: (item, callback) for one ack, or
    #: (None, (sseqs, dseqs)) for a run of plain acks (no callbacks)
    _acks: list[tuple[AckItem | None, Any]]
    #: acks queued (a plain run counts each of its acks)
    _acks_n: int
    _acks_wake: trio.Event
    #: set while no ack waits to be applied (``deliver`` waits for it)
    _acks_idle: trio.Event
    #: an ack other than a plain +ACK was queued since the loop was last idle
    _acks_special: bool
    #: a purge's first sequence to tell the state machine about
    _first_seq: int
    _first_applied: trio.Event

    if TYPE_CHECKING:  # the consumer's own

        async def propose(self, op: ConsumerOp) -> ConsumerOutcome: ...

        async def flush(self) -> None: ...

    def offer_ack(self, item: AckItem, on_done: OnAck | None) -> bool:
        """Queue an ack (called synchronously by the router); False when full."""
        if self._acks_n >= ACK_QUEUE_MAX:
            return False
        if item.kind is not AckKind.ACK:
            self._acks_special = True
        self._acks.append((item, on_done))
        self._queued(1)
        return True

    def offer_plain_ack(self, sseq: int, dseq: int, on_done: OnAck | None) -> bool:
        """Queue a plain ack (``+ACK``): like ``offer_ack`` with an ``ACK`` item,
        without the item (runs of them are proposed as one ``ConsumerAcked``)."""
        if on_done is not None:
            return self.offer_ack(AckItem(AckKind.ACK, sseq, dseq), on_done)
        return self.offer_plain_acks([sseq], [dseq]) == 1

    def offer_plain_acks(self, sseqs: list[int], dseqs: list[int]) -> int:
        """Queue a run of reply-less plain acks (one wake-up; the lists become
        the queue's); returns how many were queued (the queue is bounded)."""
        room = ACK_QUEUE_MAX - self._acks_n
        if room <= 0:
            return 0
        if len(sseqs) > room:
            sseqs, dseqs = sseqs[:room], dseqs[:room]
        acks = self._acks
        if acks and acks[-1][0] is None:  # after another plain run: join it
            run = acks[-1][1]
            run[0].extend(sseqs)
            run[1].extend(dseqs)
        else:
            acks.append((None, (sseqs, dseqs)))
        self._queued(len(sseqs))
        return len(sseqs)

    def _queued(self, n: int) -> None:
        self._acks_n += n
        self._acks_wake.set()
        if self._acks_idle.is_set():
            self._acks_idle = trio.Event()

    def _take_acks(self) -> list[tuple[AckItem | None, Any]]:
        """The next entries to propose: about ``ACKS_PER_OP_MAX`` acks (a plain
        run longer than that is split)."""
        acks = self._acks
        out: list[tuple[AckItem | None, Any]] = []
        n = 0
        while acks and n < ACKS_PER_OP_MAX:
            entry = acks[0]
            if entry[0] is not None:
                out.append(acks.pop(0))
                n += 1
                continue
            sseqs, dseqs = entry[1]
            k = ACKS_PER_OP_MAX - n
            if len(sseqs) <= k:
                out.append(acks.pop(0))
                n += len(sseqs)
            else:
                out.append((None, (sseqs[:k], dseqs[:k])))
                del sseqs[:k], dseqs[:k]
                n += k
        self._acks_n -= n
        return out

    async def _ack_loop(self) -> None:
        """Propose queued acks in batches, and stream purges as they happen.

        A batch whose proposal fails (a replicated consumer whose stream
        lost its lead or quorum) is dropped: its acks are not answered."""
        while True:
            if not self._acks and not self._first_seq:
                await self._acks_wake.wait()
            self._acks_wake = trio.Event()
            try:
                if self._first_seq:
                    first, self._first_seq = self._first_seq, 0
                    await self.propose(ConsumerStreamFirst(self.name, first))
                    if not self._first_seq:
                        self._first_applied.set()
                if self._acks:
                    await self._propose_acks(self._take_acks())
            except (RaftError, ConsumerGone) as exc:
                log.info("event=consumer_acks_dropped consumer=%s reason=%r", self.name, exc)
                self._first_applied.set()
            if not self._acks:
                self._acks_special = False
                self._acks_idle.set()

    async def _propose_acks(self, batch: list[tuple[AckItem | None, Any]]) -> None:
        now_ns = time.time_ns()
        i = 0
        while i < len(batch):  # plain runs as one op each, runs of the others
            if batch[i][0] is None:
                sseqs, dseqs = batch[i][1]
                i += 1
                while i < len(batch) and batch[i][0] is None:  # split runs: join
                    sseqs = sseqs + batch[i][1][0]
                    dseqs = dseqs + batch[i][1][1]
                    i += 1
                out = await self.propose(
                    ConsumerAcked(self.name, tuple(sseqs), tuple(dseqs), now_ns)
                )
                if self.retention is not None and out.acked:
                    await self.retention.after_acks(out.acked)
                continue
            j = i + 1
            while j < len(batch) and batch[j][0] is not None:
                j += 1
            run = batch[i:j]
            i = j
            items = tuple(e[0] for e in run if e[0] is not None)
            out = await self.propose(ConsumerAcks(self.name, items, now_ns))
            if self.retention is not None and out.acked:
                await self.retention.after_acks(out.acked)
            if any(e[1] is not None for e in run):  # a reply waits: durable first
                await self.flush()
            for e, res in zip(run, out.acks, strict=True):
                if e[1] is not None:
                    e[1](res)
