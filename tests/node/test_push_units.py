"""Pure pieces of push delivery: sublist interest watches and the rate-limit bucket."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from node.jetstream.push import TokenBucket
from node.sublist import Sublist


@dataclass(eq=False)
class Sub:
    subject: bytes
    queue: bytes | None = None


def test_watch_fires_only_for_the_exact_subject() -> None:
    sl: Sublist[Sub] = Sublist()
    calls: list[str] = []
    sl.watch(b"d.p", lambda: calls.append("p"))
    wild, exact, other = Sub(b"d.>"), Sub(b"d.p"), Sub(b"d.q")
    sl.insert(wild)
    sl.insert(other)
    assert calls == []  # wildcards and other subjects never fire
    sl.insert(exact)
    assert calls == ["p"]
    sl.remove(exact)
    assert calls == ["p", "p"]
    sl.remove(Sub(b"d.p"))  # not present: no removal, no call
    assert calls == ["p", "p"]


def test_unwatch_stops_the_calls() -> None:
    sl: Sublist[Sub] = Sublist()
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)

    sl.watch(b"x", fn)
    sl.unwatch(b"x", fn)
    sl.unwatch(b"x", fn)  # twice is harmless
    sl.insert(Sub(b"x"))
    assert calls == []


def test_has_exact_plain_and_queue() -> None:
    sl: Sublist[Sub] = Sublist()
    sl.insert(Sub(b"d.>"))
    sl.insert(Sub(b"d.*", b"g"))
    assert not sl.has_exact(b"d.g", None)  # covered by wildcards only
    assert not sl.has_exact(b"d.g", b"g")
    sl.insert(Sub(b"d.g", b"h"))
    assert not sl.has_exact(b"d.g", None)  # a queue member is not a plain subscriber
    assert not sl.has_exact(b"d.g", b"g")
    sl.insert(Sub(b"d.g", b"g"))
    assert sl.has_exact(b"d.g", b"g")
    sl.insert(Sub(b"d.g"))
    assert sl.has_exact(b"d.g", None)


def test_token_bucket_burst_then_rate() -> None:
    b = TokenBucket(rate=1000.0, burst=500, now=0.0)
    assert b.reserve(400, 0.0) == 0.0  # within the burst
    assert b.reserve(300, 0.0) == pytest.approx(0.2)  # 200 bytes of debt at 1000/s
    assert b.reserve(100, 0.2) == pytest.approx(0.1)  # the debt was paid, this one waits
    assert b.reserve(0, 10.0) == 0.0  # refills to the burst, never beyond
    assert b.tokens == 500
