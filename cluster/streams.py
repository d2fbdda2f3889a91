"""Streams on one node: the trio shell around store + state machine + group.

Theory of operation: a ``Stream`` owns its store, its ``StreamStateMachine``
and a ``LocalGroup`` (R1; a ``RaftGroup`` later, behind the same ``propose``).
Messages captured for the stream are queued with ``offer`` (synchronous,
bounded, called while a session processes a chunk); the stream's task takes
everything queued, proposes it as one ``STREAM_MSG`` op (up to
``BATCH_MSGS_MAX`` publishes), and hands each result to the callback that
came with the message (the PubAck).  With the R1 ``LocalGroup`` the op object
itself is proposed and applied (``apply_op``); a ``RaftGroup`` will take
``encode_op(op)``.  The timestamp of every message is
taken here, by the proposer, and carried in the op (DESIGN rule 2).  The
group's sync makes the store durable before any result is delivered, so a
PubAck means "on disk" -- unless the user configured ``sync_interval`` (the
store's ``SyncPolicy.INTERVAL``): then batches are answered once applied and
the stream's task has the group sync the store every ``sync_interval_s``.
``Stream.snapshot`` holds new proposals back until those in flight are done,
so the state machine's snapshot is taken at one applied point.

Inline batches: a capturer that routes a whole received chunk before it
yields passes ``defer`` (the router's) to ``offer``; the stream then asks for
one ``drain`` call once the chunk is routed instead of waking its task.
``drain`` applies the queue as one batch right there when the group is idle
(``LocalGroup.start``): for a memory store (or interval mode) the PubAcks are
handed out before the chunk's replies are written, with no task switch; for
a file store the sync starts at once and the results are handed out when the
sync thread reports it done (through the run loop, no task of ours woken).  When the group is busy it wakes the task, as
without ``defer``.  Either way the same apply decides, one batch at a time,
and no result is handed out before the batch is durable.

Replicated streams (R2/R3) never wait for one batch before starting the next:
``drain`` (at the end of a chunk) and the task both *start* the queued
batches on the ``ReplicatedGroup`` (up to ``REPLICATED_BATCHES_INFLIGHT_MAX``
in flight) and the group's driver hands each batch's results out once it is
committed -- durable on a majority -- and applied here, in log order
(``_replicated_done``).  A publish thus costs no hand-over to the stream's
task on the way in or out, and under load several entries are replicated
while earlier ones wait for their majority.

The node's streams and their configs on disk: ``cluster.stream_registry``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from cluster import reroute
from cluster.local import LocalGroup
from cluster.model import StreamConfig
from cluster.ops import (
    DeleteMsg,
    Expire,
    Op,
    OpError,
    Purge,
    StreamMsg,
    StreamPolicy,
    UpdatePolicy,
    publish_trusted,
)
from cluster.stream_fsm import ApiErrorResult, ApplyOutcome, StreamStateMachine
from raft.errors import ApplyFailed, NoLeader, ProposalDropped, QueueFull, RaftError
from store.api import StreamState, StreamStore, SyncPolicy
from store.errors import StoreError
from store.memory import MemoryStreamStore

if TYPE_CHECKING:  # a standalone server never imports the Raft stack
    from cluster.replicated import ReplicatedGroup

log = logging.getLogger(__name__)

BATCH_MSGS_MAX = 4096
#: a replicated stream's batch (one Raft entry) holds at most this many bytes
#: (a single larger message still goes alone)
BATCH_BYTES_MAX = 1024 * 1024
EXPIRY_RETRY_S = 0.25
QUEUE_MSGS_MAX = 100_000
#: publish batches of a replicated stream in flight at once (each waits for its majority)
REPLICATED_BATCHES_INFLIGHT_MAX = 64
#: an R1 batch of one publish up to this payload may be synced inline (``cluster.local``)
LONE_PAYLOAD_BYTES_MAX = 16 * 1024


class NotCommitted:
    """The answer to a publish whose batch provably did not commit on a
    replicated stream (its entry was overwritten by a new leader, or this
    replica no longer led when it was submitted).  The PubAck sender turns it
    into the 503 no-responders status a publish gets from nats-server during an
    election, which clients already retry (nats-py: ``NoStreamResponseError``)
    -- unlike a JSON error, which they report as a failure."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_COMMITTED"


