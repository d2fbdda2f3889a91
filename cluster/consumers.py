"""Consumers on one node: the trio shell around a consumer's state machine.

Theory of operation: a ``Consumer`` of an R1 stream owns its
``ConsumerStateMachine``, its ``ConsumerStore`` and a ``LocalGroup``; one of
a replicated stream proposes the same ops through the stream's Raft group
(see the end of this docstring).  Everything that changes the consumer is an op
proposed through the group, which applies it in memory and returns.  The
consumer's one task drives the group, the ack queue, the ack timers and the
state flusher.

Durability of a file consumer's state (group commit on a short delay, as
nats-server's consumer store writes its state ~10 ms after a change, in the
background):

* the creation (``ConsumerCreated``, with ``config.json``) and a config
  update are durable before they are answered;
* an ack that carries a reply subject (ack sync, ``AckAck``) is durable
  before its reply is sent (stronger than nats-server, which answers after
  the in-memory update);
* everything else -- deliveries, plain acks without a reply, naks, ack
  timeouts, purge floors -- is applied in memory and answered (or sent) at
  once; the flusher saves the state ``FLUSH_DELAY_S`` after the first
  change and writes it with one fdatasync in a worker thread.  So a change
  applied at *t* is on disk by *t* + (a write+fdatasync already running) +
  ``FLUSH_DELAY_S`` + (its own write+fdatasync), and a clean shutdown writes
  what is left.  After a crash (SIGKILL, power loss) the consumer restarts
  from its last flushed state: messages delivered in the last moments are
  delivered again (at-least-once, as with nats-server), and acks applied
  within the bound above may be lost (their messages redelivered).  Nothing
  *stored* is lost or duplicated: workqueue/interest removals are made in
  the stream's own group, durable there (a consumer restarting behind them
  finds those messages gone and skips them).

Memory consumers have nothing to flush.

* acks arrive synchronously from the router (``offer_ack``), are queued
  (bounded) and proposed in batches: runs of plain acks as one
  ``ConsumerAcked`` (sequence arrays), others as one ``ConsumerAcks``; each ack's
  callback then gets its ``AckOutcome`` (ack sync replies).
* timers are data: the task sleeps until ``fsm.next_due_ns()`` (or until
  something changes) and proposes ``ConsumerTimeouts(now)``.
* the stream's ``listeners`` tell it about new messages (``NewMessages``:
  wake the deliverer; no polling) and purges (``Purged``: propose
  ``ConsumerStreamFirst``).

Delivery itself (pull waiting lists, push subjects) is the node's business
(``node/jetstream/delivery.py``): it calls ``deliver(n, max_bytes)``, which
chooses messages (``select.next_messages``), proposes ``ConsumerDelivered``
and returns the messages with their ``Delivery`` values.  ``changed`` is an
event the deliverer waits on; it is set whenever delivery may proceed.
``outcome_listeners`` see every applied ``ConsumerOutcome`` (advisories).
On a workqueue or interest stream the consumer's ``retention``
(``cluster.retention``) is told about acks -- awaited before the acks are
answered, so an answered ack means the message is gone -- and, for ack
``none``, about deliveries.

Consumers of a replicated stream (``Consumer(..., link=StreamGroupLink)``)
take their state machine from the stream's ``ConsumerTable`` and propose
through the stream's Raft group (``cluster.consumer_table``): every replica
applies every op, so the state is in memory everywhere and nothing is
flushed.  Such a shell exists on every replica but works only while its
stream's replica leads (``leading``): the node runs its delivery and ack
subscription there, and the timer loop proposes only there.  On gaining the
lead ``take_lead`` proposes what a new leader owes the consumer -- the
stream's first sequence (a purge the old leader may not have passed on) and
``ConsumerTimeouts(ALL_DUE_NS)``, which queues every message still pending
for redelivery at once (as nats-server's new consumer leader does) -- and
delivery waits until that is applied (``ready``), so the new leader never
hands out a message before it has applied everything the old one committed.
A proposal that fails (leadership lost, no quorum) drops what it carried:
acks are then unanswered (an ack sync is answered only once committed),
deliveries are not sent.  Exception: an ack-``none`` consumer sends its
deliveries first and commits them afterwards (``cluster.consumer_ahead``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from itertools import islice
from operator import attrgetter
from typing import Any

import trio

from cluster.consumer_acks import AckQueue
from cluster.consumer_ahead import AheadDeliveries
from cluster.consumer_fsm import (
    ConsumerOutcome,
    ConsumerStateMachine,
    Delivery,
    count_pending,
    next_messages,
    policy_of,
    select_start,
)
from cluster.consumer_link import ALL_DUE_NS, PROPOSE_RETRY_S, ConsumerGone, StreamGroupLink
from cluster.consumer_model import ConsumerConfig
from cluster.local import LocalGroup
from cluster.ops import (
    AckItem,
    ConsumerAcked,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerOp,
    ConsumerPolicyUpdate,
    ConsumerStreamFirst,
    ConsumerTimeouts,
)
from cluster.retention import Retention
from cluster.stream_archive import ArchivedConsumer
from cluster.stream_fsm import ApplyOutcome, NewMessages, Purged
from cluster.streams import Stream
from raft.errors import RaftError
from store.api import ConsumerState, ConsumerStore, Pending, RawRun, StoredMsg
from store.errors import StoreClosed
from store.memory import MemoryConsumerStore

log = logging.getLogger(__name__)

_SEQ = attrgetter("seq")
"""A stored message's stream sequence."""

