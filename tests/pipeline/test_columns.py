"""The reader's bulk path (``RangeReader._fast`` runs cut by Arrow) against the one-by-one
path (``_on_raw``/``_deliver``) on the same bytes, through ``wire.RawConnection``'s receive
loop: same rows, same order, same stop by sequence.  No server: the frames are fed to the
loop's stream reader in pieces."""

from __future__ import annotations

import asyncio
import random

import pyarrow as pa
import pytest

from pipeline import wire
from pipeline.headers import encode_headers
from pipeline.jetstream import SCHEMA, _to_batch
from pipeline.natsio import Columns, RangeReader
from pipeline.plan import ConnectOptions, SourceOptions


class _Reader(RangeReader):
    """No connection: pulls are not sent."""

    def _maybe_pull(self) -> None:
        pass


class _Writer:
    def write(self, data: bytes) -> None:
        pass


def _frame(
    seq: int,
    subject: bytes,
    header: bytes | None,
    payload: bytes,
    pending: int,
    domain: bool = False,
) -> bytes:
    ts = 1_700_000_000_000_000_000 + seq
    reply = b"$JS.ACK.S.c0nsumer.1.%d.%d.%d.%d" % (seq, seq, ts, pending)
    if domain:  # the domain form: the generic path decodes it
        reply = b"$JS.ACK.hub.ACC.S.c0nsumer.1.%d.%d.%d.%d.r4nd" % (seq, seq, ts, pending)
    if header is None:
        return b"MSG %s 1 %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
    return b"HMSG %s 1 %s %d %d\r\n%s%s\r\n" % (
        subject,
        reply,
        len(header),
        len(header) + len(payload),
        header,
        payload,
    )


def _frames(n: int, rng: random.Random) -> bytes:
    """Deliveries 1..n: HMSG and MSG mixed, odd subjects and payloads, statuses, pings and
    domain-form acks between."""
    out = []
    for seq in range(1, n + 1):
        subject = rng.choice([b"a.b", b"x", "\u00e9t\u00e9.\u4e2d".encode(), b"a.b.c.d.e"])
        kind = rng.random()
        if kind < 0.4:
            header = encode_headers([("Nats-Msg-Id", [str(seq)])])
        elif kind < 0.5:
            header = encode_headers([("K", ["v", "w"]), ("A", [" b "])])
        else:
            header = None
        payload = rng.choice(
            [
                b"",
                b"MSG x 1 2\r\n",
                b"HMSG a b 3 4\r\n\r\n",
                bytes(rng.randbytes(rng.randrange(300))),
            ]
        )
        out.append(_frame(seq, subject, header, payload, n - seq, seq % 53 == 0))
        if seq % 97 == 0:
            out.append(b"HMSG _INBOX.x 1 28 28\r\nNATS/1.0 408 Request Timeout\r\n\r\n\r\n")
        if seq % 89 == 0:
            out.append(b"PING\r\n")
    return b"".join(out)


def _read(data: bytes, end: int, fast: bool, cuts: list[int], keep_headers: bool) -> Columns:
    async def go() -> Columns:
        conn = ConnectOptions(servers=("nats://127.0.0.1:1",))
        r = _Reader(conn, "S", 1, end, include_headers=keep_headers, fetch_batch=1 << 30)
        raw = wire.RawConnection(conn, "t")
        reader = asyncio.StreamReader()
        raw._reader, raw._writer = reader, _Writer()  # type: ignore[assignment]
        last = 0
        for c in [*cuts, len(data)]:
            reader.feed_data(data[last:c])
            last = c
        reader.feed_eof()
        with pytest.raises(wire.WireError):
            await raw._receive(r._on_raw, r._fast if fast else None)
        return r._chunk

    return asyncio.run(go())


@pytest.mark.parametrize("keep_headers", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_runs_equal_one_by_one(seed: int, keep_headers: bool) -> None:
    rng = random.Random(seed)
    n = 600
    data = _frames(n, rng)
    cuts = sorted(rng.sample(range(1, len(data)), 12))
    end = rng.randrange(n // 2, n + 2)  # a range ending inside the deliveries, or after them
    bulk = _read(data, end, True, cuts, keep_headers)
    single = _read(data, end, False, [], keep_headers)
    assert len(bulk) == len(single) == min(n, end - 1)
    assert bulk.seq_list() == single.seq_list() == list(range(1, min(n, end - 1) + 1))
    assert bulk.last_seq() == min(n, end - 1)
    for a, b in zip(bulk.arrays(), single.arrays(), strict=True):
        assert a.equals(b)
    assert bulk.subject_list() == single.subject_list()
    assert bulk.header_list() == single.header_list()
    assert bulk.data == single.data
    opts = SourceOptions.parse(
        {"servers": "nats://x:1", "stream": "S", "includeHeaders": str(keep_headers).lower()}
    )
    schema = pa.schema(
        [
            pa.field("stream", pa.string(), False),
            pa.field("subject", pa.string(), False),
            pa.field("seq", pa.int64(), False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), False),
            pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
            pa.field("data", pa.binary(), False),
        ]
    )
    assert "headers MAP<STRING, ARRAY<STRING>>" in SCHEMA
    got = _to_batch(opts, bulk, schema)
    assert got.equals(_to_batch(opts, single, schema))
    rows = got.to_pylist()
    assert rows[0]["seq"] == 1 and rows[-1]["seq"] == min(n, end - 1)
    if keep_headers:
        with_k = [r["headers"] for r in rows if r["headers"] and ("K", ["v", "w"]) in r["headers"]]
        assert with_k and all(h == [("K", ["v", "w"]), ("A", ["b"])] for h in with_k)
    else:
        assert all(r["headers"] is None for r in rows)


def test_pop_across_runs_and_rows() -> None:
    """``pop`` drops the last message whichever part holds it; ``last_seq`` follows."""
    data = b"".join(_frame(s, b"a", None, b"p%d" % s, 9) for s in range(1, 4))
    c = Columns()
    offs = [0]
    pos = 0
    for s in range(1, 4):
        pos = data.index(b"\r\n", pos) + 2
        offs.append(pos)
        pos += len(b"p%d" % s) + 2
        offs.append(pos)
    c.add_run(data, offs)
    c.append(b"b", b"4", b"5", None, b"q")
    assert len(c) == 4 and c.last_seq() == 4
    c.pop()
    assert len(c) == 3 and c.last_seq() == 3
    c.pop()
    assert c.seq_list() == [1, 2] and c.data == [b"p1", b"p2"] and c.last_seq() == 2
