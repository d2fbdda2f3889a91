"""Priority groups (ADR-42): which waiting pull request a message goes to.

Theory of operation: nats-server's ``nextWaiting`` walks the waiting list
from its head each time a message is to go out.  With ``pinned_client`` the
first request of a group without a pin id gets a new pin (the NUID every
message then carries as ``Nats-Pin-Id``); while a pin is held, requests
carrying it are served, requests without an id wait (moved to the end), and
requests with another id are removed and answered ``423 Nats-Wrong-Pin-Id``.
With ``overflow`` a request carrying ``min_pending``/``min_ack_pending`` is
served only while the consumer's pending count (counting the message about
to go out) or its ack-pending count reaches one of its minimums; otherwise
it is moved to the end.  With ``prioritized`` the list is kept sorted by the
requests' ``priority`` (0 first; a request without one last), arrival order
within one priority.

trijet hands a request a run of messages at once, not one at a time:
``Pick.limit`` says how many of them nats-server's per-message check would
still allow (``min_pending`` stops holding once the pending count drops below
it; an ack-pending minimum, once met, stays met while messages go out).

Pure: no I/O, no clock; the caller owns the pin and its timer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from cluster.consumer_model import PriorityPolicy

__all__ = ["Pick", "Waiter", "insert_prioritized", "pick", "with_pin_header"]

#: ``Nats-Pin-Id``: the header every message of a pinned consumer carries
PIN_HEADER = "Nats-Pin-Id"


class Waiter(Protocol):
    """What the pick needs of a waiting request."""

    @property
    def group(self) -> str: ...
    @property
    def min_pending(self) -> int: ...
    @property
    def min_ack_pending(self) -> int: ...
    @property
    def pin_id(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def formal(self) -> bool: ...


W = TypeVar("W", bound=Waiter)


@dataclass(slots=True)
class Pick(Generic[W]):
    """The outcome of one walk of the waiting list."""

    #: the request served next (None: none may be served now)
    wr: W | None = None
    #: requests removed for carrying another pin id (answer 423 Nats-Wrong-Pin-Id)
    refused: list[W] = field(default_factory=list)
    #: ``wr`` is the first of its group without a pin: it takes a new one
    new_pin: bool = False
    #: at most this many messages may go to ``wr`` now (None: no such bound)
    limit: int | None = None


def pick(
    waiting: deque[W],
    policy: PriorityPolicy,
    pin_id: str,
    pending: int,
    ack_pending: int,
    *,
    redelivery_next: bool = False,
) -> Pick[W]:
    """Walk ``waiting`` as nats-server's ``nextWaiting`` (reorders it in place).

    Args:
        waiting: the waiting requests, head first.
        policy: the consumer's ``priority_policy``.
        pin_id: the pin held now ("" none).
        pending: messages not yet delivered (ConsumerInfo ``num_pending``).
        ack_pending: messages delivered and not yet acknowledged.
        redelivery_next: the next message out is a redelivery (nats-server
            then compares ``min_pending`` with one more than is pending).

    Returns:
        The request to serve, the requests to refuse, whether it takes a new
        pin, and how many messages it may take.
    """
    out: Pick[W] = Pick()
    need_new = policy is PriorityPolicy.PINNED_CLIENT and not pin_id
    # nats-server's npc+1: the count as the message to send is taken from it
    npc1 = pending + 1 if redelivery_next else pending
    cycled = 0
    while waiting:  # each pass removes a request or counts a cycle
        wr = waiting[0]
        if need_new:
            if wr.pin_id:
                out.refused.append(waiting.popleft())
                continue
            out.new_pin = bool(wr.formal and wr.group)
        elif pin_id and wr.pin_id != pin_id:
            if wr.pin_id:
                out.refused.append(waiting.popleft())
                continue
            waiting.rotate(-1)
            cycled += 1
            if cycled >= len(waiting):
                return out
            continue
        if policy is PriorityPolicy.OVERFLOW and (wr.min_pending > 0 or wr.min_ack_pending > 0):
            by_ack = 0 < wr.min_ack_pending <= ack_pending
            by_pending = 0 < wr.min_pending <= npc1
            if not (by_ack or by_pending):
                waiting.rotate(-1)
                cycled += 1
                if cycled >= len(waiting):
                    return out
                continue
            if not by_ack:
                out.limit = 1 if redelivery_next else pending - wr.min_pending + 1
        out.wr = wr
        return out
    return out


def insert_prioritized(waiting: deque[W], wr: W) -> None:
    """Put ``wr`` after every request of its priority or a lower one
    (nats-server's ``insertSorted``; a request without a priority group last)."""
    rank = wr.priority if wr.formal else 1 << 31
    for i, other in enumerate(waiting):
        if (other.priority if other.formal else 1 << 31) > rank:
            waiting.insert(i, wr)
            return
    waiting.append(wr)


def with_pin_header(headers: bytes, pin_id: str) -> bytes:
    """``headers`` with ``Nats-Pin-Id: <pin_id>`` added (nats-server's ``genHeader``)."""
    line = f"{PIN_HEADER}: {pin_id}\r\n\r\n".encode()
    if len(headers) > 2:
        return headers[:-2] + line
    return b"NATS/1.0\r\n" + line
