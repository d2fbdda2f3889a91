"""One conformance suite over every StreamStore (memory, file, file+lz4, tiny segments).

Expected values follow nats-server's memstore/filestore semantics.
"""

from __future__ import annotations

import io

import pytest

from store.api import StoredMsg, StreamStore
from store.errors import (
    MaxBytes,
    MaxMsgs,
    MaxMsgSize,
    MaxMsgsPerSubject,
    MsgNotFound,
    SequenceMismatch,
    SnapshotError,
    StoreClosed,
    StoreEOF,
)
from store.limits import Discard, StreamLimits, msg_size
from store.memory import MemoryStreamStore
from tests.store.conftest import Kit

HDR = b"NATS/1.0\r\nX: 1\r\n\r\n"


def fill(st: StreamStore, n: int, subjects: tuple[str, ...] = ("a",), start_ts: int = 1) -> None:
    for i in range(n):
        subj = subjects[i % len(subjects)]
        st.append(subj, HDR if i % 3 == 0 else b"", f"m{i}".encode(), start_ts + i)


def seqs(st: StreamStore, filters: str | list[str] = ">") -> list[int]:
    out = []
    s = 1
    while (m := st.load_next(filters, s)) is not None:
        out.append(m.seq)
        s = m.seq + 1
    return out


# ----------------------------------------------------------------- basics


def test_append_and_load(kit: Kit) -> None:
    st = kit.open(None)
    assert st.state().first_seq == 0 and st.state().last_seq == 0
    assert st.append("foo", HDR, b"hello", 100) == (1, 100)
    assert st.append("bar", b"", b"", 200, seq=2) == (2, 200)
    m = st.load(1)
    assert m == StoredMsg(1, "foo", HDR, b"hello", 100)
    assert st.load(2).payload == b""
    with pytest.raises(StoreEOF):
        st.load(3)
    with pytest.raises(SequenceMismatch):
        st.append("foo", b"", b"x", 300, seq=5)
    s = st.state()
    assert (s.msgs, s.first_seq, s.first_ts, s.last_seq, s.last_ts) == (2, 1, 100, 2, 200)
    assert s.num_subjects == 2
    expect = msg_size("foo", HDR, b"hello", kit.accounting) + msg_size(
        "bar", b"", b"", kit.accounting
    )
    assert s.bytes == expect == st.stored_bytes()
    st = kit.reopen(st)
    assert st.load(1) == m
    assert st.state() == s and st.stored_bytes() == expect
    st.close()
    with pytest.raises(StoreClosed):
        st.load(1)
    with pytest.raises(StoreClosed):
        st.stored_bytes()


def test_file_byte_accounting_matches_nats() -> None:
    from store.limits import Accounting

    # nats-server: 22 + subj + payload + 8, plus 4 + hdr when headers present
    assert msg_size("orders.1", b"", b"hello", Accounting.FILE) == 22 + 8 + 5 + 8
    assert msg_size("orders.1", HDR, b"hello", Accounting.FILE) == 22 + 8 + 4 + len(HDR) + 5 + 8
    assert msg_size("orders.1", HDR, b"hello", Accounting.MEMORY) == 8 + len(HDR) + 5 + 16


def test_load_next_filters(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 12, ("a.x", "a.y", "b.x", "b.y.z"))
    assert seqs(st, ">") == list(range(1, 13))
    assert seqs(st, "") == list(range(1, 13))
    assert seqs(st, "a.x") == [1, 5, 9]
    assert seqs(st, "a.*") == [1, 2, 5, 6, 9, 10]
    assert seqs(st, "*.x") == [1, 3, 5, 7, 9, 11]
    assert seqs(st, "b.>") == [3, 4, 7, 8, 11, 12]
    assert seqs(st, ["a.x", "b.y.z"]) == [1, 4, 5, 8, 9, 12]
    assert seqs(st, ["a.*", "*.x"]) == [1, 2, 3, 5, 6, 7, 9, 10, 11]
    assert seqs(st, "nope") == []
    m = st.load_next("a.y", 3)
    assert m is not None and m.seq == 6
    assert st.load_next(">", 13) is None
    st.remove(5)
    m = st.load_next("a.x", 2)
    assert m is not None and m.seq == 9
    st = kit.reopen(st)
    assert seqs(st, "a.x") == [1, 9]
    st.close()


