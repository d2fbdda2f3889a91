"""Read-ahead of the file store (``store.file.readcache``).

Sequential loads are served from read-ahead windows; these tests check that
the windows pay off (few ``pread`` calls, bounded memory) and that no load
ever sees bytes a window kept from before the segment changed: after erase,
an in-place rewrite of a record, truncate, compact/purge, appends past a
window, segment rolls (with and without compression) and reopen.  Corruption
inside a window is still found by the record CRC.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import store.file.readcache as readcache
from store.api import StoredMsg
from store.errors import CorruptionError, MsgNotFound
from store.file import FileStreamStore
from store.file.format import KIND_MSG, REC_HDR, SEG_HDR_SIZE, encode_record
from store.file.segment import Segment


def _payload(seq: int, gen: int = 0) -> bytes:
    return b"%d/%d:" % (gen, seq) + bytes([65 + seq % 26]) * (40 + seq % 17)


def _fill(st: FileStreamStore, n: int, gen: int = 0) -> dict[int, StoredMsg]:
    out = {}
    for _ in range(n):
        seq = st.state().last_seq + 1
        hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % seq if seq % 5 == 0 else b""
        p = _payload(seq, gen)
        s, ts = st.append(f"s.{seq % 3}", hdr, p, 1_000 + seq)
        out[s] = StoredMsg(s, f"s.{seq % 3}", hdr, p, ts)
    st.sync()
    return out


def _check_all(st: FileStreamStore, want: dict[int, StoredMsg]) -> None:
    last = st.state().last_seq
    for seq in range(1, last + 1):
        if seq in want:
            assert st.load(seq) == want[seq]
        else:
            with pytest.raises(MsgNotFound):
                st.load(seq)


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Sizes of the ``pread`` calls the read cache makes."""
    sizes: list[int] = []
    real = readcache._pread

    def counting(seg: Segment, off: int, n: int) -> bytes:
        sizes.append(n)
        return real(seg, off, n)

    monkeypatch.setattr(readcache, "_pread", counting)
    yield sizes


def test_sequential_loads_read_ahead(tmp_path: Path, preads: list[int]) -> None:
    st = FileStreamStore(tmp_path)
    want = _fill(st, 3000)
    st.close()
    st = FileStreamStore(tmp_path)
    preads.clear()
    _check_all(st, want)
    body = sum(len(encode_record(KIND_MSG, m.seq, 0, m.subject.encode(), m.headers, m.payload))
               for m in want.values())  # fmt: skip
    assert len(preads) < 3000 / 50
    assert sum(preads) < body + 2 * readcache.WINDOW_BYTES_MAX
    assert st._cache.nbytes <= readcache.WINDOWS * readcache.WINDOW_BYTES_MAX
    st.close()


def test_random_loads_read_one_record_each(tmp_path: Path, preads: list[int]) -> None:
    st = FileStreamStore(tmp_path)
    want = _fill(st, 3000)
    preads.clear()
    order = list(range(3000, 0, -7))  # backwards: never a forward walk
    for seq in order:
        assert st.load(seq) == want[seq]
    assert len(preads) == len(order)
    assert max(preads) < 200
    assert st._cache.nbytes == 0
    st.close()


def test_two_forward_readers_keep_their_windows(tmp_path: Path, preads: list[int]) -> None:
    st = FileStreamStore(tmp_path)
    want = _fill(st, 4000)
    preads.clear()
    for k in range(1, 2001):
        assert st.load(k) == want[k]
        assert st.load(2000 + k) == want[2000 + k]
    assert len(preads) < 4000 / 50
    st.close()


def test_load_after_erase_and_in_place_rewrite(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path)
    want = _fill(st, 400)
    _check_all(st, want)  # windows now hold the records
    st.remove(200, erase=True)
    del want[200]
    _check_all(st, want)
    # an in-place change of a live record through the segment: a window
    # filled before it must not serve the old bytes
    seg, i = st._locate(150)  # type: ignore[misc]
    assert st.load(150) == want[150]
    off = seg.offs[i]
    old = want[150]
    new_payload = bytes(reversed(old.payload))
    rec = encode_record(KIND_MSG, 150, old.ts_ns, old.subject.encode(), old.headers, new_payload)
    seg.overwrite(off, rec)
    assert st.load(150).payload == new_payload
    want[150] = StoredMsg(150, old.subject, old.headers, new_payload, old.ts_ns)
    _check_all(st, want)
    st.close()