NOT_COMMITTED = NotCommitted()
#: ... sent this long after the drop is known: when the new leader captured the
#: same message too (both capture while subject interest moves over routes), its
#: PubAck reaches the client first and this late answer is ignored
NOT_COMMITTED_DELAY_S = 1.0
EXPIRY_RECHECK_S = 60.0
"""Longest sleep of the expiry task before it looks again (clock jumps)."""

#: makes a replicated stream's group: factory(fsm, store)
GroupFactory = Callable[[StreamStateMachine, StreamStore], "ReplicatedGroup"]
#: callback(result) for one captured message (``PubResult`` or ``ApiErrorResult``)
OnResult = Callable[[Any], None]
#: acks(replies, results): the PubAcks of captured publishes queued with their
#: reply subject instead of a callback (``Stream.offer_run``), one call per batch
ReplyAcks = Callable[[list[bytes], list[Any]], None]
#: a captured message waiting for its batch: subject, headers, payload, and its
#: callback, or the reply subject its result goes to (``Stream.reply_acks``), or None
Queued = tuple[str, bytes | None, bytes, OnResult | bytes | None]


def _publish_op(batch: list[Queued]) -> StreamMsg:
    """The op of a publish batch; its timestamp is read here, by the proposer."""
    now = time.time_ns()
    trusted = publish_trusted  # the parser checked subject and bytes
    return StreamMsg(tuple([trusted(s, h, p, now) for s, h, p, _ in batch]))


def policy_of(cfg: StreamConfig) -> StreamPolicy:
    """What the state machine needs of a config."""
    return StreamPolicy(
        name=cfg.name,
        limits=cfg.limits(),
        duplicate_window_ns=cfg.duplicate_window_ns,
        allow_rollup_hdrs=cfg.allow_rollup,
        sealed=cfg.sealed,
        deny_delete=cfg.deny_delete,
        deny_purge=cfg.deny_purge,
        allow_msg_ttl=cfg.allow_msg_ttl,
        subject_delete_marker_ttl_ns=max(0, cfg.subject_delete_marker_ttl_ns),
    )


