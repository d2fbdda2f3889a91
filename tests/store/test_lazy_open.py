"""A file store reopened lazily (sealed segments' arrays loaded on first use)
behaves exactly as one reopened eagerly, and its reopen does not grow with
the messages in sealed segments.

Differential: one directory is copied; one copy is opened with
``verify_on_open=True`` (every segment loaded and checked at open, as the
store always did), the other with the default (lazy); the same operations
go to both and every answer must be equal.  The complexity test counts
records scanned and index entries decoded (``store.file.recovery.COUNTS``),
not time.
"""

from __future__ import annotations

import os
import random
import shutil
import zlib
from pathlib import Path

import cbor2
import pytest

from store.file import FileStreamStore
from store.file.checkpoint import IDX_MAGIC, load_checkpoint
from store.file.recovery import COUNTS
from store.limits import StreamLimits

SEG = 400  # bytes: a few messages per segment


def _fill(d: Path, n: int, seed: int, *, seg: int = SEG, close: bool = True) -> FileStreamStore:
    rng = random.Random(seed)
    st = FileStreamStore(d, StreamLimits(max_msgs_per_subject=4), segment_bytes_max=seg)
    for i in range(n):
        subj = f"kv.{rng.randrange(12)}" if i % 3 else f"ev.{i % 5}"
        hdr = b"NATS/1.0\r\nNats-Msg-Id: m%d\r\n\r\n" % i if i % 7 == 0 else b""
        st.append(subj, hdr, b"v%d" % i, 1_000 + i)
        if i % 17 == 0 and i:
            victim = rng.randrange(1, i + 1)
            if st.state().msgs > 1 and st._is_live(victim):
                st.remove(victim)
    st.sync()
    if close:
        st.close()
    return st


def _pair(tmp_path: Path, src: Path) -> tuple[FileStreamStore, FileStreamStore]:
    eager_dir, lazy_dir = tmp_path / "eager", tmp_path / "lazy"
    shutil.copytree(src, eager_dir, ignore=shutil.ignore_patterns("*.tmp"))
    shutil.copytree(src, lazy_dir, ignore=shutil.ignore_patterns("*.tmp"))
    lim = StreamLimits(max_msgs_per_subject=4)
    eager = FileStreamStore(eager_dir, lim, segment_bytes_max=SEG, verify_on_open=True)
    lazy = FileStreamStore(lazy_dir, lim, segment_bytes_max=SEG)
    return eager, lazy


def _both(
    eager: FileStreamStore, lazy: FileStreamStore, op: str, *args: object, **kw: object
) -> None:
    """The same call on both: the same result, or the same kind of error."""
    out = []
    for st in (eager, lazy):
        try:
            out.append(("ok", getattr(st, op)(*args, **kw)))
        except Exception as e:
            out.append(("err", type(e)))
    assert out[0] == out[1], (op, args, kw, out)