def test_load_last(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10, ("k.a", "k.b", "other"))
    assert st.load_last("k.a").seq == 10
    assert st.load_last("k.b").seq == 8
    assert st.load_last("k.*").seq == 10
    assert st.load_last(">").seq == 10
    assert st.load_last(["other", "k.b"]).seq == 9
    with pytest.raises(MsgNotFound):
        st.load_last("zzz")
    st.remove(10)
    assert st.load_last("k.a").seq == 7
    assert st.load_last(">").seq == 9
    st = kit.reopen(st)
    assert st.load_last("k.a").seq == 7
    st.close()


# ----------------------------------------------------------------- limits


def test_max_msgs_discard_old(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_msgs=5))
    fill(st, 12)
    s = st.state()
    assert (s.msgs, s.first_seq, s.last_seq) == (5, 8, 12)
    st = kit.reopen(st)
    assert st.state() == s
    st.close()


def test_max_msgs_discard_new(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_msgs=3, discard=Discard.NEW))
    fill(st, 3)
    with pytest.raises(MaxMsgs) as ei:
        st.append("a", b"", b"x", 99)
    assert ei.value.err_code == 10077 and str(ei.value) == "maximum messages exceeded"
    assert st.state().msgs == 3 and st.state().last_seq == 3
    st.close()


def test_max_bytes(kit: Kit) -> None:
    one = msg_size("a", b"", b"0123456789", kit.accounting)
    st = kit.open(StreamLimits(max_bytes=one * 3))
    for i in range(5):
        st.append("a", b"", b"0123456789", i)
    s = st.state()
    assert (s.msgs, s.bytes, s.first_seq) == (3, one * 3, 3)
    st.update_limits(StreamLimits(max_bytes=one * 3, discard=Discard.NEW))
    with pytest.raises(MaxBytes):
        st.append("a", b"", b"0123456789", 9)
    st.close()


def test_single_message_over_max_bytes_is_dropped_under_discard_old(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_bytes=10))
    assert st.append("a", b"", b"x" * 100, 1) == (1, 1)
    s = st.state()
    assert (s.msgs, s.last_seq, s.first_seq) == (0, 1, 2)
    st.close()


def test_max_msgs_per_subject(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_msgs_per_subject=2))
    for i in range(6):
        st.append("k.a" if i % 3 else "k.b", b"", b"v", i)
    # k.b: 1, 4 ; k.a: 2,3,5,6 -> keeps 5, 6
    assert seqs(st) == [1, 4, 5, 6]
    ss = st.subject_state()
    assert ss["k.a"].msgs == 2 and ss["k.a"].first_seq == 5 and ss["k.a"].last_seq == 6
    assert ss["k.b"].first_seq == 1 and ss["k.b"].last_seq == 4
    st = kit.reopen(st)
    assert st.subject_state() == ss
    st.close()


def test_discard_new_per_subject(kit: Kit) -> None:
    st = kit.open(
        StreamLimits(max_msgs_per_subject=1, discard=Discard.NEW, discard_new_per_subject=True)
    )
    st.append("k", b"", b"1", 1)
    with pytest.raises(MaxMsgsPerSubject):
        st.append("k", b"", b"2", 2)
    st.append("j", b"", b"1", 3)
    st.close()


def test_discard_new_full_stream_allows_subject_replacement(kit: Kit) -> None:
    # nats-server: at max_msgs but the subject is at its per-subject limit ->
    # storing replaces that subject's oldest, so no MaxMsgs.
    st = kit.open(StreamLimits(max_msgs=2, max_msgs_per_subject=1, discard=Discard.NEW))
    st.append("a", b"", b"1", 1)
    st.append("b", b"", b"1", 2)
    with pytest.raises(MaxMsgs):
        st.append("c", b"", b"1", 3)
    assert st.append("a", b"", b"2", 4) == (3, 4)
    assert seqs(st) == [2, 3]
    st.close()


def test_max_msg_size(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_msg_size=10))
    st.append("a", b"", b"x" * 10, 1)
    with pytest.raises(MaxMsgSize) as ei:
        st.append("a", b"NATS/1.0\r\n\r\n", b"x", 2)
    assert ei.value.err_code == 10054
    st.close()


def test_max_age(kit: Kit) -> None:
    st = kit.open(StreamLimits(max_age_ns=1000))
    assert st.next_expiry_ns() is None
    for t in (100, 200, 300, 1500):
        st.append("a", b"", b"x", t)
    assert st.next_expiry_ns() == 1100
    assert st.expire(1099) == 0
    assert st.expire(1200) == 2
    assert st.state().first_seq == 3
    assert st.next_expiry_ns() == 1300
    st = kit.reopen(st)
    assert st.next_expiry_ns() == 1300
    assert st.expire(10_000) == 2
    s = st.state()
    assert (s.msgs, s.first_seq, s.last_seq, s.last_ts, s.first_ts) == (0, 5, 4, 1500, 0)
    st.close()


