"""The consumer state machine: one consumer's replicated state, decided in apply.

Theory of operation
-------------------
``ConsumerStateMachine`` holds what nats-server's consumer remembers:
the last consumer sequence delivered (``dseq``), the next stream sequence to
consider (``next_sseq``), the ack floor, the pending map (stream seq ->
original consumer seq and the time its ack timer started), redelivery counts,
the redelivery queue and the ``last_per_subject`` start list.  It changes
only by applying consumer ops (``cluster.ops`` codes 32..63), so every
replica computes the same consumer sequences, ack floors and redelivery
decisions (DESIGN rule 2).  ``apply`` reads no clock: every time comes in the
op (``now_ns``, taken by the proposer); it draws no randomness and does no
I/O apart from ``ConsumerStore.save`` (buffered; the group syncs).

Timers are data.  The shell asks ``next_due_ns()`` (the earliest ack
deadline: ``ack_wait``, or ``backoff[min(redeliveries, len-1)]``), sleeps
until then and proposes ``ConsumerTimeouts(now)``; apply queues every
expired message for redelivery.  A message that already had ``max_deliver``
deliveries (expired or ``-NAK``'d) is given up (``MaxDeliveries``, no longer
pending) when apply is asked to redeliver it, as nats-server does when it
takes it off its redelivery queue: for a push consumer right after the
timeout, for a pull consumer when the next pull request arrives (until then
ConsumerInfo still counts it in ``num_ack_pending``).  Only ``max_deliver`` 1
gives up at the timeout itself (nats-server's timer check counts
redeliveries, at least 1).  A ``-NAK`` with a delay re-bases the message's
timer so that it runs out ``delay`` from the nak; ``+WPI`` restarts it.

Which messages to deliver is *chosen* by the proposer (``select.next_messages``:
redeliveries first, then the ``last_per_subject`` list, then new matching
messages while under ``max_ack_pending``) and *decided* by apply, which skips
anything no longer deliverable and assigns consumer sequences and delivery
counts (``Delivery``).  Ack rules follow nats-server: explicit acks remove one
pending message and move the floor only from its bottom; ack-all acks
everything up to the acked sequence; acks beyond what was delivered are
ignored (and not answered).  ``acked`` in each outcome lists the stream
sequences this consumer no longer needs, for interest and workqueue
retention.

Modules: ``machine`` (state machine and results), ``select`` (start
position, next messages, pending counts; pure reads of the stream store).
"""

from cluster.consumer_fsm.machine import (
    AckOutcome,
    ConsumerOutcome,
    ConsumerStateMachine,
    Delivery,
    MaxDeliveries,
    Nakked,
    Terminated,
)
from cluster.consumer_fsm.select import (
    count_pending,
    next_messages,
    policy_of,
    rfc3339_to_ns,
    select_start,
)

__all__ = [
    "AckOutcome",
    "ConsumerOutcome",
    "ConsumerStateMachine",
    "Delivery",
    "MaxDeliveries",
    "Nakked",
    "Terminated",
    "count_pending",
    "next_messages",
    "policy_of",
    "rfc3339_to_ns",
    "select_start",
]
