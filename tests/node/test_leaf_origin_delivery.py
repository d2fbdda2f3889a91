"""JetStream deliveries and leaf clusters at the router: a delivery that came in on a
hub-side link crosses routes as ``LMSG <origin>`` (never to a route whose interest is that
cluster's own), and a routed one with an origin never goes out to links to that cluster."""

from __future__ import annotations

import random
from typing import Any

from node.jsdelivery import LEAF_LINK
from node.route import RemoteSub
from node.router import Router
from node.session import Subscription
from node.sublist import Sublist

ACK = b"$JS.ACK.S.C.1.2.3.4.0"


class FakeRoute:
    def __init__(self, lnoc: bool = True) -> None:
        self.lnoc = lnoc
        self.sent: list[bytes] = []
        self.out_msgs = self.out_bytes = 0

    def send(self, data: bytes) -> None:
        self.sent.append(data)


class FakeLink:
    """A leaf link as the router sees it (``LEAF_LINK``, its cluster, spoke or not)."""

    deliver_filter = LEAF_LINK
    internal = False
    solicited = False

    def __init__(self, origin: bytes) -> None:
        self.origin = origin
        self.sent: list[tuple[Any, ...]] = []

    def send_msg(self, *args: Any) -> None:
        self.sent.append(args)


def _remote(router: Router, route: FakeRoute, subject: bytes, origin: bytes = b"") -> None:
    rs = RemoteSub(route, subject, None, 1, router)  # type: ignore[arg-type]
    rs.origin = origin
    router.route_sublist.insert(rs)


def test_a_leaf_delivery_crosses_routes_with_its_origin() -> None:
    router = Router(Sublist(), random.Random(1))
    theirs, other = FakeRoute(), FakeRoute()
    _remote(router, theirs, b"dl", b"leafc")  # the same leaf cluster's interest, on a peer
    _remote(router, other, b"dl")
    src = FakeLink(b"leafc")
    assert router.deliver_as(b"dl", b"s.1", ACK, None, b"x", True, src) == 1
    assert theirs.sent == []
    assert other.sent == [b"LMSG leafc $G dl " + ACK + b"@s.1 0 1\r\nx\r\n"]


def test_a_peer_without_lnoc_gets_the_plain_forms() -> None:
    """A route peer that did not announce ``lnoc`` gets a leaf cluster's message as
    ``RMSG``/``HMSG`` (nats-server's rule), the others ``LMSG <origin>``."""
    router = Router(Sublist(), random.Random(1))
    old, new = FakeRoute(lnoc=False), FakeRoute()
    _remote(router, old, b"dl")
    _remote(router, new, b"dl")
    src = FakeLink(b"leafc")
    assert router.deliver_as(b"dl", b"s.1", ACK, None, b"x", True, src) == 2
    assert old.sent == [b"RMSG $G dl " + ACK + b"@s.1 1\r\nx\r\n"]
    assert new.sent == [b"LMSG leafc $G dl " + ACK + b"@s.1 0 1\r\nx\r\n"]
    old.sent.clear()
    assert router.deliver_as(b"dl", b"s.1", ACK, b"NATS/1.0\r\n\r\n", b"x", True, src) == 2
    assert old.sent == [b"HMSG $G dl " + ACK + b"@s.1 12 13\r\nNATS/1.0\r\n\r\nx\r\n"]


def test_a_routed_delivery_skips_the_links_to_its_origin() -> None:
    router = Router(Sublist(), random.Random(1))
    same, another = FakeLink(b"leafc"), FakeLink(b"leafd")
    for link in (same, another):
        router.sublist.insert(Subscription(link, b"dl", None, b"1"))  # type: ignore[arg-type]
    router.publish(None, b"dl", ACK + b"@s.1", None, b"x", (), None, b"leafc")
    assert same.sent == []
    assert another.sent == [(b"dl", ACK + b"@s.1", None, b"x", [])]
