"""The active segment's preallocated tail (``Segment`` preallocation).

The active segment's file is longer than its log: zeros past the last record,
whose size is set ahead so a sync publish's ``fdatasync`` commits no size
change.  These tests check what relies on the file's size:

* recovery after a crash (a copy of the directory taken while the store is
  open, or a killed process) reads the zeros as the end: nothing synced is
  lost, nothing is reported as torn or damaged, and the file is cut back;
* a torn record followed by zeros is cut as a torn record, its bytes (not the
  zeros) counted as torn;
* sealed segments and a closed store's files are byte-identical to a store
  without preallocation (sizes, CRCs, checkpoints unchanged);
* truncate, purge, compact and erase with a preallocated active segment
  resurrect nothing after a crash.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import store.file.segment as segment_mod
from store.api import StoredMsg
from store.file import FileStreamStore
from store.file.format import KIND_MSG, SEG_HDR_SIZE, encode_record
from tests.store.test_crash import _served

N = 60


def _fill(st: FileStreamStore, n: int, start_ts: int = 1_000, tag: str = "m") -> list[StoredMsg]:
    out = []
    for i in range(n):
        hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 5 == 0 else b""
        payload = f"{tag}-{i}".encode() * (1 + i % 7)
        seq, ts = st.append(f"s.{i % 3}", hdr, payload, start_ts + i)
        out.append(StoredMsg(seq, f"s.{i % 3}", hdr, payload, ts))
    st.sync()
    return out


def _crash_copy(src: Path, dst: Path) -> None:
    """The directory as a crash after the last sync leaves it."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.tmp"))


def _active_file(d: Path) -> Path:
    return sorted(d.glob("seg-*.tjs"))[-1]


def test_a_small_stream_keeps_little_ahead(tmp_path: Path) -> None:
    """What runs ahead scales with the segment (a quarter of it): a stream holding a
    few messages keeps the minimum allocated past its end, not the maximum."""
    st = FileStreamStore(tmp_path / "s")
    try:
        _fill(st, 3)
        act = st._active
        size = act.path.stat().st_size
        assert size == act.file_size + segment_mod.PREALLOC_BYTES_MIN
    finally:
        st.close()


def test_active_segment_runs_ahead_with_zeros(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path / "s")
    try:
        _fill(st, N)
        act = st._active
        size = act.path.stat().st_size
        assert act.file_size == SEG_HDR_SIZE + act.end
        assert size >= act.file_size + segment_mod.PREALLOC_BYTES_MIN
        assert size <= act.file_size + segment_mod.PREALLOC_BYTES
        assert act.alloc == size
        tail = act.path.read_bytes()[act.file_size :]
        assert tail == bytes(len(tail))
    finally:
        st.close()
    # a closed store's file holds its log only
    f = _active_file(tmp_path / "s")
    assert f.stat().st_size == st._active.file_size


@pytest.mark.parametrize("again", [1, 2, 3])
def test_crash_with_preallocated_tail_loses_nothing(tmp_path: Path, again: int) -> None:
    src = tmp_path / "src"
    st = FileStreamStore(src)
    want = {m.seq: m for m in _fill(st, N)}
    prev = src
    try:
        for k in range(again):
            dst = tmp_path / f"crash{k}"
            _crash_copy(prev, dst)
            assert _active_file(dst).stat().st_size > SEG_HDR_SIZE + st._active.end
            st2 = FileStreamStore(dst)
            try:
                rep = st2.recovery_report
                assert rep.torn_tail_bytes == 0
                assert rep.damaged == []
                assert _served(st2) == want
                # the zeros were cut: the file is its log again
                assert _active_file(dst).stat().st_size == SEG_HDR_SIZE + st2._active.end
                # append more (the file grows ahead again), sync, and crash again
                more = _fill(st2, 25, start_ts=10_000 * (k + 2), tag=f"k{k}")
                want.update({m.seq: m for m in more})
                assert st2._active.alloc > st2._active.file_size
            finally:
                st.close()
                st = st2
            prev = dst
        final = tmp_path / "final"
        _crash_copy(prev, final)
        st3 = FileStreamStore(final)
        try:
            assert st3.recovery_report.torn_tail_bytes == 0
            assert _served(st3) == want
        finally:
            st3.close()
    finally:
        st.close()


_CHILD = textwrap.dedent(
    """
    import sys, time
    from store.file import FileStreamStore
    st = FileStreamStore(sys.argv[1])
    for i in range(int(sys.argv[2])):
        st.append("k.%d" % (i % 4), b"", b"payload-%d" % i, 5_000 + i)
        st.sync()
        print(i + 1, flush=True)  # acknowledged: synced
    time.sleep(60)  # killed here
    """
)


def test_killed_process_with_preallocated_tail(tmp_path: Path) -> None:
    d = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": str(Path(segment_mod.__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(d), "200"],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        acked = 0
        for line in proc.stdout:
            acked = int(line)
            if acked == 200:
                break
        assert acked == 200
        # the file runs ahead of its log while the process lives
        f = _active_file(d)
        assert f.stat().st_size > SEG_HDR_SIZE + 200 * 20
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    st = FileStreamStore(d)
    try:
        rep = st.recovery_report
        assert rep.torn_tail_bytes == 0 and rep.damaged == []
        got = _served(st)
        assert sorted(got) == list(range(1, 201))
        assert all(got[i].payload == b"payload-%d" % (i - 1) for i in got)
        seq, _ = st.append("after", b"", b"x", 9_999)
        assert seq == 201
    finally:
        st.close()
    st = FileStreamStore(d)
    try:
        assert st.recovery_report.torn_tail_bytes == 0
        assert sorted(_served(st)) == list(range(1, 202))
    finally:
        st.close()


