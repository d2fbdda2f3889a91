"""store.file: segment checkpoints written in the background (issue 13, R3 KV under load).

Regression: a KV bucket's segment of ~49k distinct subjects took 0.3-1.1 s to checkpoint
when it rolled, inside an apply on every replica's event loop at the same message; the
Raft heartbeats stopped and the group re-elected.  The checkpoint is now built from copies
and written by a background thread, encoded in slices; its bytes are unchanged.
"""

from __future__ import annotations

from pathlib import Path

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as st

from store.file import FileStreamStore
from store.file.checkpoint import CBOR_SLICE, cbor_dumps_sliced, load_checkpoint

T0 = 1_700_000_000 * 1_000_000_000

values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.binary(max_size=8),
    st.text(max_size=8),
    st.lists(st.integers(min_value=0, max_value=2**40), max_size=3),
)


@settings(max_examples=40, deadline=None)
@given(
    small=st.dictionaries(st.text(max_size=6), values, max_size=6),
    n=st.sampled_from([0, 1, 23, 24, 255, 256, CBOR_SLICE, CBOR_SLICE + 1, 3 * CBOR_SLICE + 7]),
    key_offset=st.integers(min_value=0, max_value=2**33),
)
def test_sliced_encoding_is_byte_identical(
    small: dict[str, object], n: int, key_offset: int
) -> None:
    big = {key_offset + i: [i, i * 3, f"s{i}"] for i in range(n)}
    d = {**small, "big": big, "names": {i: f"k{i}" for i in range(n)}}
    assert cbor_dumps_sliced(d) == cbor2.dumps(d)


def test_rolled_segment_checkpoint_lands_and_reopens(tmp_path: Path) -> None:
    store = FileStreamStore(tmp_path, segment_bytes_max=64 * 1024)
    n = 3000  # several rolls, every subject distinct (the KV shape)
    for i in range(n):
        store.append(f"$KV.B.k{i}", b"", b"x" * 64, T0 + i)
    store.sync()
    sealed = store._segs[:-1]
    assert len(sealed) >= 2
    for seg in sealed:
        seg.wait_checkpoint()
        ck = load_checkpoint(seg.idx_path)
        assert ck is not None and ck["base"] == seg.base
        assert len(ck["subj"]) == len(seg.sids)
    store.close()
    again = FileStreamStore(tmp_path, segment_bytes_max=64 * 1024)
    st_ = again.state()
    assert (st_.first_seq, st_.last_seq, st_.msgs) == (1, n, n)
    assert again.load_last("$KV.B.k1234").seq == 1235
    assert again.recovery_report.clean
    again.close()
