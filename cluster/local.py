"""``LocalGroup``: the R1 stand-in for a Raft group, with the same ``propose`` API.

Theory of operation: a single-replica stream needs no consensus, only the
same decide-in-apply state machine and the same durability promise.  Callers
``await propose(entry)``; the one driver task takes every proposal that piled
up, applies them to the state machine in order, makes the state machine's
store durable once for the whole batch (``sync`` in a worker thread: group
commit), and only then resolves the waiting proposals.  So a caller that got a
result knows its entry is applied *and* on disk, exactly as with ``RaftGroup``
(where the fsync is the journal's).  Proposals beyond ``pending_max`` are
refused with ``QueueFull``.

Cancellation: a cancelled ``propose`` may still be applied and synced; its
result is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from raft.errors import QueueFull
from raft.fsm import StateMachine


class _Pending:
    __slots__ = ("done", "entry", "error", "result")

    def __init__(self, entry: bytes) -> None:
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
        sync_in_thread: run ``sync`` via ``trio.to_thread`` (tests may turn it off).
    """

    def __init__(
        self,
        group_id: str,
        fsm: StateMachine,
        sync: Callable[[], None],
        *,
        pending_max: int = 20_000,
        sync_in_thread: bool = True,
    ) -> None:
        self.group_id = group_id
        self.fsm = fsm
        self._sync = sync
        self.pending_max = pending_max
        self.sync_in_thread = sync_in_thread
        self._pending: list[_Pending] = []
        self._wake = trio.Event()
        self.applied = 0
        self.batches = 0

    is_leader = True

    @property
    def leader_id(self) -> str:
        return "local"

    async def propose(self, entry: bytes) -> Any:
        """Apply ``entry`` and return the state machine's result once durable.

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
        self._wake.set()
        await p.done.wait()
        if p.error is not None:
            raise p.error
        return p.result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Drive proposals until cancelled (the single owner of ``fsm``).

        Cancellation: stops between batches or while a batch's sync runs (the
        sync itself completes); proposals of an unfinished batch stay unresolved.
        """
        task_status.started()
        while True:
            if not self._pending:
                await self._wake.wait()
            self._wake = trio.Event()
            batch, self._pending = self._pending, []
            for p in batch:
                try:
                    p.result = self.fsm.apply(p.entry)
                except Exception as exc:  # an invariant failure: the proposer hears it
                    p.error = exc
            if self.sync_in_thread:
                await trio.to_thread.run_sync(self._sync)
            else:
                self._sync()
            self.applied += len(batch)
            self.batches += 1
            for p in batch:
                p.done.set()
            await trio.lowlevel.checkpoint()

    def status(self) -> dict[str, Any]:
        """Counters in the shape of ``RaftGroup.status()`` where they apply."""
        return {
            "group": self.group_id,
            "leader": self.leader_id,
            "applied": self.applied,
            "batches": self.batches,
            "pending": len(self._pending),
        }
