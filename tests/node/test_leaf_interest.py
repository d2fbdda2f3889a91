"""Leaf interest bookkeeping (``node.leaf.LeafNodes.interest``/``snapshot``) over fakes.

Each link is told the account's interest minus its own: LS+ when its view of a (subject,
queue) crosses from zero, LS- when it falls back; a link never hears of its own interest
alone.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from node.configtypes import LeafConfig, ServerConfig
from node.leaf import LeafConn
from node.leafnodes import LeafNodes


class FakeLink:
    def __init__(self, acc: Any, jetstream: bool = False, solicited: bool = False) -> None:
        self.account = acc
        self.solicited = solicited
        self.origin = b""
        self.subs: dict[Any, Any] = {}
        self.sent: dict[Any, int] = {}
        self.weights: dict[Any, int] = {}
        self.remote_js = jetstream
        self.lines: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.lines.append(data)

    announce = LeafConn.announce
    deny_js_api = LeafConn.deny_js_api


def _setup(js: bool = False) -> tuple[LeafNodes, Any]:
    cfg = ServerConfig()
    cfg.leafnodes = LeafConfig()
    server = SimpleNamespace(cfg=cfg)
    acc = SimpleNamespace(
        leaf_totals={},
        leaf_local_totals={},
        leaf_origin_totals={},
        leafs=[],
        lds=b"$LDS.abc",
        jetstream=js,
    )
    return LeafNodes(server, random.Random(1)), acc  # type: ignore[arg-type]


def test_a_link_hears_of_others_interest_not_its_own() -> None:
    ln, acc = _setup()
    a, b = FakeLink(acc), FakeLink(acc)
    acc.leafs += [a, b]
    # a local client subscribes foo: both links hear of it once
    ln.interest(acc, b"foo", None, 1)
    ln.interest(acc, b"foo", None, 1)
    assert a.lines == [b"LS+ foo\r\n"] and b.lines == [b"LS+ foo\r\n"]
    # link a's peer subscribes bar: only b hears of it
    a.subs[(b"bar", None)] = object()
    ln.interest(acc, b"bar", None, 1)
    assert a.lines == [b"LS+ foo\r\n"] and b.lines[-1] == b"LS+ bar\r\n"
    # the two local foo subscriptions go: LS- on the last one only
    ln.interest(acc, b"foo", None, -1)
    assert a.lines[-1] == b"LS+ foo\r\n"
    ln.interest(acc, b"foo", None, -1)
    assert a.lines[-1] == b"LS- foo\r\n" and b.lines[-1] == b"LS- foo\r\n"
    # a's bar goes: b hears LS-, a never heard of it
    del a.subs[(b"bar", None)]
    ln.interest(acc, b"bar", None, -1)
    assert b.lines[-1] == b"LS- bar\r\n" and b"LS- bar\r\n" not in a.lines


def test_a_spoke_link_hears_of_local_interest_only() -> None:
    """A link this server solicited (a leaf cluster's node: each node has its own) is told
    local interest only, not a route's nor another spoke link's; a hub-side link all."""
    ln, acc = _setup()
    spoke, hub_side = FakeLink(acc, solicited=True), FakeLink(acc)
    acc.leafs += [spoke, hub_side]
    ln.interest(acc, b"routed", None, 1, local=False)
    assert spoke.lines == [] and hub_side.lines == [b"LS+ routed\r\n"]
    ln.interest(acc, b"mine", None, 1)
    assert spoke.lines == [b"LS+ mine\r\n"]
    ln.interest(acc, b"routed", None, 1)  # a local subscription on it too
    assert spoke.lines[-1] == b"LS+ routed\r\n"
    late = FakeLink(acc, solicited=True)
    acc.leafs.append(late)
    ln.interest(acc, b"other", None, 1, local=False)
    ln.snapshot(late)
    assert late.lines == [b"LS+ $LDS.abc\r\n", b"LS+ mine\r\n", b"LS+ routed\r\n"]
    ln.interest(acc, b"mine", None, -1)
    assert spoke.lines[-1] == b"LS- mine\r\n" and hub_side.lines[-1] == b"LS- mine\r\n"


def test_queue_groups_and_the_snapshot() -> None:
    ln, acc = _setup()
    ln.interest(acc, b"q.x", b"work", 1)
    ln.interest(acc, b"p", None, 1)
    link = FakeLink(acc)
    acc.leafs.append(link)
    ln.snapshot(link)
    assert link.lines == [b"LS+ $LDS.abc\r\n", b"LS+ q.x work 1\r\n", b"LS+ p\r\n"]
    ln.interest(acc, b"q.x", b"work", -1)
    assert link.lines[-1] == b"LS- q.x work\r\n"


def test_queue_weights_are_the_group_members_and_follow_them() -> None:
    """As nats-server: a queue group's LS+ carries its members on this side (local ones one
    each, a route's or another link's at their weight), sent again at each change; a link's
    own members are not counted in what it hears."""
    ln, acc = _setup()
    a, b = FakeLink(acc), FakeLink(acc)
    acc.leafs += [a, b]
    ln.interest(acc, b"q", b"g", 1)
    ln.interest(acc, b"q", b"g", 1)
    assert a.lines == [b"LS+ q g 1\r\n", b"LS+ q g 2\r\n"]
    ln.interest(acc, b"q", b"g", 3, local=False)  # a route's group of weight 3
    assert a.lines[-1] == b"LS+ q g 5\r\n"
    # link a's peer has 4 members: b hears 9, a still 5
    a.subs[(b"q", b"g")] = object()
    a.weights[(b"q", b"g")] = 4
    ln.interest(acc, b"q", b"g", 4)
    assert b.lines[-1] == b"LS+ q g 9\r\n" and a.lines[-1] == b"LS+ q g 5\r\n"
    late = FakeLink(acc)
    acc.leafs.append(late)
    ln.snapshot(late)
    assert late.lines[-1] == b"LS+ q g 9\r\n"
    ln.interest(acc, b"q", b"g", -3, local=False)
    ln.interest(acc, b"q", b"g", -1)
    ln.interest(acc, b"q", b"g", -1)
    assert a.lines[-1] == b"LS- q g\r\n" and b.lines[-1] == b"LS+ q g 4\r\n"


def test_js_api_stays_local_when_both_sides_run_jetstream() -> None:
    ln, acc = _setup(js=True)
    both, plain = FakeLink(acc, jetstream=True), FakeLink(acc, jetstream=False)
    acc.leafs += [both, plain]
    ln.interest(acc, b"$JS.API.>", None, 1)
    ln.interest(acc, b"$JS.hub.API.>", None, 1)
    assert both.lines == [b"LS+ $JS.hub.API.>\r\n"]
    assert plain.lines == [b"LS+ $JS.API.>\r\n", b"LS+ $JS.hub.API.>\r\n"]


def test_an_account_without_jetstream_keeps_its_api_answers() -> None:
    ln, acc = _setup(js=False)
    link = FakeLink(acc, jetstream=False)
    acc.leafs.append(link)
    ln.interest(acc, b"$JS.API.>", None, 1)
    ln.interest(acc, b"$JS.hub.API.>", None, 1)
    ln.interest(acc, b"$JS.ACK.S.C.*.*.*.*.*", None, 1)
    assert link.lines == [b"LS+ $JS.ACK.S.C.*.*.*.*.*\r\n"]


def test_nothing_counted_without_a_leafnodes_block() -> None:
    server = SimpleNamespace(cfg=ServerConfig())
    ln = LeafNodes(server, random.Random(1))  # type: ignore[arg-type]
    acc = SimpleNamespace(leaf_totals={}, leafs=[])
    ln.interest(acc, b"foo", None, 1)  # type: ignore[arg-type]
    assert acc.leaf_totals == {}
