"""``LocalGroup``: the R1 stand-in for a Raft group, with the same ``propose`` API.

Theory of operation: a single-replica stream needs no consensus, only the
same decide-in-apply state machine and the same durability promise.  Callers
``await propose(entry)``; a driver takes every proposal that piled up, applies
them to the state machine in order, makes the state machine's store durable
once for the whole batch (``sync`` in the group's own sync thread: group
commit), and only then resolves the waiting proposals.  One batch is in
progress at a time, and its driver is the state machine's owner for that
batch: the proposer itself when the group is idle (no hand-over to another
task: the shortest path for one publish at a time), else the ``run`` task,
which takes what piled up while a batch was in progress.  So a
caller that got a result knows its entry is applied *and* on disk, exactly as
with ``RaftGroup`` (where the fsync is the journal's).  Proposals beyond
``pending_max`` are refused with ``QueueFull``.  While a batch syncs, new
proposals pile up and become the next batch.

Entries are whatever ``apply`` takes: encoded ops with the default
``fsm.apply``, or (an R1 owner's shortcut) op objects with ``fsm.apply_op`` —
the same apply code without an encode/decode round trip.

Sync thread: ``trio.to_thread.run_sync`` costs ~250 us per call on the
reference machine (thread cache hand-over plus the ``run_sync_soon`` wake-up);
a group with a sync that blocks keeps one dedicated thread instead, which
signals completion through a socket pair the driver waits on (~100 us).  A
store whose sync costs nothing (memory) passes ``sync_in_thread=False``.

Interval mode (``sync_each_batch=False``, the user's ``sync_interval``):
batches are applied and answered without a sync; ``sync()`` (the stream's
timer) asks the ``run`` task to sync between batches, so the store still has
one owner at a time and everything applied before the request is durable
when it returns.  A result then means "applied", not "on disk".

Started batches (``start``): an owner that has an entry in hand while the
group is ``idle`` (the stream's capture at the end of a received chunk)
applies it at once in its own task, without awaiting; when the batch needs a
sync in the thread, that sync starts at once too and the thread hands the
completion to the trio run loop (``run_sync_soon``), which calls the owner's
``on_durable`` -- one scheduling pass from the fsync's end to the result.
Without a sync thread (memory store, interval mode) the result is final on
return.  Either way the
batch is an ordinary batch: ``_busy`` until it is durable, proposals arriving
meanwhile pile up for the next one.

Inline syncs (``start(..., lone=True)``): a batch of one small publish while
nobody else is publishing to the group -- a sync publisher, one publish
outstanding -- is synced in the caller's task, on the event loop, as
nats-server at ``sync_interval: always`` fsyncs in the publishing goroutine.
The hand-over to the sync thread and back costs more than the fsync itself
(two more wake-ups of each thread, GIL hand-overs: ~100-130 us of CPU per
publish measured, the fsync ~35), and the loop would only sleep meanwhile.
Group commit is what the thread buys, so the inline path is taken only after
``QUIET_BATCHES_MIN`` threaded batches in a row during which no other
proposal arrived (``_quiet``), and every ``INLINE_PROBE_EVERY``-th candidate
still goes through the thread to look again; a proposal waiting behind a
busy group (``contended``) sends the group back to the thread at once.  An
inline sync that took longer than ``INLINE_SYNC_S_MAX`` (a slow or busy disk:
the whole loop waited) doubles the quiet streak required, up to
``QUIET_BATCHES_MAX``; a fast one resets it.

Cancellation: a cancelled ``propose`` may still be applied and synced; its
result is dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from raft.errors import InvariantViolation, QueueFull
from raft.fsm import StateMachine
from raft.syncer import SyncThread

log = logging.getLogger(__name__)

QUIET_BATCHES_MIN = 8
"""Threaded batches in a row with no other proposal arriving before lone ones sync inline."""
QUIET_BATCHES_MAX = 4096
"""Bound on the quiet streak required after slow inline syncs."""
INLINE_PROBE_EVERY = 16
"""Every n-th inline candidate goes through the thread (is anybody else publishing?)."""
INLINE_SYNC_S_MAX = 0.0005
"""An inline sync slower than this (the event loop waited) makes inline syncs rarer."""

_clock = time.perf_counter  # times inline syncs (a test replaces it)


class _Pending:
    __slots__ = ("done", "entry", "error", "result")

    def __init__(self, entry: Any) -> None:
        self.entry = entry
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class LocalGroup:
    """A one-member "group" applying proposals directly, durably, in batches.

    Args:
        group_id: name, for logs and status.
        fsm: the state machine (``apply(entry) -> result``).
        sync: makes everything applied so far durable (blocking; run in a thread).
        pending_max: bound on proposals waiting for the driver.
        sync_in_thread: run ``sync`` in the group's sync thread (off: in the
            driver task, for a sync that costs nothing, and in tests).
        apply: applies one entry (default ``fsm.apply``, which takes bytes).
        sync_each_batch: sync before resolving each batch (default); off:
            only when ``sync()`` asks (interval mode).
    """

    def __init__(
        self,
        group_id: str,
        fsm: StateMachine,
        sync: Callable[[], None],
        *,
        pending_max: int = 20_000,
        sync_in_thread: bool = True,
        apply: Callable[[Any], Any] | None = None,
        sync_each_batch: bool = True,
    ) -> None:
        self.group_id = group_id
        self.fsm = fsm
        self._apply = apply if apply is not None else fsm.apply
        self._sync = sync
        self.pending_max = pending_max
        self.sync_in_thread = sync_in_thread
        self._pending: list[_Pending] = []
        self._wake = trio.Event()
        self._running = False
        self._busy = False
        self._syncer: SyncThread | None = None
        self.applied = 0
        self.batches = 0
        self.sync_each_batch = sync_each_batch
        self.syncs = 0
        self._sync_requested = False
        self._sync_done = trio.Event()
        self._sync_error: BaseException | None = None
        # inline syncs (see the module doc)
        self._quiet = 0
        self._quiet_min = QUIET_BATCHES_MIN
        self._candidates = 0
        self.inline_syncs = 0

    is_leader = True

    @property
    def leader_id(self) -> str:
        return "local"

    async def propose(self, entry: Any) -> Any:
        """Apply ``entry`` and return the state machine's result once durable.

        When no batch is in progress the caller's own task applies and syncs
        the batch (everything pending, its entry included); otherwise the
        entry joins the next batch of whoever drives.

        Raises:
            QueueFull: more than ``pending_max`` proposals are waiting.
            Exception: whatever ``apply`` raised for this entry (an invariant
                failure; client errors are results, not exceptions).

        Cancellation: the entry may still be applied and synced.
        """
        if len(self._pending) >= self.pending_max:
            raise QueueFull(f"{self.group_id}: {len(self._pending)} proposals waiting")
        p = _Pending(entry)
        self._pending.append(p)
        if self._busy:
            self._quiet = 0
        if self._running and not self._busy:
            await self._drive_one()
        else:
            self._wake.set()
        if not p.done.is_set():
            await p.done.wait()
        if p.error is not None:
            raise p.error
        return p.result

    @property
    def idle(self) -> bool:
        """Running, no batch in progress, nothing waiting: ``start`` may apply now."""
        return self._running and not self._busy and not self._pending and not self._sync_requested

    def contended(self) -> None:
        """A proposer found the group busy: others publish too (no inline syncs for now)."""
        self._quiet = 0

    def start(
        self, entry: Any, on_durable: Callable[[_Pending], None], *, lone: bool = False
    ) -> _Pending:
        """Apply ``entry`` now, in the caller's task, as a batch of its own.

        Only while ``idle``.  Returns the proposal, resolved (``done`` set,
        ``result`` or ``error``) when the batch needs no sync in the thread.
        Otherwise its sync is running and ``on_durable(p)`` is called once it
        is done (the sync's error, if any, in ``p.error``), from the trio
        thread's run loop (``run_sync_soon``: no task of ours needs to wake to
        see it); the group is busy until then.  ``on_durable`` must not raise
        (what it raises is logged).  ``lone``: the entry is one small publish,
        which may be synced inline instead (module doc: inline syncs).

        Raises:
            InvariantViolation: the group is not idle.
        """
        if not self.idle:
            raise InvariantViolation(f"{self.group_id}: start while a batch is in progress")
        p = _Pending(entry)
        self._busy = True
        try:
            p.result = self._apply(entry)
        except Exception as exc:  # an invariant failure: the proposer hears it
            p.error = exc
        if self.sync_each_batch and self._syncer is not None:
            if lone and self._quiet >= self._quiet_min:
                self._candidates += 1
                if self._candidates % INLINE_PROBE_EVERY:
                    return self._sync_inline(p)
            self._syncer.start(self._sync, partial(self._durable, p, on_durable))
            return p  # busy until the sync is done
        try:
            if self.sync_each_batch:
                self._sync()
                self.syncs += 1
        except Exception as exc:
            p.error = p.error or exc
        self._resolve([p])
        return p

    def _sync_inline(self, p: _Pending) -> _Pending:
        """Sync a started lone batch on the event loop (module doc: inline syncs)."""
        t0 = _clock()
        try:
            self._sync()
            self.syncs += 1
        except Exception as exc:
            p.error = p.error or exc
        self.inline_syncs += 1
        if _clock() - t0 > INLINE_SYNC_S_MAX:
            self._quiet = 0
            self._quiet_min = min(self._quiet_min * 2, QUIET_BATCHES_MAX)
        else:
            self._quiet_min = QUIET_BATCHES_MIN
        self._resolve([p])
        return p

    def _durable(
        self, p: _Pending, on_durable: Callable[[_Pending], None], error: BaseException | None
    ) -> None:
        """The sync of a ``start``ed batch is done (in the trio thread)."""
        if self._pending:
            self._quiet = 0
        else:
            self._quiet += 1
        if error is None:
            self.syncs += 1
        elif p.error is None:
            p.error = error
        self._resolve([p])
        on_durable(p)

    def _resolve(self, batch: list[_Pending]) -> None:
        """End the batch in progress: count it, wake its proposers, let the next in."""
        self.applied += len(batch)
        self.batches += 1
        for p in batch:
            p.done.set()
        self._busy = False
        if self._pending or self._sync_requested:
            self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Drive batches nobody else drives, until cancelled; owns the sync thread.

        Cancellation: stops between batches or while a batch's sync runs (the
        sync itself completes); proposals not yet in a batch stay unresolved.
        """
        if self.sync_in_thread:
            self._syncer = SyncThread(f"sync-{self.group_id}")
        self._running = True
        task_status.started()
        try:
            while True:
                if self._sync_requested and not self._busy:
                    await self._sync_between_batches()
                    continue
                if not self._pending or self._busy:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    continue
                await self._drive_one()
        finally:
            self._running = False
            if self._syncer is not None:
                self._syncer.close()
                self._syncer = None

    async def _drive_one(self) -> None:
        """Apply everything pending as one batch, sync once, resolve it.

        Only one batch is in progress at a time (``_busy``): that driver is
        the owner of ``fsm`` for the batch.  Proposals arriving meanwhile wait
        for the next batch, which the ``run`` task takes on.
        """
        self._busy = True
        try:
            if self._syncer is None:
                # let proposers that are ready now join this batch: group
                # commit even though the sync itself never yields (with the
                # sync thread, proposals pile up while a batch syncs)
                await trio.lowlevel.checkpoint()
            batch, self._pending = self._pending, []
            apply = self._apply
            for p in batch:
                try:
                    p.result = apply(p.entry)
                except Exception as exc:  # an invariant failure: the proposer hears it
                    p.error = exc
            if self.sync_each_batch:
                await self._sync_now()
            self.applied += len(batch)
            self.batches += 1
            for p in batch:
                p.done.set()
        finally:
            self._busy = False
            if self._pending or self._sync_requested:
                self._wake.set()

    async def _sync_now(self) -> None:
        if self._syncer is not None:
            await self._syncer.run(self._sync)
        else:
            self._sync()
        self.syncs += 1

    async def sync(self) -> None:
        """Make everything applied so far durable (interval mode's timer).

        The ``run`` task syncs between batches; this waits for that sync.

        Raises:
            Exception: whatever the store's sync raised (``OSError`` ...).

        Cancellation: the sync may still happen.
        """
        done = self._sync_done
        self._sync_requested = True
        self._wake.set()
        await done.wait()
        if self._sync_error is not None:
            err, self._sync_error = self._sync_error, None
            raise err

    async def _sync_between_batches(self) -> None:
        self._sync_requested = False
        done, self._sync_done = self._sync_done, trio.Event()
        self._busy = True
        try:
            await self._sync_now()
        except Exception as exc:  # handed to the waiting ``sync()``
            self._sync_error = exc
        finally:
            self._busy = False
            done.set()
            if self._pending:
                self._wake.set()

    def status(self) -> dict[str, Any]:
        """Counters in the shape of ``RaftGroup.status()`` where they apply."""
        return {
            "group": self.group_id,
            "leader": self.leader_id,
            "applied": self.applied,
            "batches": self.batches,
            "pending": len(self._pending),
        }