@pytest.mark.parametrize("compression", [False, True], ids=["plain", "lz4"])
def test_load_after_truncate_and_reappend(tmp_path: Path, compression: bool) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=4096, compression=compression)
    want = _fill(st, 500)
    _check_all(st, want)
    st.truncate(321)
    want = {s: m for s, m in want.items() if s <= 321}
    _check_all(st, want)
    want.update(_fill(st, 300, gen=1))  # same sequences, new bytes
    _check_all(st, want)
    st.close()


def test_load_after_compact_and_purge(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=4096)
    want = _fill(st, 600)
    _check_all(st, want)
    st.compact(250)
    want = {s: m for s, m in want.items() if s >= 250}
    _check_all(st, want)
    st.purge(filter="s.1")
    want = {s: m for s, m in want.items() if m.subject != "s.1"}
    _check_all(st, want)
    st.purge()
    want = _fill(st, 200, gen=1)
    _check_all(st, want)
    st.close()


def test_load_while_appending_past_the_window(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path)
    want: dict[int, StoredMsg] = {}
    nxt = 1
    for rnd in range(40):  # a consumer at the tail of a growing stream
        want.update(_fill(st, 37 + rnd % 5, gen=rnd))
        while nxt <= st.state().last_seq:
            assert st.load(nxt) == want[nxt]
            nxt += 1
    # unflushed appends are served from the write buffer
    seq, ts = st.append("tail", b"", b"buffered", 5)
    assert st._active.end > st._active.flushed
    assert st.load(seq) == StoredMsg(seq, "tail", b"", b"buffered", ts)
    st.close()


@pytest.mark.parametrize("compression", [False, True], ids=["plain", "lz4"])
def test_load_across_segment_rolls_and_reopen(tmp_path: Path, compression: bool) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=2000, compression=compression)
    want = _fill(st, 700)
    assert len(st._segs) > 10
    _check_all(st, want)
    st.close()
    st = FileStreamStore(tmp_path, segment_bytes_max=2000, compression=compression)
    _check_all(st, want)
    want.update(_fill(st, 100, gen=1))
    _check_all(st, want)
    st.close()


def test_corrupt_record_inside_a_window_raises(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path, segment_bytes_max=8192)
    want = _fill(st, 400)
    seg, i = st._locate(130)  # type: ignore[misc]
    assert seg is not st._active
    path, pos = seg.path, SEG_HDR_SIZE + seg.offs[i] + REC_HDR.size + 2
    st.close()
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x40
    path.write_bytes(data)
    st = FileStreamStore(tmp_path, segment_bytes_max=8192, verify_on_open=False)
    for seq in range(1, 401):
        if seq == 130:
            with pytest.raises(CorruptionError):
                st.load(seq)
        else:
            assert st.load(seq) == want[seq]
    st.close()


class _FlushOnRead(bytearray):
    """A write buffer that lets the sync thread's ``flush`` run the moment a
    reader slices it: the interleaving a GIL switch can produce between a
    reader choosing the buffer and reading from it."""

    seg: Segment

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        self.seg.flush()
        return super().__getitem__(key)


def test_load_from_the_write_buffer_while_the_sync_thread_flushes(tmp_path: Path) -> None:
    st = FileStreamStore(tmp_path / "s")
    for i in range(5):
        st.append("a", b"", b"m%d" % i, 1_700_000_000_000_000_000 + i)
    seg = st._segs[-1]
    assert seg.wbuf and seg.flushed == 0  # all five still buffered
    racing = _FlushOnRead(seg.wbuf)
    racing.seg = seg
    seg.wbuf = racing
    assert st.load(3).payload == b"m2"  # not a "short" CorruptionError
    assert seg.flushed > 0 and not seg.wbuf
    assert [st.load(s).payload for s in range(1, 6)] == [b"m%d" % i for i in range(5)]
    st.close()
