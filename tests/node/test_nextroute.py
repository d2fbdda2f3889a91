"""Units of ``node.nextroute``: which subscriptions can see a pull, and the
pulls a server remembers having sent to a consumer leader's route."""

from __future__ import annotations

import json

import pytest

from node.nextroute import (
    FORWARDED_PER_ROUTE_MAX,
    NO_EXPIRES_KEEP_S,
    ForwardedPulls,
    NextWatchers,
    can_see_next,
    pull_expiry,
)


@pytest.mark.parametrize(
    ("subject", "sees"),
    [
        (b">", True),
        (b"$JS.>", True),
        (b"$JS.API.>", True),
        (b"$JS.API.CONSUMER.>", True),
        (b"$JS.API.CONSUMER.MSG.NEXT.>", True),
        (b"$JS.API.CONSUMER.MSG.NEXT.S.C", True),
        (b"$JS.API.CONSUMER.MSG.NEXT.*.*", True),
        (b"*.API.CONSUMER.*.NEXT.S.*", True),
        (b"$JS.API.CONSUMER.MSG.NEXT.S", False),
        (b"$JS.API.CONSUMER.MSG.NEXT.S.C.X", False),
        (b"$JS.API.STREAM.>", False),
        (b"$JS.API.*", False),
        (b"foo.>", False),
        (b"_INBOX.x", False),
    ],
)
def test_can_see_next(subject: bytes, sees: bool) -> None:
    assert can_see_next(subject) is sees


def test_watchers_change_at_zero_only() -> None:
    changes: list[bool] = []
    w = NextWatchers(changes.append)
    w.added(b"foo")
    w.added(b"$JS.API.>")
    w.added(b">")
    w.removed(b"$JS.API.>")
    w.removed(b"foo")
    assert changes == [True]
    w.removed(b">")
    w.removed(b">")  # never below zero
    assert changes == [True, False]


def test_pull_expiry() -> None:
    now = 100.0
    assert pull_expiry(json.dumps({"batch": 5, "expires": 2_000_000_000}).encode(), now) == 102.0
    assert pull_expiry(b"", now) == now + NO_EXPIRES_KEEP_S
    assert pull_expiry(b"10", now) == now + NO_EXPIRES_KEEP_S
    assert pull_expiry(b'{"batch": 5}', now) == now + NO_EXPIRES_KEEP_S
    assert pull_expiry(b'{"batch": 5, "no_wait": true}', now) is None
    assert pull_expiry(b"{not json", now) is None


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _req(expires_s: float) -> bytes:
    return json.dumps({"batch": 1, "expires": int(expires_s * 1e9)}).encode()


def test_forwarded_pulls_answer_the_unexpired_of_a_lost_route() -> None:
    clock = Clock()
    fp = ForwardedPulls(clock)
    a, b = object(), object()
    fp.note(a, b"r1", _req(1))
    fp.note(a, b"r2", _req(10))
    fp.note(b, b"r3", _req(10))
    fp.note(a, b"nw", b'{"no_wait": true}')  # answered at once: not kept
    clock.t = 5.0
    assert fp.route_lost(a) == [b"r2"]
    assert fp.route_lost(a) == []  # forgotten
    assert fp.route_lost(b) == [b"r3"]
    assert fp.by_route == {}


def test_forwarded_pulls_newest_request_per_reply_and_bounded() -> None:
    clock = Clock()
    fp = ForwardedPulls(clock)
    route = object()
    fp.note(route, b"inbox", _req(1))
    fp.note(route, b"inbox", _req(30))  # the same inbox's next fetch replaces it
    clock.t = 2.0
    assert fp.route_lost(route) == [b"inbox"]
    for i in range(FORWARDED_PER_ROUTE_MAX + 10):
        fp.note(route, b"r%d" % i, _req(60))
    waiting = fp.by_route[route]
    assert len(waiting) == FORWARDED_PER_ROUTE_MAX
    assert next(iter(waiting)) == b"r10"  # the oldest were forgotten
    clock.t = 100.0
    fp.note(route, b"late", _req(1))  # the expired ones go as new ones come
    assert list(fp.by_route[route]) == [b"late"]
