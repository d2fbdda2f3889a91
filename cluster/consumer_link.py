"""A replicated consumer's way into its stream's Raft group.

Theory of operation: a consumer of a replicated stream has no group of its
own; ``StreamGroupLink`` gives its shell (``cluster.consumers.Consumer``) the
``propose`` of ``LocalGroup`` over the stream's ``ReplicatedGroup``: the op
is encoded as one entry of the stream's log and its result is what this
replica's ``ConsumerTable`` returned when it applied it (``ConsumerGone``
when the table no longer held the consumer).

Cancellation: a cancelled ``propose`` may still commit and apply everywhere.
"""

from __future__ import annotations

from typing import Any

import trio

from cluster.opfields import INT64_MAX

__all__ = ["ALL_DUE_NS", "PROPOSE_RETRY_S", "ConsumerGone", "StreamGroupLink"]

#: ``ConsumerTimeouts`` at this time: every pending message's timer has run out
ALL_DUE_NS = INT64_MAX
#: a replicated consumer's timer loop waits this long after a failed proposal
PROPOSE_RETRY_S = 0.25


class ConsumerGone(Exception):
    """The consumer is no longer in its stream's table (removed meanwhile)."""


class StreamGroupLink:
    """A replicated consumer's ``propose``: through its stream's Raft group.

    Args:
        group: the stream's ``ReplicatedGroup``.
    """

    def __init__(self, group: Any) -> None:
        self.group = group

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Nothing to drive: the stream runs its group."""
        task_status.started()

    async def propose(self, op: Any) -> Any:
        """The op's outcome once committed and applied here.

        Raises:
            RaftError: not committed (leadership lost, no quorum, …).
            ConsumerGone: applied, but the consumer was removed before it.
        """
        out = await self.group.propose(op)
        if out is None:
            raise ConsumerGone(getattr(op, "consumer", ""))
        return out
