"""``StreamStore.skip`` (mirror gaps) over every store implementation.

A mirror keeps its origin's sequence numbers; ``skip`` moves ``last_seq``
forward without a message, as nats-server's ``SkipMsgs``.  Every expectation
here also holds after a close and reopen of the durable stores.
"""

from __future__ import annotations

import io

import pytest

from store.errors import MsgNotFound, StoreEOF
from store.memory import MemoryStreamStore
from tests.store.conftest import Kit


def _view(st: object) -> tuple[int, int, int, int, int]:
    s = st.state()  # type: ignore[attr-defined]
    return s.msgs, s.first_seq, s.last_seq, s.num_deleted, s.last_ts


def test_skip_on_fresh_store_moves_first_and_last(kit: Kit) -> None:
    st = kit.open(None)
    st.skip(9)
    assert _view(st) == (0, 10, 9, 0, 0)
    st.sync()
    st = kit.reopen(st)
    assert _view(st) == (0, 10, 9, 0, 0)
    assert st.append("a", b"", b"x", 50) == (10, 50)
    st = kit.reopen(st)
    assert _view(st) == (1, 10, 10, 0, 50)
    assert st.load(10).payload == b"x"


def test_skip_then_append_leaves_deleted_gap(kit: Kit) -> None:
    st = kit.open(None)
    st.append("a", b"", b"1", 1)
    st.append("b", b"", b"2", 2)
    st.skip(5)
    assert st.append("a", b"", b"6", 6) == (6, 6)
    st.skip(6)  # no-op: not beyond last_seq
    st.skip(3)
    assert st.append("b", b"", b"7", 7) == (7, 7)
    expect = (4, 1, 7, 3, 7)
    assert _view(st) == expect
    assert st.state(deleted_details=True).deleted == (3, 4, 5)
    for seq in (3, 4, 5):
        with pytest.raises(MsgNotFound):
            st.load(seq)
    nxt = st.load_next(">", 3)
    assert nxt is not None and nxt.seq == 6
    assert st.load_next("b", 3) is not None
    assert st.load_last("a").seq == 6
    st = kit.reopen(st)
    assert _view(st) == expect
    assert st.state(deleted_details=True).deleted == (3, 4, 5)
    assert [st.load(s).payload for s in (1, 2, 6, 7)] == [b"1", b"2", b"6", b"7"]


def test_trailing_skip_is_durable_after_sync(kit: Kit) -> None:
    st = kit.open(None)
    for i in range(3):
        st.append("a", b"", b"m", 10 + i)
    st.skip(8)
    assert _view(st) == (3, 1, 8, 5, 12)
    assert st.state(deleted_details=True).deleted == (4, 5, 6, 7, 8)
    with pytest.raises(MsgNotFound):
        st.load(8)
    with pytest.raises(StoreEOF):
        st.load(9)
    st.sync()
    st = kit.reopen(st)
    assert _view(st) == (3, 1, 8, 5, 12)
    assert st.append("a", b"", b"n", 20) == (9, 20)
    st = kit.reopen(st)
    assert _view(st) == (4, 1, 9, 5, 20)


def test_skip_after_purge_and_repeated_skips(kit: Kit) -> None:
    st = kit.open(None)
    for i in range(4):
        st.append("a", b"", b"m", 1 + i)
    assert st.purge() == 4
    st.skip(6)
    st.skip(10)
    assert _view(st) == (0, 11, 10, 0, 4)
    st.sync()
    st = kit.reopen(st)
    assert _view(st) == (0, 11, 10, 0, 4)
    assert st.append("z", b"", b"q", 9) == (11, 9)


def test_truncate_into_a_skipped_range(kit: Kit) -> None:
    st = kit.open(None)
    st.append("a", b"", b"1", 1)
    st.skip(5)
    st.append("a", b"", b"6", 6)
    st.truncate(4)
    assert _view(st) == (1, 1, 4, 3, 1)
    st = kit.reopen(st)
    assert _view(st) == (1, 1, 4, 3, 1)
    assert st.append("a", b"", b"5", 7) == (5, 7)


def test_snapshot_keeps_skipped_bounds(kit: Kit) -> None:
    st = kit.open(None)
    st.append("a", b"", b"1", 1)
    st.skip(4)
    st.append("b", b"", b"5", 5)
    st.skip(7)
    buf = io.BytesIO()
    st.snapshot(buf)
    other = MemoryStreamStore()
    other.restore(io.BytesIO(buf.getvalue()))
    assert (other.state().msgs, other.state().first_seq, other.state().last_seq) == (2, 1, 7)
    assert other.state().num_deleted == 5
    st.append("c", b"", b"later", 9)
    st.restore(io.BytesIO(buf.getvalue()))
    assert _view(st)[:4] == (2, 1, 7, 5)
    st = kit.reopen(st)
    assert _view(st)[:4] == (2, 1, 7, 5)
    assert st.append("c", b"", b"8", 8) == (8, 8)
