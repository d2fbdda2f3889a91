"""Deliveries sent ahead of their commit: ack-``none`` consumers of a replicated stream.

Theory of operation
-------------------
When is a replicated consumer's delivery sent, before or after its
``ConsumerDelivered`` is committed?  nats-server 2.15.1 answers per consumer
(``replicateDeliveries``): a consumer whose messages are acknowledged (ack
``explicit``/``all``, no flow control) holds each message until its
delivered state has a quorum, but keeps picking and proposing meanwhile (its
proposals are pipelined); an ack-``none`` or flow-control consumer sends at
once and proposes the delivered state afterwards.  Seen from outside, with
three nats-server processes: with both followers of the consumer's group
stopped (SIGSTOP), a fetch of an ack-``none`` consumer gets its message, one
of an explicit-ack pull consumer gets nothing (5 of 6 runs; once it got its
message, not understood) -- ``tests/compat/test_cluster_compat.py``.

trijet does the same for ack ``none``, and keeps commit-before-send for every
consumer that takes acks (flow control included: stricter than nats-server,
never weaker).  Why not send explicit-ack deliveries ahead as well: a client
may ack (and AckSync) a message whose delivery was never committed; after a
failover the new leader, which never saw that delivery, would have to take
or refuse an ack above its delivered sequence.  nats-server refuses such an
ack without touching its state (``processAckMsg``: "another leader must have
delivered a message with this sequence, we must not adjust the current
pointer"), which trijet's apply also does (an ack beyond the delivered
sequence is ignored and not answered), so no confirmed ack would be lost --
but the reference does not do it either, and commit-before-send keeps every
replica's pending list equal to what clients were handed.

An ack-``none`` consumer has nothing that can be confirmed: no pending list,
no acks, no redeliveries.  Its delivered state only says where to go on.  So
``AheadDeliveries`` (one per replicated consumer, used while its replica
leads and the consumer is ack ``none`` with no ``last_per_subject`` start
left) keeps the leader's *sent* position beside the committed one:

* ``take`` gives picked messages their ``Delivery`` at once -- consumer
  sequences continue from ``max(sent, committed)`` -- advances the sent
  position, and queues the stream sequences;
* ``run`` (the consumer's task) proposes the queue as ``ConsumerDelivered``
  ops, all that gathered while the previous one was in flight as one op, and
  after each commit lets retention (workqueue/interest) remove what was
  delivered -- only committed deliveries remove messages, on every replica
  alike, through the stream's log;
* the next pick starts at the sent position (``start``), so nothing is sent
  twice by one leader, and ``unapplied`` (sent, not yet applied) is taken
  off ``num_pending``.  It counts the sent stream sequences at or past the
  state machine's ``next_sseq``, so it drops the moment an apply moves the
  committed position, not when the proposer's task next runs: between the two,
  a count kept by the proposer would be taken off twice (``num_pending`` has
  already lost them), and a delivery's ack subject said ``pending 0`` with
  messages left -- a range reader stopped there.

Failover: a new leader starts from the committed position, so what the old
one sent and did not commit is sent again (at-least-once, as nats-server);
nothing is skipped, because the committed position only moves by committed
deliveries.  ConsumerInfo's ``delivered`` is the committed state, as
nats-server reports its store's on the leader.  If a purge moves the start
past messages sent ahead, apply skips them and the committed consumer
sequence stays below the sent one (the next leader goes on from the lower
one); within one leadership the sent sequences stay gapless.

A lead lost or gained (``reset``) drops the sent position.  A proposal that
fails is dropped (logged): its messages were sent; the next leader sends
them again.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING

import trio

from cluster.consumer_fsm import Delivery
from cluster.consumer_link import ConsumerGone
from cluster.ops import ConsumerDelivered
from raft.errors import RaftError
from store.api import StoredMsg

if TYPE_CHECKING:
    from cluster.consumers import Consumer

log = logging.getLogger(__name__)

__all__ = ["AHEAD_OP_SEQS_MAX", "AheadDeliveries"]

AHEAD_OP_SEQS_MAX = 4096
"""Most stream sequences one ``ConsumerDelivered`` of sent-ahead messages carries."""


class AheadDeliveries:
    """The sent-ahead deliveries of one replicated consumer (module doc).

    Args:
        consumer: its shell.
    """

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        #: next stream sequence after the last one sent (0: none sent)
        self.next_sseq = 0
        #: the last consumer sequence sent (0: none sent)
        self.dseq = 0
        #: stream sequences sent during this leadership, in order; those below
        #: the state machine's ``next_sseq`` are trimmed as ``unapplied`` looks
        self._sent: deque[int] = deque()
        self._queue: list[int] = []
        self._wake = trio.Event()

    @property
    def unapplied(self) -> int:
        """Sent during this leadership and not yet applied here."""
        nxt = self.consumer.fsm.next_sseq
        sent = self._sent
        while sent and sent[0] < nxt:
            sent.popleft()
        return len(sent)

    def usable(self) -> bool:
        """Deliveries of this consumer are sent ahead now."""
        c = self.consumer
        fsm = c.fsm
        return c.replicated and c.leading and fsm.policy.ack == "none" and not fsm.lss

    def start(self) -> int:
        """Where the next pick starts (after everything sent)."""
        return max(self.next_sseq, self.consumer.fsm.next_sseq)

    def last_sent(self) -> tuple[int, int]:
        """``(consumer seq, stream seq)`` of the last message sent, as the
        leader's idle heartbeats report it."""
        fsm = self.consumer.fsm
        return max(self.dseq, fsm.dseq), self.start() - 1

    def take(self, picked: list[StoredMsg]) -> list[tuple[StoredMsg, Delivery]]:
        """The ``Delivery`` of each picked message, queued for its proposal."""
        d = max(self.dseq, self.consumer.fsm.dseq)
        got = []
        for m in picked:
            d += 1
            got.append((m, Delivery(m.seq, d, 1)))
        self.dseq = d
        self.next_sseq = picked[-1].seq + 1
        seqs = [m.seq for m in picked]
        self._queue.extend(seqs)
        self._sent.extend(seqs)
        self._wake.set()
        return got

    def reset(self) -> None:
        """The lead changed: forget what was sent (the queue goes on: what it
        holds was sent and is still worth committing)."""
        self.next_sseq = self.dseq = 0
        self._sent.clear()

    async def run(self) -> None:
        """Propose the queued deliveries, one op per round (until cancelled)."""
        c = self.consumer
        while True:
            while not self._queue:
                await self._wake.wait()
                self._wake = trio.Event()
            batch = self._queue[:AHEAD_OP_SEQS_MAX]
            del self._queue[: len(batch)]
            try:
                out = await c.propose(ConsumerDelivered(c.name, tuple(batch), time.time_ns()))
            except (RaftError, ConsumerGone) as exc:
                # still counted as sent (``start`` stays past them): a later
                # committed delivery moves ``next_sseq`` beyond them
                log.info("event=consumer_ahead_delivery_failed consumer=%s reason=%r", c.name, exc)
                continue
            if c.retention is not None and out.deliveries:
                try:
                    await c.retention.after_deliveries([d.sseq for d in out.deliveries])
                except RaftError as exc:  # the next leader's sweep removes them
                    log.info("event=consumer_removal_failed consumer=%s reason=%r", c.name, exc)
