"""``StreamStore.load_run``: a forward batch read, over every store kind.

The expected answer is always the ``load_next(">", ...)`` walk of the same
store; the file stores are also checked where the batch read differs from
``load`` in a loop: records parsed from one window / chunk / write-buffer
copy after another, corruption found exactly as ``load`` finds it, the
write buffer flushed by the sync thread in the middle of a read.
``load_raw_run`` (the same run as a ``RawRun``) is held to the same answers
and the same errors.
"""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path

import pytest

import store.file.readcache as readcache
from store.api import StoredMsg, StreamStore
from store.errors import CorruptionError, StoreClosed
from store.file import FileStreamStore
from store.file.format import KIND_MSG, REC_HDR, SEG_HDR_SIZE, encode_record
from store.file.segment import Segment
from tests.store.conftest import Kit

HDR = b"NATS/1.0\r\nX: 1\r\n\r\n"


def fill(st: StreamStore, n: int, tag: str = "") -> None:
    for _ in range(n):
        seq = st.state().last_seq + 1
        body = f"{tag}{seq}:".encode() + bytes([65 + seq % 26]) * (seq % 23)
        st.append(f"s.{seq % 3}", HDR if seq % 4 == 0 else b"", body, 1_000 + seq)


def walk(st: StreamStore, start: int, k: int) -> list[StoredMsg]:
    """What ``load_run(start, k)`` must return: the ``load_next`` walk."""
    out: list[StoredMsg] = []
    s = start
    while len(out) < k and (m := st.load_next(">", s)) is not None:
        out.append(m)
        s = m.seq + 1
    return out


