"""Publishes a replicated stream's old leader captured but never appended: re-routed.

Theory of operation
-------------------
A stream replica proposes the publishes it captured as leader *leader only*
(``Stream._start_replicated``): never forwarded, because the new leader may
have captured the same message too while subject interest moved over routes,
and a forwarded copy would be stored twice.  During a graceful stepdown the
outgoing leader holds new entries while its chosen successor catches up
(``RaftCore.transfer_leadership``); what it captured meanwhile is refused once
it is a follower (``NotLeader``/``NoLeader``: provably never appended), and
before this module those publishes waited for their client's timeout and
retry.  So did those routed to it while its unsubscribe travelled over the
routes: after a stepdown the node keeps the capture ``CAPTURE_GRACE_S``
longer (``node.jetstream.service``), and the stream refuses them the same way.

A publish that carries a ``Nats-Msg-Id`` (and a stream with a duplicate
window) can go to the new leader without that risk: if the new leader captured
it as well, the stream's dedupe (applied identically on every replica) stores
one copy and answers the other with the same sequence (``duplicate``).  So
:func:`split` picks those out, and ``Stream`` forwards them through the Raft
group once a leader is known (``RaftGroup.wait_leader``, bounded by
``WAIT_LEADER_S_MAX``); the PubAck is sent from here when the entry is
committed and applied on this replica.  The others keep the late
``NOT_COMMITTED`` answer.  A re-routed batch that fails again is not
re-routed twice.
"""

from __future__ import annotations

from typing import Any

from cluster.headers import parse_headers
from raft.errors import NoLeader, NotLeader, ProposalDropped

__all__ = ["WAIT_LEADER_S_MAX", "reroutable", "split"]

MSG_ID = "Nats-Msg-Id"
#: a re-routed batch waits this long at most for a leader to be known
WAIT_LEADER_S_MAX = 2.0


def reroutable(error: BaseException) -> bool:
    """Whether ``error`` proves the batch is in no log (so a copy may go elsewhere)."""
    if isinstance(error, (NotLeader, NoLeader)):
        return True
    return isinstance(error, ProposalDropped) and not error.maybe_committed


def split(batch: list[Any], duplicate_window_ns: int) -> tuple[list[Any], list[Any]]:
    """(with a ``Nats-Msg-Id``, the rest) of queued publishes ``(subject, headers, payload, cb)``;
    everything is "the rest" when the stream has no duplicate window."""
    if duplicate_window_ns <= 0:
        return [], batch
    ids: list[Any] = []
    rest: list[Any] = []
    for item in batch:
        headers = item[1]
        if headers and MSG_ID.encode() in headers:
            if parse_headers(headers, strict=False).get(MSG_ID):
                ids.append(item)
                continue
        rest.append(item)
    return ids, rest
