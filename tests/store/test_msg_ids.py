"""``msg_ids_since``: the duplicate window's ids, kept beside the index.

Conformance over every store kind (including tiny and compressed segments,
so ids cross sealed segments and their checkpoints), the fallback for
checkpoints written before ids were kept, and the restart rebuild's cost
counted in records read, not seconds.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as hs

from cluster.model import StreamConfig
from cluster.stream_fsm.machine import StreamStateMachine
from cluster.streams import policy_of
from store.file import FileStreamStore
from store.file.checkpoint import IDX_MAGIC, load_checkpoint
from store.msgids import id_bytes_and_ttl, msg_id_of
from store.ttl import msg_ttl_s
from tests.store.conftest import Kit

SEC = 1_000_000_000


def hdr(mid: str) -> bytes:
    return f"NATS/1.0\r\nNats-Msg-Id: {mid}\r\n\r\n".encode("utf-8", "surrogateescape")


def fill(st, n: int, *, every: int = 2, t0: int = 1_000 * SEC) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    """``n`` messages, every ``every``-th with an id; returns the ids expected."""
    want = []
    for i in range(n):
        ts = t0 + i * SEC
        h = hdr(f"id-{i}") if i % every == 0 else b""
        seq, _ = st.append(f"s.{i % 3}", h, b"x" * 40, ts)
        if h:
            want.append((f"id-{i}", seq, ts))
    return want


def test_ids_since_floor_in_order(kit: Kit) -> None:
    st = kit.open(None)
    want = fill(st, 60)
    assert st.msg_ids_since(0) == want
    floor = 1_000 * SEC + 30 * SEC
    assert st.msg_ids_since(floor) == [e for e in want if e[2] >= floor]
    st = kit.reopen(st)
    assert st.msg_ids_since(0) == want
    assert st.msg_ids_since(floor) == [e for e in want if e[2] >= floor]
    st.close()


def test_ids_of_removed_messages_are_gone(kit: Kit) -> None:
    st = kit.open(None)
    want = fill(st, 40)
    st.remove(want[3][1])
    st.remove(want[-1][1])
    keep = [e for e in want if e not in (want[3], want[-1])]
    assert st.msg_ids_since(0) == keep
    st = kit.reopen(st)
    assert st.msg_ids_since(0) == keep
    st.close()


def test_truncate_and_reuse_sequences(kit: Kit) -> None:
    st = kit.open(None)
    want = fill(st, 30)
    st.truncate(20)
    seq, _ = st.append("s.x", hdr("again"), b"y", 5_000 * SEC)
    assert seq == 21
    expect = [e for e in want if e[1] <= 20] + [("again", 21, 5_000 * SEC)]
    assert st.msg_ids_since(0) == expect
    st = kit.reopen(st)
    assert st.msg_ids_since(0) == expect
    st.close()


def test_odd_ids_round_trip(kit: Kit) -> None:
    st = kit.open(None)
    odd = "caf\u00e9-\udcff"  # non-ASCII and a byte that is not UTF-8
    st.append("s", hdr(odd), b"", 10 * SEC)
    st.append("s", b"NATS/1.0\r\nOther: 1\r\nNats-Msg-Id:   padded  \r\n\r\n", b"", 11 * SEC)
    assert st.msg_ids_since(0) == [(odd, 1, 10 * SEC), ("padded", 2, 11 * SEC)]
    st = kit.reopen(st)
    assert st.msg_ids_since(0) == [(odd, 1, 10 * SEC), ("padded", 2, 11 * SEC)]
    st.close()


def _strip_ids_from_checkpoints(d: Path) -> int:
    """Rewrite every checkpoint as one written before ids were kept."""
    n = 0
    for p in d.glob("*.idx"):
        ck = load_checkpoint(p)
        assert ck is not None
        ck.pop("mids", None)
        body = cbor2.dumps(ck)
        p.write_bytes(IDX_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body)
        n += 1
    return n


def test_checkpoints_without_ids_fall_back_to_reading(tmp_path: Path) -> None:
    d = tmp_path / "s"
    st = FileStreamStore(d, segment_bytes_max=300)
    want = fill(st, 50)
    st.close()
    assert _strip_ids_from_checkpoints(d) > 2
    st = FileStreamStore(d, segment_bytes_max=300)
    assert st.msg_ids_since(0) == want
    more = fill(st, 10, t0=9_000 * SEC)
    assert st.msg_ids_since(0) == want + more
    st.close()


def _records_read_at_restart(tmp_path: Path, n: int) -> int:
    """Records a stream state machine reads rebuilding its window after a
    reopen of ``n`` messages (a tenth with ids, all inside the window)."""
    d = tmp_path / f"s{n}"
    st = FileStreamStore(d)
    for i in range(n):
        st.append("k", hdr(f"m{i}") if i % 10 == 0 and i >= n - 100 else b"", b"v", (i + 1) * 1000)
    st.close()
    st = FileStreamStore(d)
    reads = 0
    orig = st._read

    def counting(seg, j):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return orig(seg, j)

    st._read = counting  # type: ignore[method-assign]
    fsm = StreamStateMachine(st, policy_of(StreamConfig(name="S", subjects=["k"])))
    assert fsm.recover_from_store() == 10
    st.close()
    return reads


def test_restart_rebuild_reads_do_not_grow_with_the_stream(tmp_path: Path) -> None:
    small = _records_read_at_restart(tmp_path, 1_000)
    big = _records_read_at_restart(tmp_path, 100_000)
    assert small >= 1
    assert big <= 1.5 * small, (small, big)


def _ttl_store(d: Path, n: int) -> FileStreamStore:
    from store.limits import StreamLimits

    st = FileStreamStore(d, StreamLimits(msg_ttl=True), segment_bytes_max=2000)
    for i in range(n):
        h = f"NATS/1.0\r\nNats-TTL: {10 + i}\r\n\r\n".encode() if i % 5 == 0 else b""
        st.append("t", h, b"v" * 20, (i + 1) * SEC)
    return st


def _reads_at_open(d: Path) -> tuple[int, int | None]:
    from store.file.store import FileStreamStore as FS
    from store.limits import StreamLimits

    reads = 0
    orig = FS._read

    def counting(self, seg, j):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return orig(self, seg, j)

    FS._read = counting  # type: ignore[method-assign]
    try:
        st = FS(d, StreamLimits(msg_ttl=True), segment_bytes_max=2000)
    finally:
        FS._read = orig  # type: ignore[method-assign]
    due = st.next_expiry_ns()
    st.close()
    return reads, due


def test_ttl_deadlines_come_back_without_reading_messages(tmp_path: Path) -> None:
    d = tmp_path / "ttl"
    st = _ttl_store(d, 300)
    want = st.next_expiry_ns()
    st.close()
    reads, due = _reads_at_open(d)
    assert due == want == 11 * SEC
    assert reads == 0
    assert _strip_ids_from_checkpoints(d) > 2  # also drops nothing but "mids"
    for p in d.glob("*.idx"):  # now as written before TTL facts were kept
        ck = load_checkpoint(p)
        assert ck is not None
        ck.pop("ttls", None)
        body = cbor2.dumps(ck)
        p.write_bytes(IDX_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body)
    reads, due = _reads_at_open(d)
    assert due == want
    assert reads > 0  # read from the messages instead
    st = _ttl_store(tmp_path / "again", 30)
    st.remove(1)  # a removed message's deadline does not come back
    st.close()
    assert _reads_at_open(tmp_path / "again")[1] == 21 * SEC  # seq 6: at 6 s, TTL 15 s


_BLOCK_PARTS = hs.sampled_from(
    [b"NATS/1.0", b"\r\n", b"Nats-Msg-Id", b"Nats-TTL", b":", b" ", b"\t", b"5s", b"x", b"\r"]
)


@settings(max_examples=300, deadline=None)
@given(hs.lists(_BLOCK_PARTS, max_size=12), hs.text(max_size=8))
def test_id_bytes_and_ttl_equals_the_two_scans(parts: list[bytes], mid: str) -> None:
    """The stores' one-look ``id_bytes_and_ttl`` gives what ``msg_id_of`` (before
    it decodes) and ``msg_ttl_s`` give, for the only-id block and any other."""
    blocks = [
        b"".join(parts),
        b"NATS/1.0\r\nNats-Msg-Id:" + b"".join(parts) + b"\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: " + mid.encode("utf-8", "surrogateescape") + b"\r\n\r\n",
    ]
    for block in blocks:
        if block:
            raw, ttl = id_bytes_and_ttl(block)
            assert (raw.decode("utf-8", "surrogateescape"), ttl) == (
                msg_id_of(block),
                msg_ttl_s(block),
            )
            assert id_bytes_and_ttl(memoryview(block)) == (raw, ttl)
