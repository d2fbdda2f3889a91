"""``MetaLayer.online_for``: a young server waits (bounded) for peer links that lag behind
the meta election before it places a create short of peers; an old one does not wait."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from node.jetstream.meta import STARTUP_PLACEMENT_GRACE_S, MetaLayer


class FakeLinks:
    def __init__(self) -> None:
        self.up: set[str] = set()
        self._events: dict[str, trio.Event] = {}

    def is_connected(self, peer: str) -> bool:
        return peer in self.up

    async def wait_connected(self, peer: str) -> None:
        while peer not in self.up:
            await self._events.setdefault(peer, trio.Event()).wait()

    def connect(self, peer: str) -> None:
        self.up.add(peer)
        self._events.pop(peer, trio.Event()).set()


class FakeMeta:
    online_for = MetaLayer.online_for
    online = MetaLayer.online

    def __init__(self) -> None:
        self.name = "n1"
        self.known: dict[str, Any] = {"n2": None, "n3": None}
        self.links = FakeLinks()
        self._born = trio.current_time()


async def test_a_young_server_waits_for_a_lagging_link(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    meta = FakeMeta()
    meta.links.connect("n2")
    got: list[list[str]] = []

    async def place() -> None:
        got.append(await meta.online_for(3))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(place)
        await trio.sleep(1.0)
        assert not got  # waiting for n3's link
        meta.links.connect("n3")
    assert sorted(got[0]) == ["n1", "n2", "n3"]
    assert trio.current_time() - meta._born < 2.0


async def test_the_wait_is_bounded_and_only_while_young(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    meta = FakeMeta()
    meta.links.connect("n2")
    assert sorted(await meta.online_for(2)) == ["n1", "n2"]  # enough: no wait
    t0 = trio.current_time()
    assert sorted(await meta.online_for(3)) == ["n1", "n2"]  # n3 never comes
    assert trio.current_time() - t0 <= STARTUP_PLACEMENT_GRACE_S
    t1 = trio.current_time()
    assert sorted(await meta.online_for(3)) == ["n1", "n2"]  # old now: no wait
    assert trio.current_time() == t1
    assert await meta.online_for(4) == ["n1", "n2"]  # more than known: no wait
