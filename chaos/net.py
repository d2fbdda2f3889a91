"""A seeded fake network carrying encoded Raft frames, with faults as data.

Theory of operation
-------------------
:class:`SimNetwork` is pure: ``send(src, dst, frame, now)`` schedules the
*encoded* frame bytes (:func:`raft.wire.encode_frame`) for delivery at
``now + delay``; ``pop_due(now)`` returns what has arrived. Faults are a
:class:`Faults` value (drop / duplicate probabilities, delay range — a random
delay per frame reorders them — plus an extra-delay "reorder" probability)
and a set of blocked directed pairs (partitions, one-way drops). All
randomness comes from the seeded RNG given, so a seed replays exactly.

:class:`FakeNetwork` + :class:`FakePeerLinks` put a trio pump in front of it
for in-process groups (tests under trio, real or mock clock):
``FakePeerLinks`` implements :class:`raft.links.PeerLinks`, frames are decoded
with :class:`raft.wire.FrameDecoder` on arrival, so the bytes on the fake wire
are exactly those a TCP link would carry.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import trio

from raft.wire import FrameDecoder, WireError, encode_frame

__all__ = ["FakeNetwork", "FakePeerLinks", "Faults", "SimNetwork"]


@dataclass
class Faults:
    """Network faults, as data."""

    drop: float = 0.0
    duplicate: float = 0.0
    delay_s_min: float = 0.0005
    delay_s_max: float = 0.002
    reorder: float = 0.0  # probability of an extra delay up to reorder_s
    reorder_s: float = 0.05
    blocked: set[tuple[str, str]] = field(default_factory=set)  # directed (src, dst)


class SimNetwork:
    """Deterministic delivery schedule of frames between named nodes."""

    def __init__(self, rng: random.Random, faults: Faults | None = None) -> None:
        self.rng = rng
        self.faults = faults or Faults()
        self._heap: list[tuple[float, int, str, str, bytes]] = []
        self._seq = 0
        self.sent = 0
        self.dropped = 0
        self.duplicated = 0

    # ---- faults

    def partition(self, *sides: Iterable[str]) -> None:
        """Block traffic between every pair of nodes on different sides."""
        groups = [set(s) for s in sides]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                for x in a:
                    for y in b:
                        self.faults.blocked.add((x, y))
                        self.faults.blocked.add((y, x))

    def isolate(self, node: str, others: Iterable[str]) -> None:
        self.partition([node], [o for o in others if o != node])

    def block(self, src: str, dst: str) -> None:
        """One-way drop from ``src`` to ``dst``."""
        self.faults.blocked.add((src, dst))

    def is_blocked(self, src: str, dst: str) -> bool:
        """Traffic between the two is blocked in either direction."""
        b = self.faults.blocked
        return (src, dst) in b or (dst, src) in b

    def heal(self) -> None:
        self.faults.blocked.clear()

    # ---- traffic

    def _delay(self) -> float:
        f = self.faults
        d = self.rng.uniform(f.delay_s_min, f.delay_s_max)
        if f.reorder and self.rng.random() < f.reorder:
            d += self.rng.uniform(0, f.reorder_s)
        return d

    def send(self, src: str, dst: str, frame: bytes, now: float) -> None:
        self.sent += 1
        f = self.faults
        if (src, dst) in f.blocked or (f.drop and self.rng.random() < f.drop):
            self.dropped += 1
            return
        copies = 1
        if f.duplicate and self.rng.random() < f.duplicate:
            copies = 2
            self.duplicated += 1
        for _ in range(copies):
            self._seq += 1
            heapq.heappush(self._heap, (now + self._delay(), self._seq, src, dst, frame))

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[tuple[str, str, bytes]]:
        out = []
        h = self._heap
        while h and h[0][0] <= now:
            _, _, src, dst, frame = heapq.heappop(h)
            if (src, dst) in self.faults.blocked:  # partition started while in flight
                self.dropped += 1
                continue
            out.append((src, dst, frame))
        return out

    def clear(self) -> None:
        self._heap.clear()


def decode_one_frame(frame: bytes) -> tuple[str, bytes]:
    """Decode exactly one frame (as :class:`FrameDecoder` would off a socket)."""
    dec = FrameDecoder()
    dec.feed(frame)
    f = dec.next_frame()
    if f is None or dec.buffered_bytes:
        raise WireError("not exactly one frame")
    return f


class FakePeerLinks:
    """:class:`raft.links.PeerLinks` over a :class:`FakeNetwork`."""

    def __init__(self, network: FakeNetwork, node_id: str) -> None:
        self.network = network
        self.node_id = node_id
        self.handlers: dict[str, Callable[[str, bytes], None]] = {}
        self.up = True

    def register(self, group_id: str, handler: Callable[[str, bytes], None]) -> None:
        self.handlers[group_id] = handler

    def unregister(self, group_id: str) -> None:
        self.handlers.pop(group_id, None)

    def send(self, peer_id: str, group_id: str, payload: bytes) -> bool:
        if not self.up:
            return False
        self.network.send(self.node_id, peer_id, encode_frame(group_id, payload))
        return True

    def deliver(self, src: str, frame: bytes) -> None:
        if not self.up:
            return
        gid, payload = decode_one_frame(frame)
        h = self.handlers.get(gid)
        if h is not None:
            h(src, payload)


class FakeNetwork:
    """Trio pump around a :class:`SimNetwork`; make links with :meth:`links`."""

    def __init__(self, seed: int = 0, faults: Faults | None = None) -> None:
        self.sim = SimNetwork(random.Random(seed), faults)
        self.nodes: dict[str, FakePeerLinks] = {}
        self._wake = trio.Event()

    def links(self, node_id: str) -> FakePeerLinks:
        links = self.nodes.get(node_id)
        if links is None:
            links = self.nodes[node_id] = FakePeerLinks(self, node_id)
        return links

    def send(self, src: str, dst: str, frame: bytes) -> None:
        self.sim.send(src, dst, frame, trio.current_time())
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver frames when due, until cancelled."""
        task_status.started()
        while True:
            nxt = self.sim.next_time()
            self._wake = trio.Event()
            if nxt is None:
                await self._wake.wait()
                continue
            if nxt > trio.current_time():
                with trio.move_on_at(nxt):
                    await self._wake.wait()
                continue
            for src, dst, frame in self.sim.pop_due(trio.current_time()):
                links = self.nodes.get(dst)
                if links is not None:
                    links.deliver(src, frame)
            await trio.lowlevel.checkpoint()
