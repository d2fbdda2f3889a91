"""How a Raft group member applies committed entries to its state machine.

A mixin of :class:`raft.core.RaftCore` (which owns the attributes declared here):
pysyncobj's apply step (``_apply_committed``) unless the state machine holds
applies back (``may_apply``), a batch entry's items one by one (``_apply_batch``:
``apply_at`` tells a state machine with a durable store of its own the entry's
Raft index) or a run of entries in one call (``_apply_run``, a state machine
with ``apply_run``), the membership changes applied (``_on_membership_applied``),
and the state machine's say on leading (``may_lead``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from raft import clock
from raft.errors import ApplyFailed
from raft.fsm import StateMachine
from raft.proposal import decode_batch
from raft.syncobj import TrijetSyncObj

__all__ = ["StateMachineApply"]

log = logging.getLogger("raft.core")


class StateMachineApply:
    """Applying committed entries for :class:`raft.core.RaftCore` (see the module docstring)."""

    obj: TrijetSyncObj
    fsm: StateMachine
    group_id: str
    node_id: str
    now: Callable[[], float]
    rng: random.Random
    removed: bool
    _watch: dict[bytes, Any]
    _watch_applied: Callable[[bytes, list[object] | None], None]  # ``ProposalSettling``'s

    def may_lead(self) -> bool:
        """False while the state machine says it must not lead (``can_lead``)."""
        can_lead = getattr(self.fsm, "can_lead", None)
        return can_lead is None or bool(can_lead())

    def _apply_committed(self) -> None:
        """Apply every committed, unapplied entry (pysyncobj's own apply step),
        unless the state machine holds applies back (``can_apply``)."""
        obj = self.obj
        if obj._SyncObj__raftCommitIndex > obj._SyncObj__raftLastApplied and self.may_apply():
            with clock.bound(self.now, self.rng):
                TrijetSyncObj._pysyncobj_apply(obj)

    def may_apply(self) -> bool:
        """False while the state machine holds applies back (``can_apply``)."""
        can_apply = getattr(self.fsm, "can_apply", None)
        return can_apply is None or bool(can_apply())

    def _apply_batch(self, data: bytes) -> list[object] | None:
        try:
            items = decode_batch(data)
        except ValueError as e:
            log.error("event=bad_batch group=%s error=%s", self.group_id, e)
            return None
        results: list[object] = []
        # a state machine with ``apply_at`` learns the Raft index of the entry
        # (every item of one batch shares it): one that keeps its state in a
        # durable store of its own skips entries it already holds
        apply_at = getattr(self.fsm, "apply_at", None)
        index = self.obj._SyncObj__raftLastApplied + 1
        for it in items:
            try:
                results.append(self.fsm.apply(it) if apply_at is None else apply_at(it, index))
            except Exception as e:
                log.exception("event=apply_raised group=%s", self.group_id)
                results.append(ApplyFailed(e))
        if self._watch:
            self._watch_applied(data, results)
        return results

    def _apply_run(self, entries: list[tuple[bytes, int]]) -> list[list[object] | None]:
        """Apply a run of regular entries ``(batch, index)`` with the state
        machine's ``apply_run``: one result list per entry (None: not a batch),
        as ``_apply_batch`` gives each."""
        decoded: list[tuple[list[bytes], int]] = []
        bad: set[int] = set()
        for k, (data, index) in enumerate(entries):
            try:
                decoded.append((decode_batch(data), index))
            except ValueError as e:
                log.error("event=bad_batch group=%s error=%s", self.group_id, e)
                decoded.append(([], index))
                bad.add(k)
        out: list[list[object] | None] = list(self.fsm.apply_run(decoded))  # type: ignore[attr-defined]
        for k in bad:
            out[k] = None
        if self._watch:
            for (data, _), results in zip(entries, out, strict=True):
                self._watch_applied(data, results)
        return out

    def _on_membership_applied(self, req: list[str]) -> None:
        if req[1] == self.node_id:
            # the latest change about this node decides: one removed and added
            # again (a stream scaled down and up) replays both while it catches up
            self.removed = req[0] == "rem"
