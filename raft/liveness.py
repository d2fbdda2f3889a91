"""Per-peer link liveness: one beat per peer link for all groups together.

Theory of operation
-------------------
Hibernating Raft groups (:mod:`raft.quiet`) send nothing, so a dead leader
must be noticed by something every group shares: the link to its node. The
link layer sends a *ping* frame (group id :data:`PING_GROUP`, empty payload)
to a peer in every beat (``beat_s``) in which it sent that peer nothing else,
and :class:`PeerLiveness` records when anything last arrived from each peer.
A peer from which nothing arrived for ``silence_s`` is reported once (until
it is heard again): the link layer then tells every group that watches links
(``peer_event``), exactly as it does when a link goes down or comes up.

``silence_s`` must not exceed the smallest ``election_timeout_s_min`` of the
groups on the links: a quiet follower then arms its election deadline from
the last time it heard the leader's node, as a busy group does from its last
heartbeat. Pure (no I/O, no clock of its own): the caller passes ``now``;
used by :class:`raft.links.TcpPeerLinks` and the simulator (``chaos.sim``).
"""

from __future__ import annotations

__all__ = ["BEAT_S", "PING_GROUP", "SILENCE_S", "PeerLiveness"]

#: group id of the link-level ping (no group has it; receivers drop the frame)
PING_GROUP = "\x00"
#: a link with nothing else to send pings this often
BEAT_S = 0.075
#: silence after which a peer is reported (<= every group's election_timeout_s_min)
SILENCE_S = 0.3


class PeerLiveness:
    """When each peer was last heard, and which fell silent."""

    def __init__(self, silence_s: float = SILENCE_S) -> None:
        self.silence_s = silence_s
        self._heard: dict[str, float] = {}
        self._reported: set[str] = set()

    def heard(self, peer_id: str, now: float) -> None:
        """Something arrived from ``peer_id`` at ``now``."""
        self._heard[peer_id] = now
        if self._reported:
            self._reported.discard(peer_id)

    def last_heard(self, peer_id: str) -> float | None:
        """Clock time of the last arrival from ``peer_id`` (None: never)."""
        return self._heard.get(peer_id)

    def next_silence(self) -> float:
        """Clock time at which the next unreported peer falls silent (inf: none)."""
        due = [at + self.silence_s for p, at in self._heard.items() if p not in self._reported]
        return min(due, default=float("inf"))

    def newly_silent(self, now: float, peers: set[str] | None = None) -> list[str]:
        """Peers (of ``peers``, default all heard) silent for ``silence_s`` and
        not reported since they were last heard; each is reported once."""
        out = []
        for pid, at in sorted(self._heard.items()):
            if (peers is None or pid in peers) and pid not in self._reported:
                if now - at >= self.silence_s:
                    self._reported.add(pid)
                    out.append(pid)
        return out
