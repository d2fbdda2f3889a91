"""What a Raft group member tells about itself: leadership, indexes, members, status.

A mixin of :class:`raft.core.RaftCore` (which owns the attributes declared here); read-only
views over pysyncobj's state and the journal, for the driver, the state machines' owners
and ``/raftz``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from raft.journal import DurableJournal
from raft.proposal import LeaderState, Proposal
from raft.quiet import QuietState
from raft.snapshot import SnapshotStore
from raft.syncobj import STATE_LEADER, TrijetSyncObj

__all__ = ["CoreView"]


class CoreView:
    """Read-only views for :class:`raft.core.RaftCore` (see the module docstring)."""

    obj: TrijetSyncObj
    node_id: str
    group_id: str
    journal: DurableJournal
    snapshots: SnapshotStore
    quiet_state: QuietState
    last_seen: dict[str, float]
    now: Callable[[], float]
    commits_before_own_write: int
    append_only_cycles: int
    commit_only_cycles: int
    answer_only_cycles: int
    #: ``leader_state``'s last value and the raw fields it was made from
    _state_cache: tuple[tuple[Any, Any, Any], LeaderState] | None = None
    orphans_failed: int
    watch_resolved: int
    removed: bool
    _pending: deque[Proposal]
    _watch: dict[bytes, Any]

    @property
    def majority(self) -> int:
        """Members that make a majority of the group."""
        return (len(self.obj._SyncObj__otherNodes) + 1) // 2 + 1

    @property
    def has_peers(self) -> bool:
        """Other members exist (a majority without this member is possible)."""
        return bool(self.obj._SyncObj__otherNodes)

    @property
    def is_leader(self) -> bool:
        return bool(self.obj._SyncObj__raftState == STATE_LEADER)

    @property
    def leader_ready(self) -> bool:
        """Leading, and this term's first entry (pysyncobj's no-op) is applied: every
        entry committed by an earlier leader is in the state machine.  Until then a
        new leader's state may lack acknowledged entries, so it serves nothing
        (reads, deliveries, captures); proposals are accepted and queue behind."""
        obj = self.obj
        if obj._SyncObj__raftState != STATE_LEADER:
            return False
        noop = obj._SyncObj__noopIDx
        return noop is None or int(obj._SyncObj__raftLastApplied) >= noop

    @property
    def serving_leader_id(self) -> str | None:
        """``leader_id``, but None while that is this member and it does not serve
        yet (``leader_ready``)."""
        lid = self.leader_id
        if lid == self.node_id and not self.leader_ready:
            return None
        return lid

    #: what the fast lane handles (``RaftDriver._fast_cycle``): replication
    #: in the current term, not elections, transfers or forwarded commands
    FAST_TYPES = frozenset(("append_entries", "next_node_idx"))

    def replicating_only(self) -> bool:
        """Is the last buffered payload only replication of a known leader's
        current term (append-entries and their answers)?"""
        inbound = self._inbound  # type: ignore[attr-defined]
        obj = self.obj
        if not inbound or obj._SyncObj__raftLeader is None:
            return False
        term = obj._SyncObj__raftCurrentTerm
        types = self.FAST_TYPES
        return all(m.get("type") in types and m.get("term") == term for m in inbound[-1][1])

    @property
    def leader_id(self) -> str | None:
        n = self.obj._SyncObj__raftLeader
        return None if n is None else str(n.id)

    @property
    def term(self) -> int:
        return int(self.obj._SyncObj__raftCurrentTerm)

    @property
    def commit_index(self) -> int:
        return int(self.obj._SyncObj__raftCommitIndex)

    @property
    def last_applied(self) -> int:
        return int(self.obj._SyncObj__raftLastApplied)

    @property
    def members(self) -> list[str]:
        return sorted([self.node_id, *(n.id for n in self.obj._SyncObj__otherNodes)])

    def leader_state(self) -> LeaderState:
        """(term, serving leader, this member leads and serves), as one value;
        the same object while none of them changes (read twice per cycle).
        Recomputed only when the term, the leader or the role changed, or
        while this member leads but does not serve yet (its no-op applies)."""
        obj = self.obj
        state_now = obj._SyncObj__raftState
        raw = (obj._SyncObj__raftCurrentTerm, obj._SyncObj__raftLeader, state_now)
        cached = self._state_cache
        if cached is not None and cached[0] == raw:
            state = cached[1]
            if state.is_leader or state_now != STATE_LEADER:
                return state
        n = raw[1]
        lid = None if n is None else str(n.id)
        ready = False
        if state_now == STATE_LEADER:
            noop = obj._SyncObj__noopIDx
            ready = noop is None or int(obj._SyncObj__raftLastApplied) >= noop
        if lid == self.node_id and not ready:
            lid = None  # ``serving_leader_id``
        key = (int(raw[0]), lid, ready)
        state = LeaderState(*key)
        if cached is not None and cached[1] == state:
            state = cached[1]  # the same value: the same object
        self._state_cache = (raw, state)
        return state

    def status(self) -> dict[str, Any]:
        obj = self.obj
        now = self.now()
        match = obj._SyncObj__raftMatchIndex
        nxt = obj._SyncObj__raftNextIndex
        peers = {}
        quiet = self.quiet_state
        heard = quiet.heard if quiet.quiet else None
        for n in sorted(obj._SyncObj__otherNodes, key=lambda n: n.id):
            seen = self.last_seen.get(n.id)
            if heard is not None:  # hibernating: the peer's link speaks for the group
                h = heard(n.id)
                if h is not None and (seen is None or h > seen):
                    seen = h
            peers[n.id] = {
                "match_index": match.get(n) if self.is_leader else None,
                "next_index": nxt.get(n) if self.is_leader else None,
                "last_seen_s_ago": None if seen is None else round(now - seen, 3),
            }
        state = {0: "follower", 1: "candidate", 2: "leader"}[obj._SyncObj__raftState]
        return {
            "group": self.group_id,
            "node": self.node_id,
            "state": state,
            "term": self.term,
            "leader": self.leader_id,
            "voted_for": self.journal.getVotedForNodeId(),
            "commit_index": self.commit_index,
            "applied": self.last_applied,
            "last_index": self.journal.last_index,
            "durable_index": self.journal.durable_index,
            "commits_before_own_write": self.commits_before_own_write,
            "append_only_cycles": self.append_only_cycles,
            "commit_only_cycles": self.commit_only_cycles,
            "answer_only_cycles": self.answer_only_cycles,
            "first_index": self.journal.first_index,
            "journal_entries": len(self.journal),
            "journal_bytes": self.journal.entry_bytes,
            "pending_proposals": len(self._pending),
            "peers": peers,
            "fsyncs": self.journal.fsyncs,
            "snapshots_taken": self.snapshots.taken,
            "snapshots_installed": self.snapshots.installed,
            "orphans_failed": self.orphans_failed,
            "watch_resolved": self.watch_resolved,
            "watching": len(self._watch),
            "removed": self.removed,
            "quiet": quiet.quiet,
            "quiesced": quiet.quiesced,
            "woken": quiet.woken,
        }