SETTLE_WAIT_S_MAX = 5.0
"""Longest an INFO waits for a purge to reach a consumer (a stuck one answers anyway)."""
PENDING_DELTA_MAX = 10_000
"""Beyond this many sequences moved, ``num_pending`` recounts instead."""
TIMER_RECHECK_S = 60.0
"""Longest sleep of the timer loop before it looks again (clock jumps)."""
FLUSH_DELAY_S = 0.010
"""A file consumer's state is written this long after its first unsaved change
(nats-server's consumer store waits 10 ms before writing)."""


class Consumer(AckQueue):
    """One consumer's shell.

    Args:
        stream: the stream it reads.
        name: the consumer's name.
        cfg: its config (defaults applied).
        store: where its state is kept.
        created_ns: creation time (wall clock, ns).
    """

    def __init__(
        self,
        stream: Stream,
        name: str,
        cfg: ConsumerConfig,
        store: ConsumerStore,
        created_ns: int,
        *,
        fsm: ConsumerStateMachine | None = None,
        link: StreamGroupLink | None = None,
        group_name: str = "",
    ) -> None:
        self.stream = stream
        self.name = name
        self.cfg = cfg
        self.store = store
        self.created_ns = created_ns
        #: in its replicated stream's group (``link``); else its own R1 group
        self.replicated = link is not None
        #: the Raft group name ConsumerInfo shows (replicated consumers)
        self.group_name = group_name
        # A memory consumer never outlives the process and nothing reads its
        # store back: its state is not built at all.  A file consumer's state
        # is built and encoded by ``flush`` (in the trio thread: Python work
        # in the worker thread would compete for the GIL with delivery),
        # once per flush rather than per op.
        self.durable = not isinstance(store, MemoryConsumerStore) and link is None
        self.fsm = fsm if fsm is not None else ConsumerStateMachine(name, store, save_each_op=False)
        #: recreated from an archive (``STREAM.RESTORE``): it goes on from the
        #: archived position instead of choosing a start from its config
        self.restored = False
        self.group: LocalGroup | StreamGroupLink
        if link is not None:
            self.group = link
        else:
            # R1: op objects are applied directly (no cbor round trip); the group
            # never syncs: results mean "applied", the flusher makes them durable
            self.group = LocalGroup(
                f"{stream.cfg.name}/{name}",
                self.fsm,
                _no_sync,
                apply=self.fsm.apply_op,
                sync_in_thread=False,
                sync_each_batch=False,
            )
        #: this replica works the consumer (always for R1; the stream's
        #: leader for a replicated one, see ``take_lead``)
        self.leading = link is None
        self._lead_changed = trio.Event()
        #: set once a new leader's catch-up ops are applied (delivery waits)
        self.ready = trio.Event()
        if link is None:
            self.ready.set()
        #: one flush (save + write + fdatasync) at a time
        self._flush_lock = trio.Lock()
        #: set when an applied op left the state unflushed (file consumers)
        self._flush_wanted = trio.Event()
        #: flushes done (status, tests)
        self.flushes = 0
        #: num_pending as of the last ``deliver``'s pick, less what it picked
        #: (``send`` puts it in the ack subjects)
        self.pending_after_pick = 0
        #: set by the registry when the consumer (and its files) goes away:
        #: nothing is written at exit then
        self.removed = False
        #: queued acks in arrival order: (item, callback) for one ack, or
        #: (None, (sseqs, dseqs)) for a run of plain acks (no callbacks)
        self._acks: list[tuple[AckItem | None, Any]] = []
        #: acks queued (a plain run counts each of its acks)
        self._acks_n = 0
        self._acks_wake = trio.Event()
        #: set while no ack waits to be applied (``deliver`` waits for it)
        self._acks_idle = trio.Event()
        self._acks_idle.set()
        # an ack other than a plain +ACK (NAK, TERM, in-progress) was queued
        # since the ack loop was last idle: deliveries wait for it
        self._acks_special = False
        self._timer_changed = trio.Event()
        #: the ack deadline the timer loop sleeps until (None: no deadline)
        self._timer_due: int | None = None
        self.changed = trio.Event()
        self.outcome_listeners: list[Callable[[ConsumerOutcome], None]] = []
        self.closed = False
        #: (next_sseq, last_seq, live msgs, count) of the last ``num_pending``
        self._pending_cache: tuple[int, int, int, int] | None = None
        self._first_seq = 0  # a purge to tell the state machine about
        #: set while no purge waits to reach the state machine (INFO waits on it)
        self._first_applied = trio.Event()
        self._first_applied.set()
        #: workqueue/interest streams: removes what nobody needs any more
        self.retention: Retention | None = None
        #: deliveries applied but not yet handed to ``send`` (``settled``)
        self.delivering = 0
        self._settled = trio.Event()
        self._settled.set()
        #: ack-none deliveries sent ahead of their commit (``cluster.consumer_ahead``)
        self.ahead = AheadDeliveries(self)

    # -- lifecycle ----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the group, announce the config (durably), then serve acks,
        timers and flushes; at exit the state still unflushed is written."""
        if self.replicated:
            await self._run_replicated(task_status)
            return
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.group.run)
                if self.restored:  # as nats-server: on from the archived delivered seq
                    start, lss = self.fsm.next_sseq, ()
                else:
                    start, lss = await trio.to_thread.run_sync(
                        select_start, self.cfg, self.stream.store
                    )
                await self.propose(ConsumerCreated(self.name, policy_of(self.cfg), start, lss))
                await self.flush()
                self.stream.listeners.append(self._on_stream)
                nursery.start_soon(self._timer_loop)
                if self.durable:
                    nursery.start_soon(self._flush_loop)
                task_status.started()
                try:
                    await self._ack_loop()
                finally:
                    self.closed = True
                    self._acks_idle.set()
                    if self._on_stream in self.stream.listeners:
                        self.stream.listeners.remove(self._on_stream)
                    self.changed.set()
        finally:
            self._flush_at_exit()

    async def _run_replicated(self, task_status: trio.TaskStatus[None]) -> None:
        """A replicated consumer's task: created by its assign (nothing to
        announce, nothing to flush); acks and timers while it leads."""
        async with trio.open_nursery() as nursery:
            self.stream.listeners.append(self._on_stream)
            nursery.start_soon(self._timer_loop)
            nursery.start_soon(self.ahead.run)
            task_status.started()
            try:
                await self._ack_loop()
            finally:
                self.closed = True
                self._acks_idle.set()
                self.ready.set()
                if self._on_stream in self.stream.listeners:
                    self.stream.listeners.remove(self._on_stream)
                self.changed.set()

    def set_leading(self, lead: bool) -> None:
        """This replica gained or lost its stream's lead (the node calls it)."""
        if lead == self.leading:
            return
        self.leading = lead
        self.ahead.reset()
        if not lead:
            self.ready = trio.Event()
        ev, self._lead_changed = self._lead_changed, trio.Event()
        ev.set()
        self._timer_changed.set()
        self.changed.set()

    async def take_lead(self) -> bool:
        """Propose what a new leader owes the consumer (module doc), then
        set ``ready``; False when that could not be committed (the lead was
        lost again: a later gain tries again)."""
        first = self.stream.store.state().first_seq
        try:
            if first > 1 and (
                self.fsm.next_sseq < first or any(s < first for s in self.fsm.pending)
            ):
                await self.propose(ConsumerStreamFirst(self.name, first))
            await self.propose(ConsumerTimeouts(self.name, ALL_DUE_NS))
        except (RaftError, ConsumerGone) as exc:
            log.info("event=consumer_take_lead_failed consumer=%s reason=%r", self.name, exc)
            return False
        if self.leading:
            self.ready.set()
            self.changed.set()
        return self.leading

    def _on_stream(self, outcome: ApplyOutcome) -> None:
        for effect in outcome.effects:
            if isinstance(effect, NewMessages):
                self._wake()
            elif isinstance(effect, Purged):
                self._first_seq = max(self._first_seq, effect.first_seq)
                if self._first_applied.is_set():
                    self._first_applied = trio.Event()
                self._acks_wake.set()

    def _wake(self) -> None:
        self.changed.set()

    async def propose(self, op: ConsumerOp) -> ConsumerOutcome:
        """Apply ``op`` through the group (in memory: ``flush`` makes it
        durable; the flusher is told) and tell listeners."""
        out: ConsumerOutcome = await self.group.propose(op)
        if self.durable:
            self._flush_wanted.set()
        for listener in self.outcome_listeners:
            listener(out)
        if out.wake:
            self._wake()
        if self._timer_may_change(op):
            self._timer_changed.set()
        return out

    def _timer_may_change(self, op: ConsumerOp) -> bool:
        """Could ``op`` have made an ack deadline earlier than the one the timer
        loop sleeps until?  Plain acks only remove deadlines; new deliveries
        add ``now + ack_wait``, never earlier than an existing one, unless
        ``backoff`` varies the wait."""
        if isinstance(op, ConsumerAcked):
            return False
        if isinstance(op, ConsumerDelivered):
            return self._timer_due is None or bool(self.fsm.policy.backoff_ns)
        return True

    async def update(self, cfg: ConsumerConfig) -> None:
        """Take a changed config (``check_update`` already passed); durable on return."""
        self.cfg = cfg
        await self.propose(ConsumerPolicyUpdate(self.name, policy_of(cfg)))
        await self.flush()

    def archived(self) -> ArchivedConsumer:
        """This consumer as a stream snapshot carries it (``STREAM.SNAPSHOT``).

        The state is the one applied so far, with one change that follows
        what nats-server's snapshots hold: the ack timer of a message
        already redelivered starts at its *first* delivery there, so after
        a restore its ack wait has run out and it is redelivered at once.
        trijet keeps only the last delivery's time, so such a message is
        archived as due at its last delivery (``ts - wait``).
        """
        fsm = self.fsm
        st = fsm.state()
        pending = st.pending
        if st.redelivered:
            pending = dict(pending)
            for sseq, n in st.redelivered.items():
                p = pending.get(sseq)
                if p is not None and n > 0:
                    wait = fsm.deadline_ns(sseq) - p.ts_ns
                    pending[sseq] = Pending(p.consumer_seq, p.ts_ns - wait)
        state = ConsumerState(
            delivered_consumer_seq=st.delivered_consumer_seq,
            delivered_stream_seq=st.delivered_stream_seq,
            ack_floor_consumer_seq=st.ack_floor_consumer_seq,
            ack_floor_stream_seq=st.ack_floor_stream_seq,
            pending=pending,
            redelivered=st.redelivered,
        )
        return ArchivedConsumer(self.name, self.cfg, self.created_ns, state)

    # -- durability -----------------------------------------------------------------

    async def flush(self) -> None:
        """Make every op applied so far durable (file consumers; a memory
        consumer returns at once).

        The state is built and encoded here, in the trio thread; the write
        and fdatasync run in a worker thread.  Ops applied meanwhile are left
        for the next flush.

        Raises:
            OSError: the write or the fdatasync failed (the state stays
                unsaved, so the next flush retries it).
        """
        if not self.durable:
            return
        async with self._flush_lock:
            self.fsm.flush()
            await trio.to_thread.run_sync(self.store.sync)
            self.flushes += 1

    async def _flush_loop(self) -> None:
        """Flush ``FLUSH_DELAY_S`` after the first unflushed change (group commit)."""
        while True:
            await self._flush_wanted.wait()
            await trio.sleep(FLUSH_DELAY_S)
            self._flush_wanted = trio.Event()
            try:
                await self.flush()
            except OSError:
                log.exception(
                    "event=consumer_flush_failed stream=%s consumer=%s",
                    self.stream.cfg.name,
                    self.name,
                )
                self._flush_wanted.set()
                await trio.sleep(1.0)  # do not spin on a failing disk

    def _flush_at_exit(self) -> None:
        """Write what is left when the task ends (shutdown), unless the
        consumer was removed; blocking, but the group and its tasks are gone."""
        if not self.durable or self.removed:
            return
        try:
            self.fsm.flush()
            self.store.sync()
        except (OSError, StoreClosed):
            log.exception(
                "event=consumer_final_flush_failed stream=%s consumer=%s",
                self.stream.cfg.name,
                self.name,
            )

    # -- timers ---------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        while True:
            while not self.leading:
                await self._lead_changed.wait()
            self._timer_changed = trio.Event()
            due = self._timer_due = self.fsm.next_due_ns()
            if due is None:
                await self._timer_changed.wait()
                continue
            delay_s = (due - time.time_ns()) / 1e9
            if delay_s > 0:
                with trio.move_on_after(min(delay_s, TIMER_RECHECK_S)):
                    await self._timer_changed.wait()
                continue
            try:
                await self.propose(ConsumerTimeouts(self.name, time.time_ns()))
            except (RaftError, ConsumerGone) as exc:
                log.info("event=consumer_timeouts_failed consumer=%s reason=%r", self.name, exc)
                await trio.sleep(PROPOSE_RETRY_S)

    # -- delivery -------------------------------------------------------------------

    def has_messages(self) -> bool:
        """Something is deliverable now (a redelivery, or a new message under
        ``max_ack_pending``)."""
        if self.fsm.redeliveries():
            return True
        if self.fsm.at_max_ack_pending():
            return False
        return self.num_pending() - self.ahead.unapplied > 0

    def num_pending(self) -> int:
        """Matching messages not yet delivered (ConsumerInfo ``num_pending``).

        Kept up to date incrementally: when the stream only grew (every new
        sequence stored, nothing removed) and the consumer only moved on, the
        new messages are added and the ones passed are taken off -- a walk
        over just those; anything else (removals, purges, skips) recounts.
        """
        nxt = self.fsm.next_sseq
        st = self.stream.store.state()
        last, msgs = st.last_seq, st.msgs
        if not st.num_deleted and not self.fsm.policy.filters and not self.fsm.lss:
            return max(0, last - max(nxt, st.first_seq) + 1) if msgs else 0
        cached = self._pending_cache
        if cached is not None:
            c_nxt, c_last, c_msgs, c_n = cached
            if (c_nxt, c_last, c_msgs) == (nxt, last, msgs):
                return c_n
            if (
                nxt >= c_nxt
                and last >= c_last
                and msgs - c_msgs == last - c_last
                and (nxt - c_nxt) + (last - c_last) <= PENDING_DELTA_MAX
            ):
                store = self.stream.store
                filters = self._filters()
                n = c_n + store.count_in_range(filters, c_last + 1, last)
                n -= store.count_in_range(filters, c_nxt, nxt - 1)
                self._pending_cache = (nxt, last, msgs, n)
                return n
        n = count_pending(self.stream.store, self.fsm.policy.filters, nxt)
        if self.fsm.lss:  # last_per_subject start: recount until it is done
            self._pending_cache = None
            return n + len([s for s in self.fsm.lss if s < nxt])
        self._pending_cache = (nxt, last, msgs, n)
        return n

    def _filters(self) -> str | tuple[str, ...]:
        filters = self.fsm.policy.filters
        if not filters:
            return ">"
        return filters[0] if len(filters) == 1 else filters

    def peek(self) -> StoredMsg | None:
        """The message ``deliver(1)`` would hand out now (None if nothing)."""
        start = self.ahead.start() if self.ahead.usable() else 0
        return next(iter(next_messages(self.fsm, self.stream.store, 1, start)), None)

    async def deliver(
        self,
        n: int,
        max_bytes: int = 0,
        *,
        budget_bytes: int = -1,
        size_of: Callable[[StoredMsg], int] | None = None,
        send: Callable[[list[tuple[StoredMsg, Delivery]]], None] | None = None,
        take: Callable[[StoredMsg], bool] | None = None,
    ) -> tuple[list[tuple[StoredMsg, Delivery]], bool]:
        """Hand out up to ``n`` messages (``max_bytes`` > 0 bounds their size).

        Args:
            n: most messages to hand out.
            max_bytes: > 0: their total size may not exceed it (pull).
            budget_bytes: >= 0: stop before a message once the sizes picked
                so far exceed it (push flow control: the window may be
                overshot by the last message, as nats-server does).
            size_of: how ``budget_bytes`` measures a message (default:
                subject + headers + payload).
            send: called (synchronously) with the deliveries as soon as
                they are applied; until then ``settled()`` waits, so a
                ConsumerInfo never counts a message as delivered before it
                was handed to its subscriber (nats-server does both under
                one lock).
            take: asked about each candidate in order (instead of
                ``max_bytes``): True takes it, False ends the pick (pull
                requests served in turn, ``node.jetstream.pullturns``).

        Returns:
            ``(deliveries, too_big)``: the messages with their ``Delivery``
            (consumer seq, delivery count), and whether the first candidate
            alone exceeded ``max_bytes`` (nothing delivered then).
        """
        if not await self._round_ready():
            return [], False
        ahead = self.ahead.usable()
        start = self.ahead.start() if ahead else 0
        picked: list[StoredMsg] = []
        too_big = False
        if take is not None:
            for m in next_messages(self.fsm, self.stream.store, n, start):
                if not take(m):
                    break
                picked.append(m)
                if len(picked) >= n:
                    break
        elif max_bytes <= 0 and budget_bytes < 0:  # no size bounds: take n
            picked = list(islice(next_messages(self.fsm, self.stream.store, n, start), n))
        else:
            size = 0
            budget_used = 0
            for m in next_messages(self.fsm, self.stream.store, n, start):
                msize = len(m.subject) + len(m.headers) + len(m.payload)
                if max_bytes > 0 and size + msize > max_bytes:
                    too_big = not picked
                    break
                if budget_bytes >= 0:
                    if budget_used > budget_bytes:
                        break
                    budget_used += size_of(m) if size_of is not None else msize
                picked.append(m)
                size += msize
                if len(picked) >= n:
                    break
        if not picked:
            return [], too_big
        # what the stream holds for this consumer beyond the picked messages,
        # as of the pick (nats-server counts it under the locks it picks
        # with): a message stored while the delivery is applied is not counted
        # in the ack subjects' pending of this batch
        seqs = tuple(map(_SEQ, picked))
        self.pending_after_pick = self.num_pending() - sum(map(self.fsm.next_sseq.__le__, seqs))
        if ahead:  # ack none: sent now, committed by ``ahead.run``
            self.pending_after_pick = max(0, self.pending_after_pick - self.ahead.unapplied)
            got = self.ahead.take(picked)
            if send is not None:
                send(got)
            return got, False
        sent: list[tuple[StoredMsg, Delivery]] = []

        def taken(ds: Sequence[Delivery]) -> None:
            nonlocal sent
            if len(ds) == len(picked):  # all taken, in order
                sent = list(zip(picked, ds, strict=True))
            else:
                by_seq = {m.seq: m for m in picked}
                sent = [(by_seq[d.sseq], d) for d in ds]
            if send is not None and sent:
                send(sent)

        await self._record(seqs, taken)
        return sent, False

    async def _round_ready(self) -> bool:
        """Wait until a round may be picked; False when this replica no longer
        leads or the consumer closed meanwhile.

        Acks that change what is picked -- a -NAK, TERM or in-progress, then
        the next pull request on the same connection; plain acks when the
        consumer is at max_ack_pending -- are applied first, as nats-server
        applies them on receipt.  Plain acks otherwise change nothing the
        pick reads: their proposals go on alongside this delivery's (one
        Raft round for both, not two in a row).  A new leader's catch-up
        comes first too.
        """
        while not self._acks_idle.is_set() and (
            self._acks_special or self.fsm.at_max_ack_pending()
        ):
            await self._acks_idle.wait()
        if not self.ready.is_set():
            await self.ready.wait()
        return self.leading and not self.closed

    async def _record(
        self, seqs: tuple[int, ...], taken: Callable[[Sequence[Delivery]], None]
    ) -> None:
        """Record the delivery of ``seqs`` through the consumer's group and
        call ``taken`` with the deliveries it applied, before ``settled()``
        lets a ConsumerInfo count them; then, for ack none under a retention
        policy, remove what was delivered.  Not committed: ``taken`` is not
        called (a new leader redelivers whatever did commit)."""
        if not self.delivering:
            self._settled = trio.Event()
        self.delivering += 1
        try:
            try:
                out = await self.propose(ConsumerDelivered(self.name, seqs, time.time_ns()))
            except (RaftError, ConsumerGone) as exc:
                log.info("event=consumer_delivery_failed consumer=%s reason=%r", self.name, exc)
                self.changed.set()  # the dispatcher looks again (if this replica still leads)
                return
            taken(out.deliveries)
        finally:
            self.delivering -= 1
            if not self.delivering:
                self._settled.set()
        if self.retention is not None and self.fsm.policy.ack == "none" and out.deliveries:
            try:
                await self.retention.after_deliveries([d.sseq for d in out.deliveries])
            except RaftError as exc:  # the next leader's sweep removes them
                log.info("event=consumer_removal_failed consumer=%s reason=%r", self.name, exc)

    def raw_ready(self) -> bool:
        """A pull round may be read raw (``deliver_raw``): ack none, not sent
        ahead, nothing to redeliver, no ``last_per_subject`` start, no filter
        -- the round is then simply the stream's next live messages -- and
        a store that reads raw runs natively (``StreamStore.raw_runs``)."""
        fsm = self.fsm
        filters = fsm.policy.filters
        return (
            fsm.policy.ack == "none"
            and not fsm.rdq
            and not fsm.lss
            and (not filters or filters == (">",))
            and not self.ahead.usable()
            and self.stream.store.raw_runs
        )

    async def deliver_raw(
        self, n: int, send: Callable[[RawRun, list[Delivery]], None]
    ) -> int | None:
        """``deliver(n, send=...)`` of a round that ``raw_ready`` allows, read
        as a ``RawRun`` (``StreamStore.load_raw_run``: no ``StoredMsg`` per
        message); ``send`` gets the run and its deliveries, one per message,
        in order.  Returns how many were delivered, or None when the round
        is not one ``raw_ready`` allows once the waits are over (the caller
        then uses ``deliver``).
        """
        if not await self._round_ready():
            return 0
        if not self.raw_ready():
            return None
        rr = self.stream.store.load_raw_run(self.fsm.next_sseq, n)
        if not rr:
            return 0
        seqs = tuple(rr.seqs)
        # every picked sequence is >= next_sseq (as ``deliver`` counts them)
        self.pending_after_pick = self.num_pending() - len(seqs)
        count = 0

        def taken(ds: Sequence[Delivery]) -> None:
            nonlocal rr, count
            if len(ds) != len(seqs):  # not all taken: the run of those that were
                keep = {d.sseq for d in ds}
                rr = RawRun.of([m for m in rr.stored() if m.seq in keep])
                by_seq = {d.sseq: d for d in ds}
                ds = [by_seq[q] for q in rr.seqs]
            count = len(ds)
            if ds:
                send(rr, list(ds))

        await self._record(seqs, taken)
        return count

    async def settled(self) -> None:
        """Return once no delivery sits between its apply and its ``send``, the
        acks received so far are applied, and a stream purge already applied
        has reached this consumer's state (so an answer never shows the
        consumer behind acks sent before the request or a purge it followed)."""
        with trio.move_on_after(SETTLE_WAIT_S_MAX):
            while not self.closed and self.leading and not self.ready.is_set():
                await self.ready.wait()
            while not self.closed and not self._first_applied.is_set():
                await self._first_applied.wait()
            while not self.closed and not self._acks_idle.is_set():
                await self._acks_idle.wait()
        while self.delivering:
            await self._settled.wait()


def _no_sync() -> None:
    """The consumer groups' sync: they never sync (``Consumer.flush`` does)."""
