"""Link events of TcpPeerLinks (raft.liveness): up, pings while idle, silence, down.

Real sockets on 127.0.0.1, trio's clock; every wait is on an event with a
bound. Silence is provoked by a peer whose beat loop is too slow to ping in
time (``beat_s`` above ``silence_s``): its link stays up but says nothing.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from raft.links import TcpPeerLinks
from raft.liveness import PING_GROUP, PeerLiveness

WAIT_S = 10.0


class Events:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.changed = trio.Event()

    def __call__(self, peer: str) -> None:
        self.seen.append(peer)
        self.changed.set()

    async def wait_count(self, n: int) -> None:
        with trio.fail_after(WAIT_S):
            while len(self.seen) < n:
                self.changed = trio.Event()
                await self.changed.wait()


async def test_up_pings_and_down_are_reported_to_watchers() -> None:
    ev_b = Events()
    b = TcpPeerLinks("b", b"secret", {}, beat_s=0.02, silence_s=5.0)
    b.register("g", lambda peer, payload: None)
    b.watch("g", ev_b)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(b.serve, "127.0.0.1", 0)
        port = listeners[0].socket.getsockname()[1]
        await nursery.start(b.run)
        a = TcpPeerLinks("a", b"secret", {"b": ("127.0.0.1", port)}, beat_s=0.02)
        pinged = trio.Event()
        b.register(PING_GROUP, lambda peer, payload: pinged.set())
        async with trio.open_nursery() as a_nursery:
            await a_nursery.start(a.run)
            await ev_b.wait_count(1)  # b: the link to a came up
            assert ev_b.seen == ["a"]
            assert b.last_heard("a") is not None
            with trio.fail_after(WAIT_S):  # no group sends anything: a pings
                await pinged.wait()
            a_nursery.cancel_scope.cancel()
        await ev_b.wait_count(2)  # b: the link to a went down
        assert ev_b.seen == ["a", "a"]
        b.unregister("g")
        nursery.cancel_scope.cancel()


async def test_a_silent_peer_is_reported_once() -> None:
    ev_b = Events()
    b = TcpPeerLinks("b", b"secret", {}, beat_s=0.02, silence_s=0.2)
    b.register("g", lambda peer, payload: None)
    b.watch("g", ev_b)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(b.serve, "127.0.0.1", 0)
        port = listeners[0].socket.getsockname()[1]
        await nursery.start(b.run)
        # a pings far too rarely: its link is up but silent for b
        a = TcpPeerLinks("a", b"secret", {"b": ("127.0.0.1", port)}, beat_s=60.0)
        await nursery.start(a.run)
        await ev_b.wait_count(2)  # up, then silent
        assert ev_b.seen == ["a", "a"]
        assert a.is_connected("b")
        # reported once until heard again: one frame from a, then silence again
        assert a.send("b", "g", b"x")
        await ev_b.wait_count(3)
        assert ev_b.seen == ["a", "a", "a"]
        nursery.cancel_scope.cancel()


def test_peer_liveness_reports_each_silence_once() -> None:
    live = PeerLiveness(silence_s=0.3)
    live.heard("n2", 1.0)
    live.heard("n3", 1.2)
    assert live.next_silence() == pytest.approx(1.3)
    assert live.newly_silent(1.29) == []
    assert live.newly_silent(1.35) == ["n2"]
    assert live.newly_silent(1.6) == ["n3"]
    assert live.newly_silent(5.0) == []
    assert live.next_silence() == float("inf")
    live.heard("n2", 5.0)
    assert live.newly_silent(5.31, peers={"n3"}) == []
    assert live.newly_silent(5.31) == ["n2"]


async def test_redial_skips_the_backoff_once_the_peer_is_back() -> None:
    """A dialer waiting out a long backoff (its peer was down) dials at once when
    told the peer is reachable again (``redial``: its route came up)."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there yet: a's first dial fails
    a = TcpPeerLinks(
        "a", b"secret", {"b": ("127.0.0.1", port)}, backoff_s_min=600.0, backoff_s_max=600.0
    )
    ev_b = Events()
    b = TcpPeerLinks("b", b"secret", {})
    b.register("g", lambda peer, payload: None)
    b.watch("g", ev_b)
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run)
        with trio.fail_after(WAIT_S):  # a's dial failed: it waits out its backoff
            while "b" not in a._redial:
                await trio.testing.wait_all_tasks_blocked(0.01)
        await nursery.start(b.serve, "127.0.0.1", port)
        await nursery.start(b.run)
        a.redial("b")
        await ev_b.wait_count(1)  # long before the 300-600 s backoff
        assert a.is_connected("b")
        nursery.cancel_scope.cancel()
