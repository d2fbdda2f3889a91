"""The state machine a Raft group replicates.

Theory of operation
-------------------
A :class:`StateMachine` is deterministic: given the same sequence of entries
(bytes) every replica reaches the same state and returns the same results
(DESIGN rule 2: decide in apply; never read a clock or an RNG in ``apply``).

The group builds the state at start from the latest snapshot (``restore``)
followed by the journal's committed entries (``apply``), so a state machine is
handed to a group *fresh*. ``snapshot`` is called on the driver task right
after an apply, so it sees the state as of the last applied index; it must not
keep references that later applies mutate.

A state machine may also define ``apply_at(entry, index)``: the group then
calls it instead of ``apply`` with the Raft index of the entry (the items of
one batch share an index).  A machine whose state lives in a durable store of
its own uses it to skip entries that store already holds after a restart.

A state machine may also define ``apply_run(entries)``: ``entries`` is a run
of consecutive committed regular entries as ``(items, index)`` (each entry's
proposals and its Raft index) and it returns one result list per entry, one
result per item (an exception per item as ``raft.errors.ApplyFailed``); the
group then hands it every run instead of one ``apply_at`` per item, so it can
apply a run in one pass (one store write).  Results still reach each proposer
as ``apply_at``'s would.

Optional gates, read by :class:`raft.core.RaftCore` every cycle:
``can_apply()`` (False: committed entries wait; e.g. while a snapshot's data
is still being fetched) and ``can_lead()`` (False: this member never stands
for election nor takes a transferred lead; a replica with a hole).

Results are returned to the proposer on the member where the proposal was
made (other replicas drop them). ``apply`` should report failures as result
values; an exception is logged, turned into :class:`raft.errors.ApplyFailed`
for the proposer, and the entry counts as applied.
"""

from __future__ import annotations

from typing import BinaryIO, Protocol

__all__ = ["StateMachine"]


class StateMachine(Protocol):
    """Deterministic replicated state."""

    def apply(self, entry: bytes) -> object:
        """Apply one committed proposal and return its result (any object)."""

    def snapshot(self) -> bytes:
        """Serialize the whole state as of the last ``apply``."""

    def restore(self, reader: BinaryIO) -> None:
        """Replace the whole state with a snapshot read from ``reader``."""
