"""Waiting pull requests served in turn, one message each, as nats-server does.

Theory of operation: nats-server's waiting list hands out one message at a
time.  ``waitQueue.pop`` gives the message to the head request and, when that
request wants more and others wait, moves it to the end of the list (with
``prioritized``: to the end of its own priority); so two requests of batch 3
waiting together get stream sequences 1, 3, 5 and 2, 4, 6 -- whether the
messages arrive one by one or together.  A client notices it with several
fetches outstanding on one consumer (nats-py's concurrent ``fetch`` calls,
libnats' ``js_PullSubscribe`` with more than one request in flight, or many
workers sharing a durable).

trijet picks the messages of every waiting request at once (one store read,
one ``ConsumerDelivered`` proposal for all of them) and hands them out with
``Turns``: ``take`` assigns each picked message to the request whose turn it
is, moves that request to the end (or retires it when its batch is full) and
drops a request whose ``max_bytes`` the message would exceed (answered
``409 Message Size Exceeds MaxBytes`` when it got nothing yet, as a single
request's serve does).  The dispatcher (``node.jetstream.pull``) then
updates the requests by what was actually delivered, reorders its waiting
list as the turns left it and sends each request's messages in delivery
order.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from store.api import StoredMsg

__all__ = ["TURNS_MSGS_MAX", "Turns", "msg_size"]

TURNS_MSGS_MAX = 4096
"""Most messages one round of turns picks (one ``ConsumerDelivered``)."""


class Turn(Protocol):
    """What the turns read of a waiting request."""

    @property
    def n(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def delivered(self) -> int: ...


R = TypeVar("R", bound=Turn)


def msg_size(m: StoredMsg) -> int:
    """A message's size as a pull request's ``max_bytes`` counts it."""
    return len(m.subject) + len(m.headers) + len(m.payload)


@dataclass(slots=True)
class _Slot(Generic[R]):
    wr: R
    #: messages it may still take
    left: int
    #: bytes it may still take (its ``max_bytes`` bound; unused without one)
    room: int
    #: messages it took in this round
    taken: int = 0


class Turns(Generic[R]):
    """One round of turns over ``members`` (head first; module doc).

    Args:
        members: the requests taking turns, in waiting-list order.
    """

    def __init__(self, members: list[R]) -> None:
        self._ring: deque[_Slot[R]] = deque(_Slot(wr, wr.n, wr.max_bytes) for wr in members)
        #: stream sequence -> the request it went to
        self.owner: dict[int, R] = {}
        #: requests dropped for a message larger than their ``max_bytes``
        #: allowed, with whether they are answered 409 (they got nothing)
        self.dropped: list[tuple[R, bool]] = []
        self._wants = sum(max(wr.n, 0) for wr in members)

    def wants(self) -> int:
        """How many messages the members ask for together (bounded)."""
        return min(self._wants, TURNS_MSGS_MAX)

    def take(self, m: StoredMsg) -> bool:
        """Give ``m`` to the request whose turn it is; False: nobody takes it."""
        ring = self._ring
        size = 0
        while ring:
            slot = ring[0]
            if slot.wr.max_bytes > 0:
                size = size or msg_size(m)
                if size > slot.room:
                    ring.popleft()
                    self.dropped.append((slot.wr, slot.wr.delivered == 0 and slot.taken == 0))
                    continue
                slot.room -= size
            self.owner[m.seq] = slot.wr
            slot.left -= 1
            slot.taken += 1
            if slot.left <= 0:
                ring.popleft()
            else:
                ring.rotate(-1)
            return True
        return False

    def order(self) -> list[R]:
        """The members still taking turns, in the order of their next turn."""
        return [slot.wr for slot in self._ring]
