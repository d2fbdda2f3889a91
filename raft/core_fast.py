"""The short cycles: a leader's append-only and commit-only cycles, a
follower's answer-only cycle, each without pysyncobj's generic tick.

Theory of operation
-------------------
A full cycle (``RaftCore.cycle``) feeds the inbound messages, submits
proposals and runs pysyncobj's whole tick: the election and leader-fallback
checks, the commit step, the apply step, the heartbeat, the command queue
(where a leader's new entries are appended and their append-entries built),
log compaction, then the hibernation and orphan sweeps.  A replicated write
takes three cycles on its critical path, and in each only one or two of
those steps have work; the short cycles run just those:

* **append-only** (a leader, only proposals arrived: ``RaftDriver.proposed``):
  pysyncobj's own command step (``_checkCommandsToApply``: the same appends,
  waiters and append-entries).  Nothing arrived, so no match index moved and
  nothing new can commit (the new entry is on no follower yet).
* **answer-only** (a follower, only its leader's append-entries of the
  current term arrived, entries or a heartbeat, not a snapshot's transfer):
  the messages delivered (pysyncobj's handler appends, moves the commit
  index, resets the election timer and builds the answer).  The tick's
  follower steps would be the election check (just reset), the apply step
  (the driver applies after sending: ``Ready.apply``), the command queue
  (empty) and compaction.
* **commit-only** (a leader, only successful answers of the current term
  arrived): the answers delivered, then the commit step -- Raft's rule, as
  pysyncobj's tick computes it: the highest index of the current term held
  by a majority (the leader counting only up to its durable index,
  ``_cap_matches``), earlier entries committed with it -- and the apply step
  (``__applyLogEntries``: the commit announced with the next entries, or at
  once when ``commit_notify_s_max`` is off).

Every short cycle is refused (a full one runs) when anything else is buffered
(admin requests, barriers, forwarded commands, other messages), while a
transfer holds proposals, while hibernating or over a link's budget, when the
heartbeat is due, and once ``FULL_CYCLE_S`` has passed since the last full
cycle: the timer-driven steps (elections, the leader's fallback, heartbeats,
compaction, the sweeps, a hole's election gate) keep their pace under a
steady stream of writes.  Leadership cannot change in a short cycle (nothing
but replication of the current term is received), so its Ready carries no
leadership; a new leader's readiness comes with its applies (``Ready.apply``).
``tests/raft/test_fast_cycles.py`` runs twin simulations with and without
them: the same messages, journals and commit indexes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raft import clock
from raft.syncobj import STATE_FOLLOWER, STATE_LEADER

if TYPE_CHECKING:
    from raft.core import RaftCore, Ready

__all__ = ["FULL_CYCLE_S", "short_cycle"]

#: every member runs a full cycle (the tick) at least this often
FULL_CYCLE_S = 0.05


def short_cycle(core: RaftCore, defer_apply: bool) -> Ready | None:
    """The cycle's short form when one applies now, else None (run the full one)."""
    obj: Any = core.obj
    if (
        core._barriers
        or core._membership_requests
        or core._transfer_requests
        or core.transport._over_budget
        or core.quiet_state.quiet
        or obj._SyncObj__commandsQueue._FastQueue__queue
    ):
        return None
    now = core.now()
    if now >= core.full_cycle_due:
        return None
    state = obj._SyncObj__raftState
    if state == STATE_LEADER:
        if (
            not obj._SyncObj__otherNodes
            or core._holding()
            or now >= obj._SyncObj__newAppendEntriesTime
        ):
            return None
        if core._pending:
            if core._inbound or core.hold_proposals:
                return None
            return append_only_cycle(core)
        if core._inbound and _answers_only(core):
            return commit_only_cycle(core, defer_apply)
        return None
    if state == STATE_FOLLOWER and core._inbound and not core._pending and _entries_only(core):
        return answer_only_cycle(core)
    return None


def append_only_cycle(core: RaftCore) -> Ready:
    """Submit the pending proposals and append them (pysyncobj's command step)."""
    obj: Any = core.obj
    core.append_only_cycles += 1
    with clock.bound(core.now, core.rng, core.now()):
        core._submit_pending()
        obj._checkCommandsToApply()
    ready = core._take_ready()
    ready.more = bool(core._pending)
    return ready


def _entries_only(core: RaftCore) -> bool:
    """Is every buffered message its leader's append-entries of this term?"""
    obj: Any = core.obj
    leader = obj._SyncObj__raftLeader
    if leader is None:
        return False
    lid = leader.id
    term = obj._SyncObj__raftCurrentTerm
    for peer_id, msgs in core._inbound:
        if peer_id != lid:
            return False
        for m in msgs:
            if (
                m.get("type") != "append_entries"
                or m.get("term") != term
                or "serialized" in m  # a snapshot's transfer
                or "transmission" in m
            ):
                return False
    return True


def answer_only_cycle(core: RaftCore) -> Ready:
    """Deliver the leader's append-entries (their answers go to the outbox)."""
    core.answer_only_cycles += 1
    with clock.bound(core.now, core.rng, core.now()):
        core._deliver_inbound()
    return core._take_ready()


def _answers_only(core: RaftCore) -> bool:
    """Is every buffered message a successful answer of this term?"""
    obj: Any = core.obj
    if not obj._SyncObj__onReadyCalled:
        return False
    term = obj._SyncObj__raftCurrentTerm
    for _peer_id, msgs in core._inbound:
        for m in msgs:
            if (
                m.get("type") != "next_node_idx"
                or m.get("term") != term
                or m.get("success") is not True
                or m.get("reset")
            ):
                return False
    return True


def commit_only_cycle(core: RaftCore, defer_apply: bool) -> Ready:
    """Deliver the followers' answers, then the commit and apply steps."""
    obj: Any = core.obj
    core.commit_only_cycles += 1
    core._defer_apply = defer_apply
    with clock.bound(core.now, core.rng, core.now()):
        core._deliver_inbound()
        capped = core._cap_matches() if core.cap_own_unsynced else None
        _commit_step(obj)
        if capped is not None:
            core._uncap_matches(capped)
        if obj._SyncObj__raftCommitIndex > core.journal.durable_index:
            core.commits_before_own_write += 1
        if obj._SyncObj__applyLogEntries():
            obj._SyncObj__sendAppendEntries()  # the commit announced at once
    return core._take_ready()


def _commit_step(obj: Any) -> None:
    """Raft's commit rule on a leader: the highest index a majority holds
    (the leader holds every entry of its log) whose entry is of the current
    term; the entries before it commit with it."""
    commit = obj._SyncObj__raftCommitIndex
    log = obj._SyncObj__raftLog
    last = log[-1][1]
    if commit < last:
        others = obj._SyncObj__otherNodes
        match = obj._SyncObj__raftMatchIndex
        half = (len(others) + 1) / 2
        term = obj._SyncObj__raftCurrentTerm
        new = commit
        idx = commit
        while idx < last:
            idx += 1
            count = 1
            for n in others:
                if match[n] >= idx:
                    count += 1
            if count <= half:
                break
            entries = obj._SyncObj__getEntries(idx, 1)
            if entries and entries[0][2] == term:
                new = idx
        if new != commit:
            obj._SyncObj__raftCommitIndex = new
            log.setRaftCommitIndex(new)
    obj._SyncObj__leaderCommitIndex = obj._SyncObj__raftCommitIndex
