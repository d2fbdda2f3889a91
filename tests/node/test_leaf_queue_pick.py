"""A queue group's member as nats-server picks it at a hub: a local member whenever the
group has one (a leaf link is a fallback), and among leaf links only, by the weight each
peer announced (``LS+ subject queue N``).  The router over fakes, seeded randomness."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from node.jsdelivery import LEAF_LINK, pick_member
from node.routefwd import route_or_local
from node.router import Router
from node.session import Subscription
from node.sublist import Sublist


class FakeLink:
    """A hub-side leaf link as the router sees it."""

    deliver_filter = LEAF_LINK
    internal = False
    solicited = False
    origin = b""

    def __init__(self, name: str) -> None:
        self.name = name
        self.weights: dict[Any, int] = {}
        self.got = 0

    def send_msg(self, *args: Any) -> None:
        self.got += 1


def _link(router: Router, name: str, weight: int) -> FakeLink:
    link = FakeLink(name)
    link.weights[(b"q", b"g")] = weight
    router.sublist.insert(Subscription(link, b"q", b"g", b""))  # type: ignore[arg-type]
    return link


def test_leaf_links_share_a_group_by_their_weights() -> None:
    router = Router(Sublist(), random.Random(7))
    a, b = _link(router, "a", 3), _link(router, "b", 1)
    for _ in range(4000):
        router.publish(None, b"q", None, None, b"x", None, None)
    assert a.got + b.got == 4000
    assert 2800 < a.got < 3200  # 3:1 (seeded: the same counts every run)


def test_a_local_member_is_preferred_to_leaf_links() -> None:
    rng = random.Random(3)
    local = Subscription(object(), b"q", b"g", b"1")  # type: ignore[arg-type]
    local.client = type("C", (), {"deliver_filter": None})()
    links = []
    for name, w in (("a", 5), ("b", 1)):
        link = FakeLink(name)
        link.weights[(b"q", b"g")] = w
        links.append(Subscription(link, b"q", b"g", b""))  # type: ignore[arg-type]
    group = [links[0], local, links[1]]
    assert Counter(id(pick_member(group, rng)) for _ in range(300)) == {id(local): 300}
    # two locals share evenly; a group without leaf links is one uniform draw
    other = Subscription(object(), b"q", b"g", b"2")  # type: ignore[arg-type]
    other.client = local.client
    picks = Counter(id(pick_member([links[0], local, other], rng)) for _ in range(2000))
    assert set(picks) == {id(local), id(other)} and 850 < picks[id(local)] < 1150


class _RouteSub:
    """A route's queue interest as ``route_or_local`` sees it."""

    def __init__(self, name: str, weight: int, origin: bytes = b"") -> None:
        self.route, self.weight, self.origin = name, weight, origin


def test_a_route_member_comes_before_leaf_links() -> None:
    """A group with local leaf links and a route's own member: the route's member,
    always; behind a route only leaf-origin members: drawn with the local links by
    weight; a local member other than a link: always local."""
    rng = random.Random(5)
    link = FakeLink("a")
    link.weights[(b"q", b"g")] = 3
    links = [Subscription(link, b"q", b"g", b"")]  # type: ignore[arg-type]
    plain, behind = _RouteSub("r1", 2), _RouteSub("r2", 1, origin=b"leafc")
    picks = Counter(
        getattr(route_or_local([plain, behind], links, rng), "route", None) for _ in range(400)
    )
    assert picks == {"r1": 400}
    picks = Counter(
        getattr(route_or_local([behind], links, rng), "route", None) for _ in range(4000)
    )
    assert set(picks) == {None, "r2"} and 2800 < picks[None] < 3200  # 3:1 by weight
    local = Subscription(object(), b"q", b"g", b"1")  # type: ignore[arg-type]
    local.client = type("C", (), {"deliver_filter": None})()
    assert {route_or_local([plain], [local, *links], rng) for _ in range(100)} == {None}
    assert route_or_local([behind], None, rng) is behind
