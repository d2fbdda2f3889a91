"""``node.jetstream.pullframes``: the frames of a run of pull deliveries.

Every shape of run (one subject or several, ``%`` in names, header blocks
with and without a client taking them, redeliveries, given pending counts)
must give exactly the bytes of the plain per-message construction below.
"""

from __future__ import annotations

import pytest

from cluster.consumer_fsm import Delivery
from node.jetstream.pullframes import build_frames, build_raw_frames, count_new
from store.api import RawRun, StoredMsg

HDR = b"NATS/1.0\r\nX: 1\r\n\r\n"


def expected(
    got: list[tuple[StoredMsg, Delivery]],
    sid: bytes,
    prefix: bytes,
    left: int,
    pendings: list[int] | None,
    with_headers: bool,
) -> bytes:
    out = b""
    for i, (m, d) in enumerate(got):
        if pendings is not None:
            left = pendings[i]
        elif d.dc == 1:
            left -= 1
        ack = prefix + f"{d.dc}.{d.sseq}.{d.dseq}.{m.ts_ns}.{left}".encode()
        subj = m.subject.encode()
        if m.headers and with_headers:
            hl = len(m.headers)
            out += b"HMSG %b%b %b %d %d\r\n" % (subj, sid, ack, hl, hl + len(m.payload))
            out += m.headers + m.payload + b"\r\n"
        else:
            out += b"MSG %b%b %b %d\r\n%b\r\n" % (subj, sid, ack, len(m.payload), m.payload)
    return out


def run(
    n: int, *, subjects: tuple[str, ...] = ("s.a",), headers_every: int = 0, redeliver: int = 0
) -> list[tuple[StoredMsg, Delivery]]:
    got = []
    for i in range(n):
        seq = 10 + i
        h = HDR if headers_every and i % headers_every == 0 else b""
        m = StoredMsg(seq, subjects[i % len(subjects)], h, b"p%d" % i * (i % 5), 1_700 + i)
        dc = 2 if redeliver and i % redeliver == 0 else 1
        got.append((m, Delivery(seq, 100 + i, dc)))
    return got


@pytest.mark.parametrize(
    "got",
    [
        run(1),
        run(7),
        run(9, subjects=("s.a", "s.b", "s.%d")),
        run(6, subjects=("s.%s%%",)),
        run(8, headers_every=3),
        run(5, headers_every=1),
        run(6, subjects=("h.a", "h.b"), headers_every=1),
        run(9, redeliver=4),
        run(9, subjects=("x", "y"), headers_every=2, redeliver=3),
    ],
)
@pytest.mark.parametrize("with_headers", [True, False])
@pytest.mark.parametrize("given", [False, True])
def test_frames_match_per_message_build(
    got: list[tuple[StoredMsg, Delivery]], with_headers: bool, given: bool
) -> None:
    prefix = b"$JS.ACK.ST%d.c%s."
    pendings = [50 - 3 * i for i in range(len(got))] if given else None
    data, total = build_frames(got, b" 7", prefix, 40, pendings, with_headers=with_headers)
    assert data == expected(got, b" 7", prefix, 40, pendings, with_headers)
    assert total == sum(len(m.payload) for m, _ in got)
    if not given:  # the same run read raw (``RawRun``): the same bytes
        rr = RawRun.of([m for m, _ in got])
        ds = [d for _, d in got]
        raw = build_raw_frames(rr, ds, b" 7", prefix, 40, with_headers=with_headers)
        assert raw == (data, total)


@pytest.mark.parametrize("with_headers", [True, False])
def test_raw_frames_off_the_common_shape(with_headers: bool) -> None:
    """Raw runs whose deliveries are not consecutive first deliveries of the
    same messages take ``build_frames``: still the same bytes."""
    got = run(6, subjects=("a", "b%"), headers_every=1)
    rr = RawRun.of([m for m, _ in got])
    gap = [*got[:3], *((m, Delivery(d.sseq, d.dseq + 5, 1)) for m, d in got[3:])]
    other = [(m, Delivery(d.sseq + 1, d.dseq, 1)) for m, d in got]
    for shape in (gap, other):
        ds = [d for _, d in shape]
        raw = build_raw_frames(rr, ds, b" 7", b"$JS.ACK.S.c.", 9, with_headers=with_headers)
        want = expected(
            list(zip(rr.stored(), ds, strict=True)), b" 7", b"$JS.ACK.S.c.", 9, None, with_headers
        )
        assert raw[0] == want
    assert rr.stored() == [m for m, _ in got]
    assert build_raw_frames(RawRun(), [], b" 1", b"$JS.ACK.S.c.", 3) == (b"", 0)


def test_empty_run_and_count_new() -> None:
    assert build_frames([], b" 1", b"$JS.ACK.S.c.", 3) == (b"", 0)
    assert count_new(run(9, redeliver=4)) == 6