def _same(a: FileStreamStore, b: FileStreamStore) -> None:
    assert a.state(deleted_details=True, subjects_filter=">") == b.state(
        deleted_details=True, subjects_filter=">"
    )
    st = a.state()
    for f in (">", "kv.3", "ev.*", ["kv.1", "ev.2"]):
        for lo in (st.first_seq, (st.first_seq + st.last_seq) // 2):
            _both(a, b, "count_in_range", f, lo, st.last_seq)
            _both(a, b, "load_next", f, lo)
            _both(a, b, "load_next_run", f, lo, 7)
    for subj in ("kv.0", "kv.11", "ev.4"):
        _both(a, b, "load_last", subj)
    _both(a, b, "msg_ids_since", 0)


def test_lazy_reopen_answers_as_an_eager_one(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _fill(src, 300, seed=1)
    eager, lazy = _pair(tmp_path, src)
    try:
        sealed = lazy._segs[:-1]
        assert len(sealed) > 10
        # segments a tombstone points into are loaded at open (to apply it);
        # the rest wait for their first use
        unloaded = sum(1 for s in sealed if not s.loaded)
        assert unloaded >= len(sealed) // 3, (unloaded, len(sealed))
        assert eager.state() == lazy.state()
        _same(eager, lazy)
        rng = random.Random(7)
        for step in range(60):
            op = rng.randrange(6)
            st = eager.state()
            seq = rng.randrange(st.first_seq, st.last_seq + 1) if st.msgs else 1
            if op == 0:  # delete
                _both(eager, lazy, "remove", seq)
            elif op == 1:  # purge one subject, keeping one
                _both(eager, lazy, "purge", filter=f"kv.{rng.randrange(12)}", keep=1)
            elif op == 2:  # per-subject limit on new appends
                _both(eager, lazy, "append", f"kv.{rng.randrange(12)}", b"", b"n", 9_000 + step)
            elif op == 3:  # purge up to a sequence
                _both(eager, lazy, "purge", seq=seq)
            else:
                for q in (seq, st.first_seq, st.last_seq):
                    _both(eager, lazy, "load", q)
            if step % 10 == 0:
                _same(eager, lazy)
        _same(eager, lazy)
        assert lazy.recovery_report == eager.recovery_report
    finally:
        eager.close()
        lazy.close()
    # and once more, each reopened the other way round
    eager = FileStreamStore(tmp_path / "lazy", segment_bytes_max=SEG, verify_on_open=True)
    lazy = FileStreamStore(tmp_path / "eager", segment_bytes_max=SEG)
    try:
        _same(eager, lazy)
    finally:
        eager.close()
        lazy.close()


def test_lazy_reopen_after_a_crash(tmp_path: Path) -> None:
    src = tmp_path / "src"
    orig = _fill(src, 200, seed=2, close=False)  # no close: the tail is scanned
    try:
        eager, lazy = _pair(tmp_path, src)
    finally:
        orig.close()
    try:
        _same(eager, lazy)
        _both(eager, lazy, "purge", filter="ev.*")
        _same(eager, lazy)
    finally:
        eager.close()
        lazy.close()


def test_a_bad_checkpoint_body_is_rebuilt_from_the_segment(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _fill(src, 200, seed=3)
    idx = sorted(src.glob("*.idx"))
    victim = idx[len(idx) // 2]
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF  # in the body (arrays, ids): the summary still checks out
    victim.write_bytes(bytes(data))
    eager, lazy = _pair(tmp_path, src)
    try:
        _same(eager, lazy)  # touching the segment rebuilds it from its file
        assert lazy.recovery_report.clean
    finally:
        eager.close()
        lazy.close()


def test_lazy_damage_found_by_a_read_becomes_a_gap(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _fill(src, 200, seed=4)
    eager, lazy = _pair(tmp_path, src)
    eager.close()
    lazy.close()
    d = tmp_path / "lazy"
    st = FileStreamStore(d, segment_bytes_max=SEG)
    seg = st._segs[len(st._segs) // 2]
    j = seg.live.find(1)
    seq, off = seg.base + j, seg.offs[j]
    st.close()
    data = bytearray(seg.path.read_bytes())
    data[36 + off + 20] ^= 0x01  # inside that record
    seg.path.write_bytes(bytes(data))
    st = FileStreamStore(d, segment_bytes_max=SEG)
    try:
        before = st.state().msgs
        try:
            st.load(seq)
            raise AssertionError("a damaged record was served")
        except Exception as e:
            assert "no message found" in str(e)
        rep = st.recovery_report
        assert not rep.clean and rep.damaged[0].first_seq <= seq <= rep.damaged[0].last_seq
        assert st.state().msgs == before - rep.lost_seqs
    finally:
        st.close()


def _reopen_cost(d: Path, n: int) -> int:
    """Records scanned and index entries decoded by a reopen of ``n``
    messages (closed cleanly, so every segment has its checkpoint), its
    first STREAM.INFO-like state, and a read of the first and last message."""
    st = FileStreamStore(d, segment_bytes_max=16384)
    for i in range(n):
        st.append("bench.js", b"", b"x" * 16, i + 1)
    st.close()
    before = COUNTS["records"] + COUNTS["entries"]
    st = FileStreamStore(d, segment_bytes_max=16384)
    s = st.state()
    assert s.msgs == n
    assert st.load(s.first_seq).seq == 1 and st.load(s.last_seq).seq == n
    st.close()
    return COUNTS["records"] + COUNTS["entries"] - before


def test_reopen_reads_do_not_grow_with_sealed_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # ~250 rolls: durability is not the point
    small = _reopen_cost(tmp_path / "small", 1_000)
    big = _reopen_cost(tmp_path / "big", 100_000)
    assert small >= 1
    assert big <= 1.5 * small, (small, big)


def test_format_1_checkpoints_are_read_and_rewritten(tmp_path: Path) -> None:
    d = tmp_path / "s"
    _fill(d, 150, seed=5)
    want = FileStreamStore(d, segment_bytes_max=SEG, verify_on_open=True)
    state = want.state(deleted_details=True, subjects_filter=">")
    want.close()
    for p in d.glob("*.idx"):  # as an older trijet wrote them
        ck = load_checkpoint(p)
        assert ck is not None
        body = cbor2.dumps(ck)
        p.write_bytes(IDX_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body)
    st = FileStreamStore(d, segment_bytes_max=SEG)
    assert all(s.loaded for s in st._segs)  # format 1: loaded whole
    assert st.state(deleted_details=True, subjects_filter=">") == state
    st.close()  # rewritten as format 2
    st = FileStreamStore(d, segment_bytes_max=SEG)
    try:
        assert any(not s.loaded for s in st._segs)
        assert st.state(deleted_details=True, subjects_filter=">") == state
    finally:
        st.close()