def check_runs(st: StreamStore, sizes: tuple[int, ...] = (0, 1, 2, 5, 17, 64, 10_000)) -> None:
    """Starts from before the first to past the last (every one in a small
    stream), several sizes, and a whole read of the stream in runs of each size."""
    last = st.state().last_seq
    ref = walk(st, 0, last + 1)
    seqs = [m.seq for m in ref]
    step = max(1, last // 80)
    for start in [-3, 0, *range(1, last + 3, step), last, last + 50]:
        j = bisect_left(seqs, start)
        for k in sizes:
            assert st.load_run(start, k) == ref[j : j + max(k, 0)], (start, k)
            raw = st.load_raw_run(start, k)  # the same run, read raw
            assert raw.stored() == ref[j : j + max(k, 0)], (start, k)
    for k in sizes[1:]:
        got: list[StoredMsg] = []
        s = 1
        for _ in range(last + 2):  # bounded: each run makes progress
            run = st.load_run(s, k)
            if not run:
                break
            assert len(run) <= k
            got.extend(run)
            s = run[-1].seq + 1
        assert got == ref


def test_load_run_empty_stream_and_bounds(kit: Kit) -> None:
    st = kit.open(None)
    assert st.load_run(1, 10) == []
    assert st.load_run(0, 10) == []
    fill(st, 5)
    assert [m.seq for m in st.load_run(1, 3)] == [1, 2, 3]
    assert [m.seq for m in st.load_run(4, 3)] == [4, 5]
    assert st.load_run(6, 3) == []
    assert st.load_run(1, 0) == [] and st.load_run(1, -1) == []
    assert st.load_run(1, 5) == [st.load(s) for s in range(1, 6)]
    st.close()
    with pytest.raises(StoreClosed):
        st.load_run(1, 1)
    with pytest.raises(StoreClosed):
        st.load_raw_run(1, 1)


def test_load_run_gaps_and_deleted(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 60)
    for seq in (1, 2, 7, 8, 9, 30, 59, 60):
        st.remove(seq, erase=seq % 2 == 0)
    check_runs(st)
    st = kit.reopen(st)
    check_runs(st)
    st.close()


def test_load_run_across_segments_and_reopen(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 400)
    for seq in range(100, 180):  # a run of deleted messages (whole segments with tiny ones)
        st.remove(seq)
    st.remove(399)
    check_runs(st, (1, 3, 64, 1000))
    st = kit.reopen(st)
    check_runs(st, (1, 3, 64, 1000))
    fill(st, 50, "again")  # appends after the reopen (write buffer)
    check_runs(st, (1, 3, 64, 1000))
    st.close()


def test_load_run_after_purge_compact_truncate_skip(kit: Kit) -> None:
    st = kit.open(None)
    fill(st, 120)
    st.purge(filter="s.1")
    check_runs(st, (1, 7, 500))
    st.compact(40)
    assert st.load_run(1, 3) == walk(st, 40, 3)
    check_runs(st, (1, 7, 500))
    st.truncate(100)
    check_runs(st, (1, 7, 500))
    st.skip(130)
    fill(st, 10, "skip")
    assert st.load_run(101, 2)[0].seq == 131
    check_runs(st, (1, 7, 500))
    st.purge()
    assert st.load_run(1, 100) == []
    fill(st, 30, "purged")
    check_runs(st, (1, 7, 500))
    st = kit.reopen(st)
    check_runs(st, (1, 7, 500))
    st.close()


def test_load_run_big_records(kit: Kit) -> None:
    st = kit.open(None)
    for i in range(1, 13):
        st.append("big", b"", bytes([i]) * (i * 1500), i)  # CRC of records past 4 KiB
    st.remove(5)
    check_runs(st, (1, 2, 100))
    st = kit.reopen(st)
    check_runs(st, (1, 2, 100))
    st.close()


# ------------------------------------------------------------------ file store only


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the ``pread`` calls the read cache makes."""
    sizes: list[int] = []
    real = readcache._pread

    def counting(seg: Segment, off: int, n: int) -> bytes:
        sizes.append(n)
        return real(seg, off, n)

    monkeypatch.setattr(readcache, "_pread", counting)
    return sizes


def test_load_run_reads_ahead(tmp_path: Path, preads: list[int]) -> None:
    st = FileStreamStore(tmp_path)
    fill(st, 3000)
    st.close()
    st = FileStreamStore(tmp_path)
    preads.clear()
    got = []
    s = 1
    while run := st.load_run(s, 100):
        got.extend(run)
        s = run[-1].seq + 1
    assert [m.seq for m in got] == list(range(1, 3001))
    assert len(preads) < 3000 / 50
    st.close()


def test_load_run_from_the_write_buffer(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path)
    fill(st, 40)
    st.sync()
    fill(st, 40, "buffered")
    seg = st._active
    assert seg.flushed > 0 and seg.end > seg.flushed  # half flushed, half buffered
    for seq in (45, 46, 47, 60, 80):
        st.remove(seq)
    check_runs(st, (1, 3, 10, 100))
    st.close()


class _FlushOnRead(bytearray):
    """A write buffer that lets the sync thread's ``flush`` run the moment a
    reader slices it (the interleaving a GIL switch can produce)."""

    seg: Segment

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        self.seg.flush()
        return super().__getitem__(key)


def test_load_run_while_the_sync_thread_flushes(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path)
    for i in range(6):
        st.append("a", b"", b"m%d" % i, 1_700_000_000_000_000_000 + i)
    seg = st._active
    assert seg.wbuf and seg.flushed == 0
    racing = _FlushOnRead(seg.wbuf)
    racing.seg = seg
    seg.wbuf = racing
    assert [m.payload for m in st.load_run(2, 3)] == [b"m1", b"m2", b"m3"]
    assert seg.flushed > 0 and not seg.wbuf
    assert [m.payload for m in st.load_run(1, 10)] == [b"m%d" % i for i in range(6)]
    st.close()


class _FlushAtRead(Segment):
    """A segment whose sync thread flushes right after the ``countdown``-th
    read of ``flushed`` (the reader got the value from before the flush)."""

    countdown = 0

    @property  # type: ignore[override]
    def flushed(self) -> int:
        v: int = self.__dict__["flushed"]
        if self.countdown > 0:
            self.countdown -= 1
            if self.countdown == 0:
                self.flush()
        return v

    @flushed.setter
    def flushed(self, v: int) -> None:
        self.__dict__["flushed"] = v


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("how", ["load", "load_run", "load_raw_run"])
def test_buffer_taken_before_its_offset(tmp_path: Path, nth: int, how: str) -> None:
    """Readers take the write buffer before ``flushed``: a flush between the
    two reads leaves them an old buffer with an old offset, never a new
    (empty) buffer with an old offset."""
    st = FileStreamStore(tmp_path)
    for i in range(6):
        st.append("a", b"", b"m%d" % i, 1_700_000_000_000_000_000 + i)
    seg = st._active
    assert seg.wbuf and seg.flushed == 0
    seg.__class__ = _FlushAtRead
    assert isinstance(seg, _FlushAtRead)
    seg.countdown = nth
    if how == "load":
        assert st.load(3).payload == b"m2"
    elif how == "load_raw_run":
        assert st.load_raw_run(3, 2).bodies == [b"m2", b"m3"]
    else:
        assert [m.payload for m in st.load_run(3, 2)] == [b"m2", b"m3"]
    assert seg.countdown == 0 and seg.flushed > 0 and not seg.wbuf
    st.close()


def _corrupt(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x40
    path.write_bytes(data)


@pytest.mark.parametrize("where", ["payload", "length"])
def test_load_run_finds_a_corrupt_record(tmp_path: Path, where: str) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=8192)
    fill(st, 400)
    seg, i = st._locate(130)  # type: ignore[misc]
    assert seg is not st._active
    pos = SEG_HDR_SIZE + seg.offs[i] + (REC_HDR.size + 2 if where == "payload" else 1)
    path = seg.path
    st.close()
    _corrupt(path, pos)
    st = FileStreamStore(tmp_path, segment_bytes_max=8192, verify_on_open=False)
    with pytest.raises(CorruptionError) as by_load:
        st.load(130)
    for start, k in ((1, 200), (120, 11), (130, 1), (129, 2)):
        with pytest.raises(CorruptionError) as by_run:
            st.load_run(start, k)
        assert by_run.value.args == by_load.value.args
        with pytest.raises(CorruptionError) as by_raw:
            st.load_raw_run(start, k)
        assert by_raw.value.args == by_load.value.args
    assert st.load_raw_run(1, 129).stored() == st.load_run(1, 129)
    assert st.load_run(1, 129) == [st.load(s) for s in range(1, 130)]
    assert st.load_run(131, 500) == [st.load(s) for s in range(131, 401)]
    st.close()


def test_load_run_finds_a_record_of_another_sequence(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path)
    fill(st, 50)
    st.sync()
    seg, i = st._locate(20)  # type: ignore[misc]
    old = st.load(20)
    rec = encode_record(KIND_MSG, 21, old.ts_ns, old.subject.encode(), old.headers, old.payload)
    seg.overwrite(seg.offs[i], rec)  # a valid record, but not entry 20's
    with pytest.raises(CorruptionError) as by_load:
        st.load(20)
    with pytest.raises(CorruptionError) as by_run:
        st.load_run(10, 20)
    assert by_run.value.args == by_load.value.args
    with pytest.raises(CorruptionError) as by_raw:
        st.load_raw_run(10, 20)
    assert by_raw.value.args == by_load.value.args
    st.close()


def test_load_run_finds_a_corrupt_chunk(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=4096, compression=True)
    fill(st, 300)
    seg = st._segs[1]
    assert seg.compressed
    first, path, pos = seg.base, seg.path, int(seg.ch_foff[0]) + 40
    st.close()
    _corrupt(path, pos)
    st = FileStreamStore(tmp_path, segment_bytes_max=4096, compression=True, verify_on_open=False)
    with pytest.raises(CorruptionError):
        st.load_run(1, 300)
    with pytest.raises(CorruptionError):
        st.load_raw_run(1, 300)
    assert st.load_raw_run(1, first - 1).stored() == st.load_run(1, first - 1)
    assert st.load_run(1, first - 1) == [st.load(s) for s in range(1, first)]
    st.close()


def test_load_next_run_reads_consecutive_matches_as_one_run(tmp_path: Path) -> None:
    """A filter whose matches are consecutive (a filtered consumer near the
    stream's end) is read as one run: the same messages as one by one, and
    mixed with interleaved matches and deleted ones."""
    st = FileStreamStore(tmp_path, segment_bytes_max=4096)
    for i in range(60):
        st.append("other", b"", b"o%d" % i, 1_000 + i)
    for i in range(90):  # 61..150 consecutive, across segments
        st.append("want", HDR if i % 5 == 0 else b"", b"w%d" % i, 2_000 + i)
    for i in range(30):  # then interleaved
        st.append("want" if i % 2 else "other", b"", b"x%d" % i, 3_000 + i)
    st.remove(100)
    for start, k in ((1, 10), (101, 30), (61, 90), (61, 200), (95, 20), (140, 40), (151, 40)):
        got = st.load_next_run("want", start, k)
        want: list[StoredMsg] = []
        s = start
        while len(want) < k and (m := st.load_next("want", s)) is not None:
            want.append(m)
            s = m.seq + 1
        assert got == want, (start, k)
    st.close()