def test_update_limits_enforces(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10, ("x", "y"))
    assert st.update_limits(StreamLimits(max_msgs_per_subject=2)) == 6
    assert seqs(st) == [7, 8, 9, 10]
    assert st.update_limits(StreamLimits(max_msgs=1)) == 3
    assert seqs(st) == [10]
    st.close()


# ----------------------------------------------------------------- purge / remove


def test_purge_all(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10)
    assert st.purge() == 10
    s = st.state()
    assert (s.msgs, s.bytes, s.first_seq, s.last_seq, s.first_ts, s.last_ts) == (
        0,
        0,
        11,
        10,
        0,
        10,
    )
    assert s.num_subjects == 0 and s.num_deleted == 0
    assert st.append("a", b"", b"x", 50) == (11, 50)
    st = kit.reopen(st)
    assert st.state().first_seq == 11 and st.state().msgs == 1
    st.close()


def test_repeated_purges_of_an_empty_stream_then_appends(kit: Kit) -> None:
    # each purge of the file store logs a FLOOR record in a segment with no
    # message yet; the first append must not roll that segment into a new one
    # with the same base (which truncated the old file: messages lost)
    st = kit.open(None)
    for _ in range(12):
        st.purge()
    want = [st.append("a", b"", b"x" * i, 100 + i) for i in range(20)]
    st = kit.reopen(st)
    assert [(m.seq, m.ts_ns, len(m.payload)) for m in map(st.load, range(1, 21))] == [
        (seq, ts, i) for i, (seq, ts) in enumerate(want)
    ]
    assert st.state().msgs == 20
    st.close()


def test_purge_filter_keep_seq(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 12, ("a", "b", "c"))  # a: 1,4,7,10  b: 2,5,8,11  c: 3,6,9,12
    assert st.purge(filter="a") == 4
    assert st.purge(filter="b", keep=1) == 3
    assert seqs(st, "b") == [11]
    assert st.purge(filter="c", seq=9) == 2  # below 9: 3, 6
    assert seqs(st, "c") == [9, 12]
    assert st.purge(seq=1) == 0
    assert st.purge(filter="zzz") == 0
    s = st.state(deleted_details=True)
    assert seqs(st) == [9, 11, 12]
    assert s.first_seq == 9 and s.deleted == (10,) and s.num_deleted == 1
    st = kit.reopen(st)
    assert st.state(deleted_details=True) == s
    st.close()


def test_purge_keep_all_subjects(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10, ("a", "b"))
    assert st.purge(keep=3) == 7
    assert seqs(st) == [8, 9, 10]
    assert st.purge(keep=5) == 0
    st.close()


def test_purge_seq_is_compact(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10)
    assert st.purge(seq=4) == 3
    assert st.state().first_seq == 4
    # beyond the end: nats-server moves first/last past it
    assert st.purge(seq=20) == 7
    s = st.state()
    assert (s.first_seq, s.last_seq, s.msgs) == (20, 19, 0)
    assert st.append("a", b"", b"x", 99) == (20, 99)
    st.close()


def test_remove_and_deleted_details(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 8, ("a", "b"))
    st.remove(3)
    st.remove(5, erase=True)
    with pytest.raises(MsgNotFound):
        st.remove(3)
    with pytest.raises(StoreEOF):
        st.remove(9)
    with pytest.raises(MsgNotFound):
        st.load(5)
    st.remove(1)
    s = st.state(deleted_details=True)
    assert (s.msgs, s.first_seq, s.num_deleted, s.deleted) == (5, 2, 2, (3, 5))
    assert st.state().deleted is None
    st = kit.reopen(st)
    assert st.state(deleted_details=True) == s
    with pytest.raises(MsgNotFound):
        st.load(5)
    st.close()


def test_compact(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10, ("a", "b"))
    st.remove(6)
    assert st.compact(5) == 4
    assert st.compact(3) == 0
    s = st.state(deleted_details=True)
    assert (s.first_seq, s.msgs, s.deleted) == (5, 5, (6,))
    assert st.subject_state()["a"].first_seq == 5
    st = kit.reopen(st)
    assert st.state(deleted_details=True) == s
    assert st.compact(100) == 5
    s = st.state()
    assert (s.first_seq, s.last_seq, s.last_ts, s.msgs) == (100, 99, 10, 0)
    st = kit.reopen(st)
    assert st.append("a", b"", b"", 11) == (100, 11)
    st.close()


