"""The append-only cycle of a leader: new proposals appended and sent, no tick.

Theory of operation
-------------------
A cycle (``RaftCore.cycle``) feeds the inbound messages, submits proposals and
runs pysyncobj's whole tick: the election and leader-fallback checks, the
commit step, the apply step, the heartbeat, the command queue (where a
leader's new entries are appended and their append-entries built), log
compaction, then the hibernation and orphan sweeps.  On a leader a cycle run
only because proposals arrived (``RaftDriver.proposed``: a sync publish) has
work only in the command queue: nothing arrived, so no match index moved and
nothing new can commit (the new entry is not yet on any follower), and every
timer-driven step is due at its deadline, which the driver's own cycle keeps
(``next_deadline``).  So such a cycle runs the command queue alone
(``_checkCommandsToApply``, pysyncobj's own step: the same appends, waiters
and append-entries) and skips the rest; the next full cycle (the followers'
answers, or the driver's timer) does it all.

It is taken only when nothing else could need the tick: leading with peers,
out of a transfer hold, not hibernating, no inbound message, admin request,
barrier, leftover command, over-budget link, and the heartbeat not yet due.
Leadership cannot change in it (nothing is received), so the Ready carries
none.  This takes the tick's generic steps off the leader's first cycle of
every replicated write (``bench/README.md``, session 18).

The follower's side is the answer-only cycle: a follower whose inbound
messages are all append-entries of its current leader in the current term
(entries or a heartbeat: not a snapshot's transfer) delivers them (pysyncobj's own handler appends, moves the commit index and
builds the answer) and skips the tick, whose steps on a follower are the
election check (just reset by those very messages), the apply step (the
driver applies after sending, ``Ready.apply``), the command queue (empty:
nothing is forwarded) and compaction.  A full cycle still runs at least every
``FULL_CYCLE_S`` (compaction, the sweeps and the hole's election gate keep
their pace under a steady stream of entries) and whenever anything else is
buffered.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from raft import clock
from raft.syncobj import STATE_FOLLOWER, STATE_LEADER

if TYPE_CHECKING:
    from raft.core import RaftCore, Ready

__all__ = [
    "FULL_CYCLE_S",
    "answer_only_cycle",
    "append_only_cycle",
    "may_answer_only",
    "may_append_only",
]

#: a follower runs a full cycle (the tick) at least this often
FULL_CYCLE_S = 0.05


def may_append_only(core: RaftCore) -> bool:
    """Is a cycle now only the appending of the pending proposals?"""
    obj: Any = core.obj
    return bool(
        core._pending
        and not core._inbound
        and obj._SyncObj__raftState == STATE_LEADER
        and obj._SyncObj__otherNodes
        and not core._barriers
        and not core._membership_requests
        and not core._transfer_requests
        and not core.hold_proposals
        and not core.transport._over_budget
        and not core.quiet_state.quiet
        and not obj._SyncObj__commandsQueue._FastQueue__queue
        and core._hold_term != obj._SyncObj__raftCurrentTerm
        and core.now() < obj._SyncObj__newAppendEntriesTime
    )


def append_only_cycle(core: RaftCore, ready_cls: type[Ready]) -> Ready:
    """Submit the pending proposals and append them (pysyncobj's command step)."""
    obj: Any = core.obj
    core.append_only_cycles += 1
    with clock.bound(core.now, core.rng, core.now()):
        core._submit_pending()
        obj._checkCommandsToApply()
    core._defer_apply = False
    ready = ready_cls(core)
    ready.early_outbox, ready.outbox = core._encode_outbox()
    ready.completions, core._completions = core._completions, []
    ready.more = bool(core._pending)
    return ready


def may_answer_only(core: RaftCore) -> bool:
    """Is a cycle now only the delivery of the leader's append-entries?"""
    obj: Any = core.obj
    if (
        not core._inbound
        or obj._SyncObj__raftState != STATE_FOLLOWER
        or core._pending
        or core._barriers
        or core._membership_requests
        or core._transfer_requests
        or core.transport._over_budget
        or core.quiet_state.quiet
        or obj._SyncObj__commandsQueue._FastQueue__queue
    ):
        return False
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
                or "serialized" in m  # a snapshot's transfer: the full cycle's sweeps follow it
                or "transmission" in m
            ):
                return False
    return core.now() < core.full_cycle_due


def answer_only_cycle(core: RaftCore, ready_cls: type[Ready]) -> Ready:
    """Deliver the leader's append-entries (their answers go to the outbox)."""
    obj: Any = core.obj
    deliver = core.transport.deliver
    members = obj._SyncObj__otherNodes
    core.answer_only_cycles += 1
    with clock.bound(core.now, core.rng, core.now()):
        inbound, core._inbound = core._inbound, deque()
        core._inbound_count = 0
        for peer_id, msgs in inbound:
            node = core._node(peer_id)
            if node in members:
                for m in msgs:
                    deliver(node, m)
    core._defer_apply = False
    ready = ready_cls(core)
    ready.early_outbox, ready.outbox = core._encode_outbox()
    ready.completions, core._completions = core._completions, []
    ready.more = bool(core._inbound)
    return ready