@pytest.mark.parametrize("cut", [1, 4, 5, 13, 30, -1])
def test_torn_record_among_zeros_is_cut(tmp_path: Path, cut: int) -> None:
    src = tmp_path / "src"
    st = FileStreamStore(src)
    try:
        want = {m.seq: m for m in _fill(st, N)}
        end = st._active.file_size
        dst = tmp_path / "dst"
        _crash_copy(src, dst)
    finally:
        st.close()
    # a record for the next sequence, written in part (the rest still zeros)
    rec = encode_record(KIND_MSG, N + 1, 77_777, b"torn", b"", b"never acked" * 9)
    part = rec[:cut] if cut > 0 else rec[:-1]
    f = _active_file(dst)
    size = f.stat().st_size
    with open(f, "r+b") as fh:
        fh.seek(end)
        fh.write(part)
    assert f.stat().st_size == size  # inside the preallocated zeros
    st2 = FileStreamStore(dst)
    try:
        rep = st2.recovery_report
        assert rep.damaged == []
        assert rep.torn_tail_bytes == len(part.rstrip(b"\0"))
        assert _served(st2) == want
        assert f.stat().st_size == end
        seq, _ = st2.append("after", b"", b"ok", 88_888)
        assert seq == N + 1
        st2.sync()
        want[seq] = StoredMsg(seq, "after", b"", b"ok", 88_888)
        again = tmp_path / "again"
        _crash_copy(dst, again)
    finally:
        st2.close()
    st3 = FileStreamStore(again)
    try:
        assert st3.recovery_report.torn_tail_bytes == 0
        assert st3.recovery_report.damaged == []
        assert _served(st3) == want
    finally:
        st3.close()


def _build_sealed(d: Path) -> FileStreamStore:
    st = FileStreamStore(d, segment_bytes_max=4096)
    for r in range(4):
        _fill(st, 40, start_ts=100_000 * (r + 1), tag=f"r{r}")
        st.remove(3 + 40 * r)
    st.sync()  # the last removal's tombstone too
    return st


def test_sealed_and_closed_files_match_a_store_without_preallocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _build_sealed(tmp_path / "pre")
    st.close()
    monkeypatch.setattr(segment_mod, "PREALLOC_BYTES", 0)
    monkeypatch.setattr(segment_mod, "PREALLOC_BYTES_MIN", 0)
    st0 = _build_sealed(tmp_path / "plain")
    st0.close()
    names = sorted(p.name for p in (tmp_path / "pre").glob("seg-*.tjs"))
    assert len(names) >= 3
    assert names == sorted(p.name for p in (tmp_path / "plain").glob("seg-*.tjs"))
    for name in names:
        a = (tmp_path / "pre" / name).read_bytes()
        b = (tmp_path / "plain" / name).read_bytes()
        assert a == b, name
    # the checkpoints describe the same files (sizes and CRCs)
    for p in sorted((tmp_path / "plain").glob("seg-*.idx")):
        assert (tmp_path / "pre" / p.name).read_bytes() == p.read_bytes(), p.name


def test_sealed_segments_in_a_crash_hold_no_zeros(tmp_path: Path) -> None:
    src = tmp_path / "src"
    st = _build_sealed(src)
    try:
        files = sorted(src.glob("seg-*.tjs"))
        for s in st._segs[:-1]:
            assert s.path.stat().st_size == s.file_size
        assert st._segs[-1].alloc > st._segs[-1].file_size
        assert len(files) == len(st._segs)
        want = _served(st)
        dst = tmp_path / "dst"
        _crash_copy(src, dst)
    finally:
        st.close()
    st2 = FileStreamStore(dst, segment_bytes_max=4096, verify_on_open=True)
    try:
        assert st2.recovery_report.damaged == []
        assert st2.recovery_report.torn_tail_bytes == 0
        assert _served(st2) == want
    finally:
        st2.close()


@pytest.mark.parametrize("op", ["truncate", "purge", "compact", "erase", "purge_subject"])
def test_cut_records_are_not_resurrected(tmp_path: Path, op: str) -> None:
    src = tmp_path / "src"
    st = FileStreamStore(src)
    try:
        msgs = _fill(st, N)
        want = {m.seq: m for m in msgs}
        assert st._active.alloc > st._active.file_size
        if op == "truncate":
            st.truncate(30)
            want = {q: m for q, m in want.items() if q <= 30}
        elif op == "purge":
            st.purge()
            want = {}
        elif op == "compact":
            st.compact(41)
            want = {q: m for q, m in want.items() if q >= 41}
        elif op == "purge_subject":
            st.purge(filter="s.1")
            want = {q: m for q, m in want.items() if m.subject != "s.1"}
        else:
            st.remove(N - 1, erase=True)
            st.remove(2, erase=True)
            del want[N - 1], want[2]
        st.sync()
        assert _served(st) == want
        # new messages where the cut ones were (truncate re-uses sequences)
        new = _fill(st, 20, start_ts=50_000, tag="new")
        want.update({m.seq: m for m in new})
        dst = tmp_path / "dst"
        _crash_copy(src, dst)
    finally:
        st.close()
    for _ in range(2):  # reopen twice: the first open cut the zeros
        st2 = FileStreamStore(dst)
        try:
            assert st2.recovery_report.damaged == []
            assert st2.recovery_report.torn_tail_bytes == 0
            got = _served(st2)
            assert got == want
            for m in got.values():
                assert b"never" not in m.payload
        finally:
            st2.close()
