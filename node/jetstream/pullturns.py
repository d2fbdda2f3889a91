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

With ``pinned_client`` and ``overflow`` the turns are the same, but whose
turn it is goes through ``node.jetstream.priority.pick`` for every message,
as nats-server calls ``nextWaiting`` once per message: ``PickTurns`` walks
the whole waiting list per message (requests without the pin, or below their
overflow minimums, are moved to the end; requests carrying another pin are
refused), with the pending and ack-pending counts as they stand when that
message goes out; the request served moves to the end of the list while it
wants more (``waitQueue.pop``).  Seen with nats-server 2.15.1: two requests
carrying the pin take messages 1, 3, 5 and 2, 4, 6; an overflow request
with ``min_pending`` takes its turns only while the pending count reaches
its minimum and the others take turns without it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cluster.consumer_model import PriorityPolicy
from node.jetstream.priority import Waiter, pick
from store.api import StoredMsg

__all__ = ["TURNS_MSGS_MAX", "PickTurns", "Turns", "msg_size"]

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

    def sized(self) -> bool:
        """Some member bounds its messages' bytes (``take`` must see each one)."""
        return any(slot.room > 0 for slot in self._ring)

    def assign(self, k: int) -> list[tuple[R, int]]:
        """Hand out ``k`` messages as ``k`` calls of ``take`` would -- for
        members without ``max_bytes`` bounds (``sized`` False), and without
        recording owners --, counted in whole rounds; returns each member's
        share (members that took nothing left out), in member order.

        Every member still in the ring takes one message per round; a
        partial last round serves the first ones in ring order, which then
        move to the end (or leave, once their batch is full)."""
        slots = list(self._ring)
        before = [slot.taken for slot in slots]
        ring = self._ring
        while k > 0 and ring:
            m = len(ring)
            least = min(slot.left for slot in ring)
            rounds = min(least, k // m)
            if rounds:  # whole rounds: the emptiest leave after the last
                k -= m * rounds
                for slot in ring:
                    slot.left -= rounds
                    slot.taken += rounds
                if rounds == least:
                    self._ring = ring = deque(slot for slot in ring if slot.left > 0)
                continue
            for _ in range(k):  # a partial round (k < m): one each, then to the end
                slot = ring.popleft()
                slot.left -= 1
                slot.taken += 1
                if slot.left > 0:
                    ring.append(slot)
            k = 0
        return [
            (slot.wr, slot.taken - b)
            for slot, b in zip(slots, before, strict=True)
            if slot.taken > b
        ]


class PickWaiter(Turn, Waiter, Protocol):
    """A waiting request as ``PickTurns`` reads it."""


P = TypeVar("P", bound=PickWaiter)


class PickTurns(Generic[P]):
    """One round of turns chosen by ``priority.pick`` message by message
    (``pinned_client``, ``overflow``; module doc).

    Args:
        waiting: every waiting request, head first (copied: the caller
            applies ``order()`` once the round is delivered).
        policy: the consumer's ``priority_policy``.
        pin_id: the pin held when the round starts ("" none).
        pending: messages not yet delivered, counting the first new one.
        ack_pending: messages delivered and not yet acknowledged.
        counts_acks: new deliveries add to ``ack_pending`` (ack policy not none).
        next_sseq: the first stream sequence not yet delivered (a message
            below it is a redelivery).
        new_pin: gives a request its new pin; returns the pin id.
        drop_pin: takes back a pin given in this round (its request was
            dropped for ``max_bytes``, as nats-server does).
    """

    def __init__(
        self,
        waiting: list[P],
        policy: PriorityPolicy,
        pin_id: str,
        pending: int,
        ack_pending: int,
        *,
        counts_acks: bool,
        next_sseq: int,
        new_pin: Callable[[P], str],
        drop_pin: Callable[[], None],
    ) -> None:
        self._ring: deque[P] = deque(waiting)
        self._left = {id(wr): wr.n for wr in waiting}
        self._room = {id(wr): wr.max_bytes for wr in waiting}
        self._taken: dict[int, int] = {}
        self._policy = policy
        self.pin_id = pin_id
        self._pending = pending
        self._ack_pending = ack_pending
        self._counts_acks = counts_acks
        self._next_sseq = next_sseq
        self._new_pin = new_pin
        self._drop_pin = drop_pin
        #: stream sequence -> the request it went to
        self.owner: dict[int, P] = {}
        #: requests refused for carrying another pin (answer 423 Nats-Wrong-Pin-Id)
        self.refused: list[P] = []
        #: requests dropped for a message larger than their ``max_bytes``
        #: allowed, with whether they are answered 409 (they got nothing)
        self.dropped: list[tuple[P, bool]] = []
        self._wants = sum(max(wr.n, 0) for wr in waiting)

    def wants(self) -> int:
        """How many messages the waiting requests ask for together (bounded)."""
        return min(self._wants, TURNS_MSGS_MAX)

    def take(self, m: StoredMsg) -> bool:
        """Give ``m`` to the request ``pick`` chooses; False: nobody takes it."""
        ring = self._ring
        redelivery = m.seq < self._next_sseq
        size = 0
        while ring:
            chosen = pick(
                ring,
                self._policy,
                self.pin_id,
                self._pending,
                self._ack_pending,
                redelivery_next=redelivery,
            )
            self.refused.extend(chosen.refused)
            wr = chosen.wr
            if wr is None:
                return False
            key = id(wr)
            if chosen.new_pin:
                self.pin_id = self._new_pin(wr)
            if wr.max_bytes > 0:
                size = size or msg_size(m)
                if size > self._room[key]:
                    ring.popleft()
                    taken = self._taken.get(key, 0)
                    self.dropped.append((wr, wr.delivered == 0 and taken == 0))
                    if chosen.new_pin:
                        self._drop_pin()
                        self.pin_id = ""
                    continue
                self._room[key] -= size
            self.owner[m.seq] = wr
            self._taken[key] = self._taken.get(key, 0) + 1
            self._left[key] -= 1
            if self._left[key] <= 0:
                ring.popleft()
            elif len(ring) > 1:
                ring.rotate(-1)
            if not redelivery:
                self._pending = max(0, self._pending - 1)
                if self._counts_acks:
                    self._ack_pending += 1
            return True
        return False

    def order(self) -> list[P]:
        """Every request still waiting, in the order the round left them."""
        return list(self._ring)
