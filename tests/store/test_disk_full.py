"""A full disk under the file store's buffered writes (chaos F11 in miniature).

The write buffer is handed to the OS inside ``append`` once it is large; when that write
fails with ENOSPC the record must still be indexed (the append succeeded, its bytes are
buffered) and the failure left to the owner's next ``sync``, which is retried: before the
fix the exception escaped ``append`` between buffering the record and indexing it, so the
index and the segment's bytes disagreed from then on.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import store.file.segment as segment
from store.file import FileStreamStore

T0 = 1_700_000_000 * 1_000_000_000


def test_an_append_whose_buffer_flush_fails_is_kept_and_synced_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.pwrite
    full = [False]

    def pwrite(fd: int, data: bytes, pos: int) -> int:
        if full[0]:
            half = real(fd, bytes(data[: len(data) // 2]), pos)  # a torn write, then ENOSPC
            if half >= 0:
                raise OSError(errno.ENOSPC, "no space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(segment.os, "pwrite", pwrite)
    st = FileStreamStore(tmp_path / "s")
    payload = b"p" * 1000
    for i in range(100):
        st.append("a", b"", payload + b"%d" % i, T0 + i)
    st.sync()
    full[0] = True
    n = 2 * segment.WBUF_BYTES_MAX // len(payload)
    for i in range(100, 100 + n):  # the buffer's own flushes fail: every append still stands
        assert st.append("a", b"", payload + b"%d" % i, T0 + i)[0] == i + 1
    with pytest.raises(OSError):
        st.sync()
    assert st.state().msgs == 100 + n
    full[0] = False
    st.sync()  # space again: the same bytes are written whole
    st.close()
    again = FileStreamStore(tmp_path / "s")
    assert again.state().msgs == 100 + n and again.recovery_report.clean
    for seq in (1, 100, 101, 100 + n):
        assert again.load(seq).payload == payload + b"%d" % (seq - 1)
    again.close()