def test_truncate(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 10, ("a", "b"), start_ts=1000)
    st.remove(4)
    st.remove(7)
    st.truncate(7)
    s = st.state(deleted_details=True)
    assert (s.last_seq, s.last_ts, s.msgs, s.deleted) == (7, 1005, 5, (4, 7))
    assert st.subject_state()["a"].last_seq == 5
    st.truncate(8)  # no-op
    assert st.state(deleted_details=True) == s
    st = kit.reopen(st)
    assert st.state(deleted_details=True) == s
    assert st.append("b", b"", b"new", 2000) == (8, 2000)
    assert st.load(8).payload == b"new"
    st.truncate(0)
    s = st.state()
    assert (s.msgs, s.last_seq, s.first_seq, s.last_ts) == (0, 0, 0, 0)
    st = kit.reopen(st)
    assert st.append("a", b"", b"", 1) == (1, 1)
    st.close()


# ----------------------------------------------------------------- state / subjects


def test_subject_state_and_filter(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 9, ("o.1", "o.2", "p.1"))
    s = st.state(subjects_filter="o.*")
    assert s.subjects == {"o.1": 3, "o.2": 3}
    assert st.state(subjects_filter=">").subjects == {"o.1": 3, "o.2": 3, "p.1": 3}
    ss = st.subject_state("*.1")
    assert set(ss) == {"o.1", "p.1"}
    assert (ss["p.1"].first_seq, ss["p.1"].last_seq) == (3, 9)
    st.purge(filter="o.2")
    assert st.state().num_subjects == 2
    st.close()


# ----------------------------------------------------------------- snapshot


@pytest.mark.parametrize("target", ["memory", "same"])
def test_snapshot_restore_round_trip(kit: Kit, target: str) -> None:
    st = kit.open(None)
    fill(st, 30, ("a", "b", "c"), start_ts=500)
    st.remove(7)
    st.purge(filter="b", keep=2)
    st.compact(3)
    st.append("z", HDR, b"last", 10_000)
    st.remove(31)
    want = st.state(deleted_details=True, subjects_filter=">")
    want_msgs = [st.load(s) for s in seqs(st)]
    buf = io.BytesIO()
    st.snapshot(buf)
    if target == "same":
        st.purge()
        st.append("junk", b"", b"", 1)
        dst = st
    else:
        dst = MemoryStreamStore()
    dst.restore(io.BytesIO(buf.getvalue()))
    got = dst.state(deleted_details=True, subjects_filter=">")
    assert (got.msgs, got.first_seq, got.last_seq, got.last_ts, got.deleted, got.subjects) == (
        want.msgs,
        want.first_seq,
        want.last_seq,
        want.last_ts,
        want.deleted,
        want.subjects,
    )
    assert [dst.load(s) for s in seqs(dst)] == want_msgs
    if dst is st:
        st = kit.reopen(st)
        assert st.state(deleted_details=True, subjects_filter=">") == want
    st.close()


def test_restore_rejects_damaged_snapshot(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 5)
    buf = io.BytesIO()
    st.snapshot(buf)
    data = bytearray(buf.getvalue())
    data[len(data) // 2] ^= 0x40
    before = st.state(deleted_details=True)
    with pytest.raises(SnapshotError):
        st.restore(io.BytesIO(bytes(data)))
    with pytest.raises(SnapshotError):
        st.restore(io.BytesIO(bytes(data[: len(data) - 3])))
    assert st.state(deleted_details=True) == before
    assert seqs(st) == [1, 2, 3, 4, 5]
    st.close()


def test_snapshot_empty_after_purge(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 4)
    st.purge()
    buf = io.BytesIO()
    st.snapshot(buf)
    dst = MemoryStreamStore()
    dst.restore(io.BytesIO(buf.getvalue()))
    s = dst.state()
    assert (s.first_seq, s.last_seq, s.last_ts, s.msgs) == (5, 4, 4, 0)
    st.restore(io.BytesIO(buf.getvalue()))
    t = st.state()
    assert (t.first_seq, t.last_seq, t.last_ts, t.msgs) == (5, 4, 4, 0)
    st = kit.reopen(st)
    t = st.state()
    assert (t.first_seq, t.last_seq, t.last_ts, t.msgs) == (5, 4, 4, 0)
    st.close()