class Stream:
    """One stream's shell.

    Args:
        cfg: the stream's configuration.
        store: its store (file or memory).
        created_ns: creation time (wall clock, ns).
    """

    def __init__(
        self,
        cfg: StreamConfig,
        store: StreamStore,
        created_ns: int,
        *,
        group_factory: GroupFactory | None = None,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.created_ns = created_ns
        self.fsm = StreamStateMachine(store, policy_of(cfg))
        self.group: Any
        #: None for R1; the replicated group of an R2/R3 stream
        self.replicated: ReplicatedGroup | None = None
        if group_factory is not None:
            self.group = self.replicated = group_factory(self.fsm, store)
            self.replicated.leader_listeners.append(self._leadership)
        else:
            # R1: the group applies op objects directly (no encode/decode round
            # trip); a memory store's sync costs nothing, so it needs no thread.
            self.group = LocalGroup(
                cfg.name,
                self.fsm,
                store.sync,
                apply=self.fsm.apply_op,
                sync_in_thread=not isinstance(store, MemoryStreamStore),
                sync_each_batch=store.sync_policy is not SyncPolicy.INTERVAL,
            )
        self.fsm.recover_from_store()  # dedupe ids and last msg id after a restart
        self._lead = trio.Event()  # set while this replica leads (always for R1)
        if self.replicated is None:
            self._lead.set()
        self._queue: list[Queued] = []
        self._wake = trio.Event()
        self._drain_due = False  # a ``drain`` call is deferred
        self._expiry_changed = trio.Event()
        self._expiry_armed = False  # the expiry task waits for a due time
        self.rejected = 0
        #: called with the ``ApplyOutcome`` of every op (consumers, advisories)
        self.listeners: list[Callable[[ApplyOutcome], None]] = []
        #: runs the answering of one batch of publishes (``Router.batched``: one
        #: write per client for the whole batch); None: called directly
        self.answer_batch: Callable[[Callable[[], None]], None] | None = None
        #: answers the publishes queued with a reply subject (``offer_run``)
        self.reply_acks: ReplyAcks | None = None
        # proposals in flight, and the event a snapshot holds them back with
        self._inflight = 0
        self._idle = trio.Event()
        self._held: trio.Event | None = None
        self._room = trio.Event()  # a replicated batch in flight was resolved
        #: replicated publish batches answered NOT_COMMITTED / left to the
        #: clients' timeout (outcome unknown)
        self.refused_batches = 0
        self.unanswered_batches = 0
        #: NOT_COMMITTED answers waiting for their time: (due, callbacks)
        self._late: list[tuple[float, list[OnResult | bytes]]] = []
        self._late_added = trio.Event()
        #: captured publishes with a msg id the old leader never appended (``cluster.reroute``)
        self._reroutes: list[list[Queued]] = []
        self._reroute_added = trio.Event()
        self.rerouted_msgs = 0

    @property
    def is_leader(self) -> bool:
        """Whether this replica leads the stream (always for R1)."""
        return self.replicated is None or self.replicated.is_leader

    def _leadership(self, lead: bool) -> None:
        if lead:
            self._lead.set()
        elif self._lead.is_set():
            self._lead = trio.Event()
            self._expiry_changed.set()

    def offer(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        on_result: OnResult | None,
        defer: Callable[[Callable[[], None]], None] | None = None,
    ) -> bool:
        """Queue a captured message; False when the queue is full (not stored).

        Args:
            defer: schedules a call for when the caller's batch of messages
                is routed (``Router.defer``); the stream then has ``drain``
                called once instead of waking its task.
        """
        if len(self._queue) >= QUEUE_MSGS_MAX:
            self.rejected += 1
            return False
        self._queue.append((subject, headers, payload, on_result))
        if defer is None:
            self._wake.set()
        elif not self._drain_due:
            self._drain_due = True
            defer(self.drain)
        return True

    def offer_run(
        self,
        subject: str,
        replies: list[bytes | None],
        payloads: list[bytes],
        acks: ReplyAcks | None,
        defer: Callable[[Callable[[], None]], None],
    ) -> int:
        """``offer`` for a run of header-less messages to one subject (a
        publisher's window, in one call): each is queued with its reply subject
        (None: no answer; every one without when ``acks`` is None), whose
        results ``acks`` gets per batch (``reply_acks``).  Returns how many were
        queued, from the first; the rest did not fit (not stored)."""
        queue = self._queue
        k = min(len(payloads), QUEUE_MSGS_MAX - len(queue))
        if k < len(payloads):
            self.rejected += len(payloads) - max(k, 0)
            if k <= 0:
                return 0
            replies, payloads = replies[:k], payloads[:k]
        if acks is None:
            queue.extend([(subject, None, p, None) for p in payloads])
        else:
            self.reply_acks = acks
            queue.extend([(subject, None, p, r) for r, p in zip(replies, payloads, strict=True)])
        if not self._drain_due:
            self._drain_due = True
            defer(self.drain)
        return k

    def _hand_out(self, batch: list[Queued], results: Sequence[Any]) -> None:
        """Give each publish of ``batch`` its result: its callback, or (queued
        with its reply subject) through ``reply_acks``, those of a stretch
        together; in order."""
        replies: list[bytes] = []
        rs: list[Any] = []
        for (_, _, _, cb), result in zip(batch, results, strict=True):
            if cb is None:
                continue
            if type(cb) is bytes:
                replies.append(cb)
                rs.append(result)
                continue
            if replies:
                self._ack_replies(replies, rs)
                replies, rs = [], []
            cb(result)  # type: ignore[operator]
        if replies:
            self._ack_replies(replies, rs)

    def _ack_replies(self, replies: list[bytes], results: list[Any]) -> None:
        acks = self.reply_acks
        assert acks is not None
        acks(replies, results)

    def _result_to(self, cb: OnResult | bytes, result: Any) -> None:
        """Give one publish its result (its callback or its reply subject)."""
        if type(cb) is bytes:
            self._ack_replies([cb], [result])
        else:
            cb(result)  # type: ignore[operator]

    def drain(self) -> None:
        """Apply the queued messages now, in the caller's task, if the group is idle.

        One batch (up to ``BATCH_MSGS_MAX``): without a sync thread (memory
        store, interval mode) its results are handed out before this returns;
        otherwise its sync is started and they are handed out once it is
        done (``_durable``, from the run loop).  Anything left over, or everything when the group is
        busy or a snapshot holds proposals back, is left to the task.  Never
        raises: a failed apply answers the batch with 503/10077.
        """
        self._drain_due = False
        if not self._queue:
            return
        if self.replicated is not None:
            self._start_replicated()
            return
        if self._held is not None or not self.group.idle:
            self.group.contended()
            self._wake.set()
            return
        batch = self._take_batch()
        op = _publish_op(batch)
        self._inflight += 1
        lone = len(batch) == 1 and len(batch[0][2]) <= LONE_PAYLOAD_BYTES_MAX
        p = self.group.start(op, partial(self._durable, op, batch), lone=lone)
        if p.done.is_set():
            self._settle(p.result, p.error, op, batch)
        if self._queue:
            self._wake.set()

    def _durable(self, op: StreamMsg, batch: list[Queued], p: Any) -> None:
        """A batch ``drain`` started is on disk (from the group's sync thread
        via the run loop): hand its results out, let the task take the rest."""
        self._settle(p.result, p.error, op, batch)
        if self._queue:
            self._wake.set()

    def _start_replicated(self) -> None:
        """Replicated stream: start the queued publishes as batches without waiting.

        Each batch is one proposal (the group's driver puts those of one cycle
        into one Raft entry), up to ``REPLICATED_BATCHES_INFLIGHT_MAX`` in
        flight; their results are handed out by ``_replicated_done``, in log
        order, from the driver once committed (durable on a majority) and
        applied here.  Publishes are proposed *leader only*: a replica that
        captured them as leader and has lost the lead since never forwards
        them (the new leader may have captured the same messages -- subject
        interest moves over routes while both capture -- and a forwarded copy
        was stored twice); those refused that carry a ``Nats-Msg-Id`` go to the
        new leader all the same (``_refused``, ``cluster.reroute``: the
        stream's dedupe keeps one copy).  What is left, or everything while a
        snapshot holds proposals back, is the task's.
        """
        rg = self.replicated
        assert rg is not None
        started = False
        while (
            self._queue and self._held is None and self._inflight < REPLICATED_BATCHES_INFLIGHT_MAX
        ):
            batch = self._take_batch()
            op = _publish_op(batch)
            self._inflight += 1
            try:
                rg.start(
                    op, partial(self._replicated_done, op, batch), leader_only=True, kick=False
                )
                started = True
            except (RaftError, ValueError) as exc:
                self._inflight -= 1
                if not self._inflight:
                    self._idle.set()
                if isinstance(exc, RaftError):  # refused at once: nothing appended
                    self._refused(exc, batch)
                else:
                    self._answer_failed(exc, batch)
        if started:
            # one cycle for what was started (one entry): at once when the
            # group's driver is parked (``RaftDriver.proposed``)
            rg.raft.proposed()
        if self._queue:
            self._wake.set()

    def _replicated_done(
        self,
        op: StreamMsg,
        batch: list[Queued],
        outcome: Any,
        error: BaseException | None,
        rerouted: bool = False,
    ) -> None:
        """A started batch of a replicated stream is resolved (in the driver's task)."""
        self._inflight -= 1
        if not self._inflight:
            self._idle.set()
        self._room.set()
        if error is not None:
            if isinstance(error, RaftError) and not isinstance(error, ApplyFailed):
                self._refused(error, batch, rerouted)
            else:
                self._answer_failed(error, batch)
            return
        self._answer(op, outcome, batch)

    def _answer(self, op: StreamMsg, outcome: Any, batch: list[Queued]) -> None:
        """Tell the listeners, then hand each publish of ``batch`` its result,
        as one batch (``answer_batch``)."""

        def answer() -> None:
            self._after(op, outcome)
            self._hand_out(batch, outcome.results)

        if self.answer_batch is None:
            answer()
        else:
            self.answer_batch(answer)

    def _refused(self, error: RaftError, batch: list[Queued], rerouted: bool = False) -> None:
        """A batch this replica's group did not commit: the publishes with a
        msg id that are provably in no log go to the new leader
        (``cluster.reroute``, once), the others to ``_not_committed``."""
        if not rerouted and reroute.reroutable(error):
            ids, batch = reroute.split(batch, self.cfg.duplicate_window_ns)
            if ids:
                self._reroutes.append(ids)
                self._reroute_added.set()
            if not batch:
                return
        self._not_committed(error, batch)

    def _not_committed(self, error: RaftError, batch: list[Queued]) -> None:
        """A batch that this proposal did not commit.

        Provably not in the log (refused because this replica no longer
        leads, or its entry overwritten by a new leader): every publish is
        answered ``NOT_COMMITTED`` (a 503 no-responders status), so its client
        retries at once instead of waiting for its timeout.  When the new leader captured the
        same message too, its PubAck was sent when that entry committed,
        before this replica could learn that its own entry lost; the answer
        is sent ``NOT_COMMITTED_DELAY_S`` late all the same (a refusal at
        submission is known at once), so that PubAck comes first and the
        client ignores this one.  A full queue is
        answered "stream is busy".  Outcome unknown (``maybe_committed``: an
        entry a snapshot covered, a proposal the group dropped when closing):
        left to the clients' timeout and retry (with ``Nats-Msg-Id`` the
        retry is deduplicated), as nats-server leaves them.
        """
        if isinstance(error, ProposalDropped) and error.maybe_committed:
            self.unanswered_batches += 1
            log.warning(
                "event=publish_not_committed stream=%s msgs=%d reason=%r",
                self.cfg.name,
                len(batch),
                error,
            )
            return
        self.refused_batches += 1
        cbs = [cb for _, _, _, cb in batch if cb is not None]
        if isinstance(error, QueueFull):
            busy = ApiErrorResult(503, 10077, "stream is busy")
            for cb in cbs:
                self._result_to(cb, busy)
            return
        if cbs:
            self._late.append((trio.current_time() + NOT_COMMITTED_DELAY_S, cbs))
            self._late_added.set()

    async def _late_answers(self) -> None:
        """Send the NOT_COMMITTED answers when they are due (``_not_committed``)."""
        while True:
            if not self._late:
                self._late_added = trio.Event()
                await self._late_added.wait()
                continue
            due, cbs = self._late[0]
            await trio.sleep_until(due)
            self._late.pop(0)
            for cb in cbs:
                self._result_to(cb, NOT_COMMITTED)

    async def _reroute_loop(self) -> None:
        """Forward the publishes ``_replicated_done`` set aside to the leader,
        once one is known (``cluster.reroute``)."""
        rg = self.replicated
        assert rg is not None
        while True:
            if not self._reroutes:
                self._reroute_added = trio.Event()
                await self._reroute_added.wait()
                continue
            with trio.move_on_after(reroute.WAIT_LEADER_S_MAX):
                await rg.raft.wait_leader()
                while self._held is not None:  # a snapshot is being taken
                    await self._held.wait()
            batches, self._reroutes = self._reroutes, []
            for batch in batches:
                if rg.raft.leader_id is None or self._held is not None:
                    self._not_committed(NoLeader("no leader known"), batch)
                    continue
                op = _publish_op(batch)
                done = partial(self._replicated_done, op, batch, rerouted=True)
                self._inflight += 1
                try:
                    rg.start(op, done)  # forwarded to the leader (or appended, if this leads)
                except (RaftError, ValueError) as exc:
                    done(None, exc)
                    continue
                self.rerouted_msgs += len(batch)

    def _take_batch(self) -> list[Queued]:
        n = min(len(self._queue), BATCH_MSGS_MAX)
        if self.replicated is not None:  # one Raft entry: bounded by bytes too
            size = 0
            for i in range(n):
                subject, headers, payload, _ = self._queue[i]
                size += len(subject) + len(payload) + (len(headers) if headers else 0) + 32
                if size > BATCH_BYTES_MAX and i > 0:
                    n = i
                    break
        if n == len(self._queue):
            batch, self._queue = self._queue, []
        else:
            batch = self._queue[:n]
            del self._queue[:n]
        return batch

    def _settle(
        self, outcome: Any, error: BaseException | None, op: StreamMsg, batch: list[Queued]
    ) -> None:
        """Hand out the results of a batch started by ``drain``."""
        self._inflight -= 1
        if not self._inflight:
            self._idle.set()
        if error is not None:
            self._answer_failed(error, batch)
            return
        self._answer(op, outcome, batch)

    def _answer_failed(self, exc: BaseException, batch: list[Queued]) -> None:
        """The store refused or failed: every publish of the batch hears it;
        the stream keeps running (nothing was acked)."""
        log.error("event=stream_apply_failed stream=%s", self.cfg.name, exc_info=exc)
        failed = ApiErrorResult(503, 10077, str(exc) or type(exc).__name__)
        for _, _, _, cb in batch:
            if cb is not None:
                self._result_to(cb, failed)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Drive the group, the publish batches and ``max_age`` expiry until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.group.run)
            nursery.start_soon(self._expire_loop)
            if self.replicated is not None:
                nursery.start_soon(self._late_answers)
                nursery.start_soon(self._reroute_loop)
            if not self.group.sync_each_batch:
                nursery.start_soon(self._sync_loop)
            task_status.started()
            while True:
                if not self._queue:
                    await self._wake.wait()
                self._wake = trio.Event()
                if not self._queue:
                    continue
                if self.replicated is not None:
                    await self._feed_replicated()
                    continue
                batch = self._take_batch()
                op = _publish_op(batch)
                try:
                    outcome = await self._propose(op)
                except (StoreError, OSError, OpError, OverflowError) as exc:
                    self._answer_failed(exc, batch)
                    continue
                except RaftError as exc:
                    # not committed here (leader change, no quorum): unanswered,
                    # as nats-server leaves them; clients retry with their msg id
                    log.warning(
                        "event=publish_not_committed stream=%s reason=%r", self.cfg.name, exc
                    )
                    continue
                self._hand_out(batch, outcome.results)

    async def _feed_replicated(self) -> None:
        """The task's share of a replicated stream's publishes: start what is
        queued, waiting while a snapshot holds proposals back or the in-flight
        bound is reached."""
        while self._held is not None:  # a snapshot is being taken
            await self._held.wait()
        self._start_replicated()
        if self._queue and self._held is None:  # the in-flight bound: wait for room
            self._room = trio.Event()
            await self._room.wait()

    async def _sync_loop(self) -> None:
        """Interval mode: the group syncs the store every ``sync_interval_s``."""
        while True:
            await trio.sleep(self.store.sync_interval_s)
            await self.group.sync()

    async def _propose(self, op: Op) -> ApplyOutcome:
        while self._held is not None:  # a snapshot is being taken
            await self._held.wait()
        self._inflight += 1
        try:
            outcome: ApplyOutcome = await self.group.propose(op)
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()
        self._after(op, outcome)
        return outcome

    def _after(self, op: Op, outcome: ApplyOutcome) -> None:
        """Tell the listeners, and the expiry task when the op may move the next expiry."""
        for listener in self.listeners:
            listener(outcome)
        if type(op) is not StreamMsg or self._publish_moves_expiry():
            self._expiry_changed.set()

    def _publish_moves_expiry(self) -> bool:
        """Whether stored publishes may bring the next expiry forward.

        When they cannot, the expiry task is not woken after a publish batch
        (one task switch less per batch): without ``max_age`` and message
        TTLs nothing expires, and with ``max_age`` alone a new message never
        expires before the oldest one the task already waits for.
        """
        if self.cfg.allow_msg_ttl:
            return True
        return self.cfg.max_age_ns > 0 and not self._expiry_armed

    async def _expire_loop(self) -> None:
        """Propose ``Expire`` whenever the oldest message reaches ``max_age``.

        The time is read here, by the proposer, and carried in the op.
        """
        while True:
            await self._lead.wait()  # the leader expires; the others apply its ops
            self._expiry_changed = trio.Event()
            due = self.store.next_expiry_ns()
            self._expiry_armed = due is not None
            if due is None:
                await self._expiry_changed.wait()
                continue
            delay_s = (due - time.time_ns()) / 1e9
            if delay_s > 0:
                with trio.move_on_after(min(delay_s, EXPIRY_RECHECK_S)):
                    await self._expiry_changed.wait()
                continue
            try:
                await self._propose(Expire(time.time_ns()))
            except RaftError as exc:
                log.info("event=expire_not_committed stream=%s reason=%r", self.cfg.name, exc)
                await trio.sleep(EXPIRY_RETRY_S)

    async def purge(self, filter: str | None, seq: int | None, keep: int | None) -> Any:
        """Purge through the group (deny_purge and sealed decided in apply)."""
        return (await self._propose(Purge(filter, seq, keep))).results[0]

    async def delete_msg(self, seq: int, *, erase: bool) -> Any:
        """Delete one message through the group (deny_delete and sealed decided in apply)."""
        return (await self._propose(DeleteMsg(seq, erase))).results[0]

    async def propose(self, op: Op) -> ApplyOutcome:
        """Propose ``op`` through the group (mirror and source feeds);
        listeners hear the outcome like any other."""
        return await self._propose(op)

    async def update(self, cfg: StreamConfig) -> Any:
        """Replace the config; the new policy goes through the group."""
        result = (await self._propose(UpdatePolicy(policy_of(cfg)))).results[0]
        self.cfg = cfg
        self.fsm.report_stored = cfg.republish is not None  # Stored effects to republish
        return result

    async def quiesce(self) -> None:
        """Stop proposing for good and wait until nothing is in flight (the
        stream is about to be regrouped: its store moves to a new ``Stream``).
        Publishes queued meanwhile are never proposed here (never answered:
        clients retry, with ``Nats-Msg-Id`` against duplicates)."""
        while self._held is not None:
            await self._held.wait()
        self._held = trio.Event()  # never set: the task is cancelled next
        while self._inflight:
            self._idle = trio.Event()
            await self._idle.wait()
        if not self.group.sync_each_batch:
            await self.group.sync()

    async def snapshot(self) -> tuple[bytes, StreamState]:
        """The state machine's snapshot document and the store's state, taken
        at one applied point.

        New proposals are held back and the ones in flight are awaited, so no
        batch is being applied or synced; then the document is written in one
        go, on this thread (the store has one owner).  Publishes keep being
        queued meanwhile and are proposed right after.

        Cancellation: nothing is taken; held proposals go on.
        """
        while self._held is not None:
            await self._held.wait()
        held = self._held = trio.Event()
        try:
            while self._inflight:
                self._idle = trio.Event()
                await self._idle.wait()
            return self.fsm.snapshot(), self.store.state()
        finally:
            self._held = None
            held.set()
