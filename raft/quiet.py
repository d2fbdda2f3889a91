"""Quiet groups: a Raft group with nothing to do hibernates and costs nothing.

Theory of operation
-------------------
A node runs one Raft group per replicated stream plus the meta group. With a
heartbeat every ``heartbeat_s`` per group and peer, 100 idle R3 groups cost
thousands of driver cycles a second per node, each a pysyncobj tick in
Python. Most groups are idle most of the time, so an idle group *hibernates*
(CockroachDB calls it quiescence): its leader stops heartbeating and its
followers stop their election timers. Nothing of the group wakes until
something happens. What still detects a dead leader is the *link*: the peer
links carry one tiny ping per peer per beat for all groups together
(:class:`raft.links.TcpPeerLinks`; :mod:`raft.liveness`), and a link that goes
down, comes up, or falls silent for ``silence_s`` wakes every quiet group
that has that peer as a member (:meth:`QuietState.peer_event`). So a node's
heartbeats are coalesced into one per peer link, and a quiet group's failure
detection is exactly as fast as a busy one's.

Protocol (messages carried with the group's other Raft messages, see
:mod:`raft.wire`):

* A leader whose group is *calm* -- no proposal or admin request waiting,
  ``commit == last index``, every follower's match index ``== last index``,
  and that state unchanged for ``quiet_after_s`` -- sends each follower
  ``quiet(term, idx, log_term, commit)`` once per heartbeat.
  A new round starts whenever the calm state changes (or the leader is
  woken); acknowledgements carry the round, so a late one never counts.
* A follower of that leader in that term whose log ends exactly at
  ``(idx, log_term)`` takes the commit index (``<= idx``: by log matching its
  log is the leader's up to ``idx``), goes quiet and answers
  ``quiet_ack(term, idx)``. Otherwise it ignores it (and wakes if it was quiet).
* The leader goes quiet once every follower acknowledged the same
  ``(term, idx)``; a follower that never answers (down) keeps the group
  awake, heartbeating as before.

A quiet member wakes on: any other Raft message of the group (an append
with entries or a newer commit index, a vote request, a forwarded command
...; not the leader's empty heartbeats while it still waits for acks), a ``wake`` message, a proposal or
admin request made to it, and a link event of a member (the leader, for a
follower). On waking a leader heartbeats at once and takes its peers' last
response times from the links (so its fallback -- stepping down without a
majority -- is timed as if it had heartbeated all along); a follower arms its
election deadline at ``last heard from the leader's link + a random election
timeout``, the deadline a busy group would have, and, unless its leader woke
it, sends the leader ``wake`` (a woken follower never waits for a quiet
leader to time out). A leader's driver that stops (the group is closed on a
live node) sends its followers ``wake``, so they elect a new leader rather
than sleeping on.

Safety: Raft's safety never depends on timers, and quiet changes nothing of
what is stored, voted or committed but the followers' commit index, set
exactly as an append-entries from the leader would set it. Liveness: a quiet
group stays quiet only while every member confirmed it and its links are up;
every way out of that state wakes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pysyncobj.node import Node

from raft.syncobj import STATE_CANDIDATE, STATE_FOLLOWER, STATE_LEADER

if TYPE_CHECKING:
    from raft.core import RaftCore

__all__ = ["QUIET_TYPES", "QuietState"]

#: message types handled here, never by pysyncobj
QUIET_TYPES = frozenset({"quiet", "quiet_ack", "wake"})

#: a quiet leader's next heartbeat time (far away; reset on waking)
_NEVER = 1e18


class QuietState:
    """The hibernation state of one member (owned by its :class:`RaftCore`).

    Args:
        core: the member.
        heard: when this node last heard anything from a peer over its link
            (clock seconds), or None if unknown.
    """

    def __init__(self, core: RaftCore, heard: Callable[[str], float | None] | None = None) -> None:
        self.core = core
        self.heard = heard
        #: False: the links report no link events, so this member never hibernates
        self.available = True
        self.quiet = False
        self._quiet_as: tuple[int, int] | None = None  # (term, state) when it went quiet
        self._calm_key: tuple[int, int, int] | None = None
        self._calm_since = 0.0
        self._acks: set[str] = set()
        #: the leader's calm round: acks of an earlier round never count
        self._round = 0
        self._next_send = 0.0
        #: counters for status()
        self.quiesced = 0
        self.woken = 0

    @property
    def enabled(self) -> bool:
        return self.available and self.core.config.quiet_after_s is not None

    # ------------------------------------------------------------ messages

    def on_message(self, node: Node, m: dict[str, Any]) -> bool:
        """Called for every inbound message; True if handled here (not for pysyncobj)."""
        t = m["type"]
        if t not in QUIET_TYPES:
            if self.quiet and not self._idle(node, m):
                self.wake(woken_by=node.id)
            return False
        obj = self.core.obj
        if t == "quiet":
            self._on_quiet(node, m)
        elif t == "quiet_ack":
            if (
                not self.quiet
                and obj._SyncObj__raftState == STATE_LEADER
                and m["term"] == obj._SyncObj__raftCurrentTerm
                and self._calm_key is not None
                and m["idx"] == self._calm_key[1]
                and m["round"] == self._round
            ):
                self._acks.add(node.id)
                if all(n.id in self._acks for n in obj._SyncObj__otherNodes):
                    self._go_quiet()
        else:  # wake
            self._acks.discard(node.id)
            self._calm_key = None
            self.wake(woken_by=None)
            if (
                obj._SyncObj__raftState == STATE_CANDIDATE
                and self.core.journal.last_index <= 1  # nothing since pysyncobj's first
                and obj._SyncObj__raftLeader is None
            ):
                # a new group's first candidate hears from a member that has just
                # started (its vote request found none): ask it again, same term
                j = self.core.journal
                vote = {
                    "type": "request_vote",
                    "term": obj._SyncObj__raftCurrentTerm,
                    "last_log_index": j.last_index,
                    "last_log_term": j.term_at(j.last_index) or 0,
                }
                self.core.transport.send(node, vote)
        return True

    def _idle(self, node: Node, m: dict[str, Any]) -> bool:
        """A message that brings nothing new and does not wake a quiet member:
        an empty append-entries from our leader (the heartbeats a leader sends
        while it waits for every ``quiet_ack``), or a follower's success answer
        to one (arriving after the leader went quiet)."""
        obj = self.core.obj
        last = self.core.journal.last_index
        if obj._SyncObj__raftState == STATE_LEADER:
            return (
                m["type"] == "next_node_idx"
                and m["success"]
                and not m["reset"]
                and m["next_node_idx"] == last + 1
                and m.get("term") == obj._SyncObj__raftCurrentTerm
            )
        leader = obj._SyncObj__raftLeader
        return (
            m["type"] == "append_entries"
            and not m.get("entries")
            and "serialized" not in m
            and leader is not None
            and leader.id == node.id
            and m["term"] == obj._SyncObj__raftCurrentTerm
            and m["commit_index"] <= obj._SyncObj__raftCommitIndex
            and m.get("prevLogIdx") == last
        )

    def _on_quiet(self, node: Node, m: dict[str, Any]) -> None:
        obj = self.core.obj
        j = self.core.journal
        leader = obj._SyncObj__raftLeader
        idx = m["idx"]
        if not self.enabled:
            return  # no link events here: never hibernate (the leader stays awake)
        if (
            obj._SyncObj__raftState != STATE_FOLLOWER
            or self.core.outstanding()  # its own timers still have work to do
            or m["term"] != obj._SyncObj__raftCurrentTerm
            or leader is None
            or leader.id != node.id
            or j.last_index != idx
            or j.term_at(idx) != m["log_term"]
            or m["commit"] > idx
        ):
            self.wake(woken_by=node.id)
            return
        commit = m["commit"]
        if commit > obj._SyncObj__raftCommitIndex:  # what an append-entries would set
            obj._SyncObj__raftCommitIndex = commit
            j.setRaftCommitIndex(commit)
        if not self.quiet:
            self._go_quiet()
        ack = {"type": "quiet_ack", "term": m["term"], "idx": idx, "round": m["round"]}
        self.core.transport.send(node, ack)

    def _go_quiet(self) -> None:
        obj = self.core.obj
        self.quiet = True
        self.quiesced += 1
        self._quiet_as = (obj._SyncObj__raftCurrentTerm, obj._SyncObj__raftState)

    # ------------------------------------------------------------ waking

    def peer_event(self, peer_id: str) -> bool:
        """The link to ``peer_id`` went down, came up or fell silent: a quiet
        member that depends on it wakes. True if it woke."""
        if not self.quiet:
            if self.core.obj._SyncObj__raftState == STATE_LEADER:
                self._calm_key = None  # quiescing: start over (the peer may have restarted)
            return False
        obj = self.core.obj
        if obj._SyncObj__raftState == STATE_LEADER:
            if not any(n.id == peer_id for n in obj._SyncObj__otherNodes):
                return False
        else:
            leader = obj._SyncObj__raftLeader
            if leader is not None and leader.id != peer_id:
                return False
        self.wake(woken_by=None)
        return True

    def wake(self, woken_by: str | None = None) -> None:
        """Leave the quiet state (no-op if not quiet); see the module docstring.

        Args:
            woken_by: the member whose message woke us, if any.
        """
        if not self.quiet:
            return
        self.quiet = False
        self.woken += 1
        self._calm_key = None
        self._acks.clear()
        core = self.core
        obj = core.obj
        now = core.now()
        if obj._SyncObj__raftState == STATE_LEADER:
            obj._SyncObj__newAppendEntriesTime = 0  # heartbeat in this cycle
            last = obj._SyncObj__lastResponseTime
            for n in obj._SyncObj__otherNodes:
                last[n] = self._heard(n.id, now)
            return
        leader = obj._SyncObj__raftLeader
        cfg = core.config
        lo, hi = cfg.election_timeout_s_min, cfg.election_timeout_s_max
        base = self._heard(leader.id, now) if leader is not None else now
        obj._SyncObj__raftElectionDeadline = base + lo + (hi - lo) * core.rng.random()
        if leader is not None and woken_by != leader.id:
            core.transport.send(leader, {"type": "wake", "term": obj._SyncObj__raftCurrentTerm})

    def _heard(self, peer_id: str, now: float) -> float:
        h = self.heard(peer_id) if self.heard is not None else None
        return now if h is None else min(h, now)

    # ------------------------------------------------------------ the cycle

    def before_tick(self) -> None:
        """While quiet, keep pysyncobj's timers from firing (no election, no
        heartbeat, no fallback) in cycles run for other reasons."""
        if not self.quiet:
            return
        obj = self.core.obj
        if self._quiet_as != (obj._SyncObj__raftCurrentTerm, obj._SyncObj__raftState):
            self.wake()
            return
        now = self.core.now()
        if obj._SyncObj__raftState == STATE_LEADER:
            obj._SyncObj__newAppendEntriesTime = _NEVER
            last = obj._SyncObj__lastResponseTime
            for n in obj._SyncObj__otherNodes:
                last[n] = now
        else:
            obj._SyncObj__raftElectionDeadline = _NEVER

    def after_tick(self, busy: bool) -> None:
        """A leader: track calm and send ``quiet`` to followers that did not confirm.

        Args:
            busy: proposals or admin requests are waiting.
        """
        if not self.enabled or self.quiet:
            if self.quiet and self._quiet_as != (
                self.core.obj._SyncObj__raftCurrentTerm,
                self.core.obj._SyncObj__raftState,
            ):
                self.wake()
            return
        core = self.core
        obj = core.obj
        if obj._SyncObj__raftState != STATE_LEADER or not obj._SyncObj__otherNodes:
            self._calm_key = None
            return
        last = core.journal.last_index
        commit = obj._SyncObj__raftCommitIndex
        if busy or commit != last:
            # not calm (every cycle under load): a new round starts when calm
            # comes (below, with a new key); acks count only while calm
            if self._calm_key is not None:
                self._calm_key = None
                self._acks.clear()
                self._round += 1
            return
        match = obj._SyncObj__raftMatchIndex
        key = (obj._SyncObj__raftCurrentTerm, last, commit)
        now = core.now()
        calm = all(match.get(n, 0) == last for n in obj._SyncObj__otherNodes)
        if not calm or key != self._calm_key:
            self._calm_key = key if calm else None
            self._calm_since = now
            self._acks.clear()
            self._round += 1
            return
        after = core.config.quiet_after_s
        assert after is not None
        if now - self._calm_since < after or now < self._next_send:
            return
        self._next_send = now + core.config.heartbeat_s
        msg = {
            "type": "quiet",
            "term": key[0],
            "idx": last,
            "log_term": core.journal.term_at(last) or 0,
            "commit": commit,
            "round": self._round,
        }
        for n in obj._SyncObj__otherNodes:
            if n.id not in self._acks:
                core.transport.send(n, dict(msg))

    def next_deadline(self, deadline: float) -> float:
        return math.inf if self.quiet else deadline

    def farewell(self) -> list[tuple[Node, dict[str, Any]]]:
        """A leader closing down: ``wake`` for each follower (they elect anew)."""
        obj = self.core.obj
        if obj._SyncObj__raftState != STATE_LEADER:
            return []
        term = obj._SyncObj__raftCurrentTerm
        return [(n, {"type": "wake", "term": term}) for n in obj._SyncObj__otherNodes]
