"""Errors raised by :class:`raft.group.RaftGroup`.

Every error says whether the proposal *may* still have been committed:
``NotLeader``, ``NoLeader`` and ``QueueFull`` guarantee it was not;
``ProposalDropped`` carries ``maybe_committed``.
"""

from __future__ import annotations

__all__ = [
    "ApplyFailed",
    "InvariantViolation",
    "NoLeader",
    "NotLeader",
    "ProposalDropped",
    "QueueFull",
    "RaftError",
    "TransferFailed",
]


class RaftError(Exception):
    """Base of the Raft layer's errors."""


class NotLeader(RaftError):
    """This member (or the member the proposal was forwarded to) is not the leader.

    The proposal was not appended. ``leader_id`` is the best known leader (None
    if unknown); retry there.
    """

    def __init__(self, leader_id: str | None) -> None:
        super().__init__(f"not leader (leader hint: {leader_id})")
        self.leader_id = leader_id


class NoLeader(RaftError):
    """No leader is known (election in progress or no quorum). Not appended."""


class QueueFull(RaftError):
    """The proposal queue is at its bound. Not appended; back off and retry."""


class ProposalDropped(RaftError):
    """The proposal did not (or may not) take effect.

    ``maybe_committed`` is False when the log position was provably taken by
    another entry (or the request was denied), True when the outcome is unknown
    (leader changed while a forwarded proposal was in flight, the group closed).
    """

    def __init__(self, reason: str, *, maybe_committed: bool) -> None:
        super().__init__(f"proposal dropped: {reason} (maybe committed: {maybe_committed})")
        self.reason = reason
        self.maybe_committed = maybe_committed


class ApplyFailed(RaftError):
    """The state machine raised while applying this committed entry (on every replica)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"apply raised {error!r}")
        self.error = error


class TransferFailed(RaftError):
    """``step_down`` could not hand leadership over (no caught-up follower, or timed out)."""


class InvariantViolation(RaftError):
    """A production invariant does not hold (never raised on valid input)."""
