"""Per-message TTL (``Nats-TTL``) over every StreamStore, and ``store.ttl`` itself.

Expected behaviour is nats-server 2.11+'s (observed on 2.15.1): a message
expires ``ttl`` whole seconds after its timestamp when the stream allows
TTLs; ``max_age`` still applies (the earlier deadline wins); ``never``
exempts a message from ``max_age``; a store whose limits do not honour TTLs
keeps such messages like any other.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st_

from store.api import StreamStore
from store.limits import StreamLimits
from store.memory import MemoryStreamStore
from store.ttl import NEVER, TtlIndex, header_value, msg_ttl_s, parse_ttl_s
from tests.store.conftest import Kit

SEC = 1_000_000_000
TTL_ON = StreamLimits(msg_ttl=True)


def ttl_hdr(v: str, extra: str = "") -> bytes:
    return f"NATS/1.0\r\n{extra}Nats-TTL: {v}\r\n\r\n".encode()


def live(st: StreamStore) -> list[int]:
    out, s = [], 1
    while (m := st.load_next(">", s)) is not None:
        out.append(m.seq)
        s = m.seq + 1
    return out


# ----------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("never", NEVER),
        ("NEVER", NEVER),
        ("Never", NEVER),
        ("1s", 1),
        ("1.9s", 1),
        ("1.5s", 1),
        ("+2s", 2),
        ("1m30s", 90),
        ("1.5h", 5400),
        ("2", 2),
        ("60", 60),
        ("1000ms", 1),
    ],
)
def test_parse_ttl_valid(value: str, want: int) -> None:
    assert parse_ttl_s(value) == want


@pytest.mark.parametrize(
    "value",
    ["", "0", "-1", "-1s", "500ms", "999ms", "bogus", "1e3", "1x", "s", "1..2s", "٣", "0s", "+0"],
)
def test_parse_ttl_invalid(value: str) -> None:
    assert parse_ttl_s(value) is None


def test_header_value_and_msg_ttl() -> None:
    h = ttl_hdr("5s", "X-A: 1\r\n")
    assert header_value(h, b"Nats-TTL") == b"5s"
    assert header_value(h, b"nats-ttl") is None
    assert msg_ttl_s(h) == 5
    assert msg_ttl_s(b"") == 0
    assert msg_ttl_s(ttl_hdr("bogus")) == 0
    assert msg_ttl_s(ttl_hdr("never")) == NEVER
    assert msg_ttl_s(b"NATS/1.0\r\nNats-TTL-X: 5\r\n\r\n") == 0


@given(st_.integers(min_value=1, max_value=10**6))
def test_integer_seconds_round_trip(n: int) -> None:
    assert parse_ttl_s(str(n)) == n
    assert parse_ttl_s(f"{n}s") == n


def test_index_skips_stale_and_dead() -> None:
    ix = TtlIndex()
    alive = {1, 2, 3}
    ix.note(1, ttl_hdr("5s"), 0, honour_ttl=True)
    ix.note(2, ttl_hdr("2s"), 0, honour_ttl=True)
    ix.note(3, ttl_hdr("1s"), 0, honour_ttl=False)  # not honoured: no deadline
    assert ix.next_deadline(alive.__contains__) == 2 * SEC
    alive.discard(2)
    assert ix.next_deadline(alive.__contains__) == 5 * SEC
    ix.note(1, b"", 0, honour_ttl=True)  # re-used sequence replaces the old entry
    assert ix.next_deadline(alive.__contains__) is None
    ix.note(4, ttl_hdr("never"), 0, honour_ttl=True)
    assert ix.is_never(4)
    ix.forget_above(3)
    assert not ix.is_never(4)


# ----------------------------------------------------------------- stores


def test_ttl_expires_without_max_age(kit: Kit) -> None:
    st = kit.open(TTL_ON)
    st.append("a", ttl_hdr("1s"), b"1", 10 * SEC)
    st.append("b", ttl_hdr("3"), b"2", 10 * SEC + 1)
    st.append("c", b"", b"3", 10 * SEC + 2)
    st.append("d", ttl_hdr("1.9s"), b"4", 10 * SEC + 3)
    assert st.next_expiry_ns() == 11 * SEC
    assert st.expiring(11 * SEC - 1) == []
    assert st.expiring(11 * SEC + 3) == [1, 4]
    assert live(st) == [1, 2, 3, 4]  # expiring() is a read
    assert st.expire(11 * SEC + 3) == 2
    assert live(st) == [2, 3]
    assert st.state().num_deleted == 1  # seq 4, below last_seq
    assert st.next_expiry_ns() == 13 * SEC + 1
    st = kit.reopen(st)
    assert st.next_expiry_ns() == 13 * SEC + 1
    assert st.expire(13 * SEC + 1) == 1
    assert live(st) == [3]
    assert st.next_expiry_ns() is None
    st.close()


def test_ttl_not_honoured_without_msg_ttl(kit: Kit) -> None:
    st = kit.open(None)
    st.append("a", ttl_hdr("1s"), b"1", 0)
    assert st.next_expiry_ns() is None
    assert st.expire(100 * SEC) == 0
    # enabling it later (allow_msg_ttl can be turned on) picks the message up
    st.update_limits(TTL_ON)
    assert st.next_expiry_ns() == SEC
    assert st.expire(SEC) == 1
    st.close()


def test_ttl_alongside_max_age_earlier_wins(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_age_ns=2 * SEC, msg_ttl=True))
    st.append("a", ttl_hdr("never"), b"1", 0)
    st.append("b", ttl_hdr("10s"), b"2", 1)
    st.append("c", b"", b"3", 2)
    st.append("d", ttl_hdr("1s"), b"4", 3)
    assert st.next_expiry_ns() == SEC + 3
    assert st.expire(SEC + 3) == 1
    assert live(st) == [1, 2, 3]
    # max_age removes the 10s message and the plain one; never stays
    assert st.next_expiry_ns() == 2 * SEC + 1
    assert st.expiring(2 * SEC + 2) == [2, 3]
    assert st.expire(2 * SEC + 2) == 2
    assert live(st) == [1]
    assert st.next_expiry_ns() is None
    st = kit.reopen(st)
    assert st.next_expiry_ns() is None
    assert st.expire(10**6 * SEC) == 0
    assert live(st) == [1]
    st.close()


def test_never_survives_max_age_without_msg_ttl(kit: Kit) -> None:
    # a mirror without allow_msg_ttl: TTLs are not honoured, "never" still is
    st = kit.open(StreamLimits(max_age_ns=SEC))
    st.append("a", ttl_hdr("never"), b"1", 0)
    st.append("b", ttl_hdr("1s"), b"2", 5)
    st = kit.reopen(st)
    assert st.next_expiry_ns() == SEC + 5
    assert st.expire(SEC + 5) == 1
    assert live(st) == [1]
    st.close()


def test_ttl_survives_deletes_purge_and_truncate(kit: Kit) -> None:
    st = kit.open(TTL_ON)
    st.append("a", ttl_hdr("5s"), b"1", 0)
    st.append("a", ttl_hdr("2s"), b"2", 0)
    st.append("b", b"", b"3", 0)
    st.remove(2)
    assert st.next_expiry_ns() == 5 * SEC
    st.truncate(1)
    # seq 2 is re-used by a message without TTL: the old deadline is gone
    st.append("a", b"", b"2'", 1)
    assert st.next_expiry_ns() == 5 * SEC
    assert st.expiring(5 * SEC) == [1]
    st.purge()
    assert st.next_expiry_ns() is None
    st.close()


@pytest.mark.parametrize("target", ["same", "memory"])
def test_ttl_after_snapshot_restore(kit: Kit, target: str) -> None:
    st = kit.open(TTL_ON)
    st.append("a", ttl_hdr("3s"), b"1", 0)
    st.append("b", b"", b"2", 0)
    buf = io.BytesIO()
    st.snapshot(buf)
    dst: StreamStore = st if target == "same" else MemoryStreamStore(TTL_ON)
    if dst is st:
        st.purge()
    dst.restore(io.BytesIO(buf.getvalue()))
    assert dst.next_expiry_ns() == 3 * SEC
    assert dst.expire(3 * SEC) == 1
    assert live(dst) == [2]
    st.close()
    dst.close()
