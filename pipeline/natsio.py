"""The JetStream wire work of the Spark source and sink, over nats-py (asyncio).

Theory of operation: only the public NATS/JetStream API is used, so the same code runs against
trijet and nats-server.  Nothing here keeps state between calls: Spark pickles readers and
writers to worker processes and reuses those workers, so each task opens its own connection on
its own event loop and closes it when done.

* ``stream_state`` — one ``STREAM.INFO`` request: ``(first_seq, last_seq)``.
* ``seq_at_time`` — the first sequence stored at or after a time: an ephemeral consumer with
  ``deliver_policy=by_start_time`` delivers one message (or says none is pending).
* ``RangeReader`` — reads the sequence range ``[first, end)`` through an ephemeral, R1, memory,
  ``ack_policy=none`` pull consumer starting at ``first`` (with the query's subject filters).
  Pull responses arrive on a ``pipeline.wire`` connection (nats-py when the credentials need
  nkeys/JWT); the control requests go through nats-py.
  Pull requests are pipelined (two outstanding).  Each message's stream sequence, time and
  pending count come from its ``$JS.ACK`` reply subject; on the raw connection a run of
  deliveries is matched line by line with one regex and kept as two offsets per frame into the
  receive buffer (``Columns``: ``_Run``) until Arrow cuts and converts a whole chunk
  (``header_map_array`` for the headers, every value of a repeated
  name kept).  The reader stops **by sequence**: at a message whose sequence is ``>= end``
  (dropped) or at ``end - 1`` itself — never by counting messages, because filters and
  deletions leave holes.  A delivery (or the consumer create) saying nothing is pending is
  only a hint: the reader then asks the stream (``next_stored``: ``STREAM.MSG.GET`` with
  ``next_by_subj``, a linearizable read) for the first stored sequence after the last one
  read, and stops only when none is left below ``end`` (a new stream leader that has not
  applied the whole log yet may report 0 pending while messages of the range exist).
  No progress for ``fetch_timeout`` fails the task (Spark retries it); a partial range is
  never reported as complete.
* ``Publisher`` (the sink) is in ``pipeline.publish``; header blocks in ``pipeline.headers``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from nats.aio.client import Client
from nats.aio.msg import Msg

from pipeline import wire
from pipeline.headers import _arange, header_pairs
from pipeline.plan import ConnectOptions

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
CONSUMER_IDLE_NS = 60 * 1_000_000_000
"""An abandoned ephemeral consumer (task killed) is removed by the server after this."""


class JetStreamError(RuntimeError):
    """A JetStream API request returned an error (message carries code and description)."""


RAW_HEADERS = "\x00raw"
"""Key under which ``RawHeadersClient`` adds a message's whole header block to its headers."""


DirectHandler = Callable[[bytes, bytes, bytes | None], None]
"""``handler(subject, payload, header_block)`` for a subscription served without ``Msg``."""


class RawHeadersClient(Client):
    """nats-py folds a repeated header into one value, both ways.  This client keeps a
    received message's raw block too (under ``RAW_HEADERS``), and publishes a header block
    given as bytes (``encode_headers``) as it is — nats-py 2.x's two hooks.

    Two lean paths for the sink, still on nats-py's connection and parser: ``send_raw``
    queues ready-made ``PUB``/``HPUB`` frames (a whole batch in one write), and a
    subscription registered with ``direct`` gets its messages by a plain call — no ``Msg``
    object, header dict, queue or task per message (the PubAcks)."""

    _direct: dict[int, DirectHandler] | None = None

    def direct(self, sid: int, handler: DirectHandler) -> None:
        """Deliver subscription ``sid``'s messages to ``handler`` (synchronously)."""
        if self._direct is None:
            self._direct = {}
        self._direct[sid] = handler

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
    ) -> None:
        handler = self._direct.get(sid) if self._direct else None
        if handler is None:
            await super()._process_msg(sid, subject, reply, data, headers)
            return
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        handler(subject, data, headers or None)

    async def send_raw(self, frames: bytes, count: int) -> None:
        """Queue ``count`` ready-made publish frames and kick the flusher."""
        self.stats["out_msgs"] += count
        self.stats["out_bytes"] += len(frames)
        await self._send_command(frames)
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    async def _send_publish(
        self, subject: str, reply: str, payload: bytes, payload_size: int, headers: Any
    ) -> None:
        if not isinstance(headers, bytes):
            await super()._send_publish(subject, reply, payload, payload_size, headers)
            return
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        head = f"HPUB {subject} {reply} {len(headers)} {len(headers) + payload_size}\r\n"
        await self._send_command(head.encode() + headers + payload + b"\r\n")
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    async def _process_headers(self, headers: Any) -> dict[str, Any] | None:
        hdr = await super()._process_headers(headers)  # type: ignore[misc]
        if headers:
            out: dict[str, Any] = dict(hdr or {})
            out[RAW_HEADERS] = bytes(headers)
            return out
        return hdr  # type: ignore[no-any-return]


async def connect(
    conn: ConnectOptions, name: str = "trijet-spark", *, raw_headers: bool = False
) -> Client:
    """A connection to ``conn.servers`` with its credentials and TLS settings (``raw_headers``:
    messages' headers also carry their raw block, see ``RawHeadersClient``)."""
    kw: dict[str, Any] = {
        "servers": list(conn.servers),
        "name": name,
        "connect_timeout": 5,
        "max_reconnect_attempts": 10,
        "reconnect_time_wait": 0.5,
        "allow_reconnect": True,
    }
    if conn.user:
        kw["user"], kw["password"] = conn.user, conn.password or ""
    if conn.token:
        kw["token"] = conn.token
    if conn.creds:
        kw["user_credentials"] = conn.creds
    if conn.nkeys_seed:
        kw["nkeys_seed"] = conn.nkeys_seed
    if conn.tls_ca or conn.tls_cert or any(s.startswith("tls://") for s in conn.servers):
        ctx = ssl.create_default_context(cafile=conn.tls_ca)
        if conn.tls_cert:
            ctx.load_cert_chain(conn.tls_cert, conn.tls_key)
        kw["tls"] = ctx
        if conn.tls_hostname:
            kw["tls_hostname"] = conn.tls_hostname
    nc = RawHeadersClient() if raw_headers else Client()
    await nc.connect(**kw)
    return nc


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JetStream API request; raises ``JetStreamError`` on an error reply."""
    payload = json.dumps(body).encode() if body is not None else b""
    reply = await nc.request(subject, payload, timeout=REQUEST_TIMEOUT_S)
    resp: dict[str, Any] = json.loads(reply.data)
    err = resp.get("error")
    if err:
        raise JetStreamError(
            f"{subject}: {err.get('code')} {err.get('err_code')} {err.get('description')}"
        )
    return resp


NO_MESSAGE_FOUND = 10037
"""JetStream's error code for a ``STREAM.MSG.GET`` that matched no message."""


async def next_stored(
    nc: Client, prefix: str, stream: str, seq: int, filters: Sequence[str] = ()
) -> int | None:
    """The first sequence ``>= seq`` stored in ``stream`` on any of ``filters`` (all subjects
    when empty), or None: one ``STREAM.MSG.GET`` with ``next_by_subj`` per filter."""
    best: int | None = None
    for f in filters or (">",):
        body = json.dumps({"seq": seq, "next_by_subj": f}).encode()
        reply = await nc.request(f"{prefix}.STREAM.MSG.GET.{stream}", body, REQUEST_TIMEOUT_S)
        resp: dict[str, Any] = json.loads(reply.data)
        err = resp.get("error")
        if err:
            if err.get("err_code") == NO_MESSAGE_FOUND or err.get("code") == 404:
                continue
            raise JetStreamError(
                f"{stream} MSG.GET: {err.get('code')} {err.get('err_code')} "
                f"{err.get('description')}"
            )
        found = int(resp["message"]["seq"])
        best = found if best is None else min(best, found)
    return best


async def stream_state(nc: Client, prefix: str, stream: str) -> tuple[int, int]:
    """``(first_seq, last_seq)`` of ``stream``."""
    info = await api(nc, f"{prefix}.STREAM.INFO.{stream}")
    state = info.get("state") or {}
    return int(state.get("first_seq", 0)), int(state.get("last_seq", 0))


@dataclass
class AckMeta:
    """What a ``$JS.ACK`` reply subject says about a delivered message."""

    stream_seq: int
    timestamp_ns: int
    pending: int


def parse_ack_subject(reply: str) -> AckMeta:
    """Parse ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` (and the
    domain form with ``<domain>.<account hash>`` before the stream and a random token last)."""
    t = reply.split(".")
    if len(t) == 9:
        return AckMeta(int(t[5]), int(t[7]), int(t[8]))
    if len(t) >= 12:
        return AckMeta(int(t[7]), int(t[9]), int(t[10]))
    raise ValueError(f"not a JetStream ack subject: {reply!r}")


def consumer_config(
    start_seq: int | None, start_time_ns: int | None, filters: Sequence[str]
) -> dict[str, Any]:
    """Config of the ephemeral reading consumer: R1, memory, no acks, idle clean-up."""
    cfg: dict[str, Any] = {
        "ack_policy": "none",
        "replay_policy": "instant",
        "num_replicas": 1,
        "mem_storage": True,
        "inactive_threshold": CONSUMER_IDLE_NS,
    }
    if start_time_ns is not None:
        from datetime import UTC, datetime

        secs, ns = divmod(start_time_ns, 1_000_000_000)
        dt = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        cfg["deliver_policy"] = "by_start_time"
        cfg["opt_start_time"] = f"{dt}.{ns:09d}Z"
    else:
        cfg["deliver_policy"] = "by_start_sequence"
        cfg["opt_start_seq"] = int(start_seq or 1)
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    elif filters:
        cfg["filter_subjects"] = list(filters)
    return cfg


class _Rows:
    """Deliveries that came one by one (nats-py, or frames ``_fast`` left): column lists."""

    __slots__ = ("data", "headers", "seqs", "subjects", "times_ns")

    def __init__(self) -> None:
        self.subjects: list[bytes] = []
        self.seqs: list[bytes] = []
        self.times_ns: list[bytes] = []
        self.headers: list[bytes | None] = []
        self.data: list[bytes] = []

    def __len__(self) -> int:
        return len(self.seqs)

    def pop(self) -> None:
        for col in (self.subjects, self.seqs, self.times_ns, self.headers, self.data):
            col.pop()

    def last_seq(self) -> int:
        return int(self.seqs[-1])

    def arrays(self, keep_headers: bool) -> list[pa.Array]:
        b = pa.binary()
        heads = self.headers if keep_headers else [None] * len(self.seqs)
        return [pa.array(c, b) for c in (self.subjects, self.seqs, self.times_ns, heads, self.data)]


_I32_2 = pa.scalar(2, pa.int32())


class _Run:
    """A run of plain deliveries as ``_fast`` found them in one receive buffer: ``offs`` is
    ``[p0, l0, p1, l1, …, p_k]`` -- frame ``i``'s line is ``buf[p_i:l_i]`` (with its CRLF), its
    header block and payload ``buf[l_i:p_{i+1} - 2]`` -- and nothing is copied until the chunk
    becomes Arrow arrays (``arrays``: one pass of Arrow kernels over the whole run)."""

    __slots__ = ("buf", "offs")

    def __init__(self, buf: bytes, offs: list[int]) -> None:
        self.buf, self.offs = buf, offs

    def __len__(self) -> int:
        return len(self.offs) >> 1

    def pop(self) -> None:
        del self.offs[-2:]

    def last_seq(self) -> int:
        m = _JS_DELIVERY.match(self.buf, self.offs[-3])
        assert m is not None  # matched when the run was found
        return int(m[1])

    def arrays(self, keep_headers: bool) -> list[pa.Array]:
        return _cut(self.buf, pa.array(self.offs, pa.int32()), keep_headers)

    @staticmethod
    def merged(runs: list[_Run]) -> tuple[bytes, pa.Array]:
        """Several runs as one: their bytes joined, offsets shifted (Arrow per run), so a
        chunk read in many receive buffers is cut by one pass of kernels."""
        bufs: list[memoryview] = []
        offs: list[pa.Array] = []
        at = 0
        for r in runs:
            first, end = r.offs[0], r.offs[-1]
            bufs.append(memoryview(r.buf)[first:end])
            shift = pa.scalar(at - first, pa.int32())
            offs.append(pc.add(pa.array(r.offs[:-1], pa.int32()), shift))
            at += end - first
        offs.append(pa.array([at], pa.int32()))
        return b"".join(bufs), pa.concat_arrays(offs)


def _cut(buf: bytes, o: pa.Array, keep_headers: bool) -> list[pa.Array]:
    """``_Run.arrays`` for ``buf`` and the run's offsets as an int32 array."""
    k = len(o) >> 1
    b = pa.binary()
    data = pa.py_buffer(buf)
    # elements 2i: frame i's line, 2i + 1: its header block + payload + CRLF
    frames = pa.Array.from_buffers(b, 2 * k, [None, o.buffers()[1], data])
    ar = _arange(k)
    lines = frames.take(pc.multiply(ar, 2))
    # the line is checked by _JS_DELIVERY: "H?MSG subject sid $JS.ACK.<9 tokens> [hlen] n"
    subjects = pc.list_element(pc.split_pattern(lines, b" ", max_splits=2), 1)
    acks = pc.split_pattern(lines, b".", max_splits=4, reverse=True)  # [… sseq cseq ts …]
    seqs, times = pc.list_element(acks, 1), pc.list_element(acks, 3)
    is_h = pc.starts_with(lines, b"H")
    hmsgs = pc.sum(is_h).as_py() or 0
    tail = pc.list_element(pc.split_pattern(lines, b" ", max_splits=2, reverse=True), 1)
    if hmsgs == k:
        hlen = tail.cast(pa.int32())
    elif hmsgs == 0:
        hlen = pa.repeat(pa.scalar(0, pa.int32()), k)
    else:
        hlen = pc.if_else(is_h, tail, pa.scalar(b"0", b)).cast(pa.int32())
    # offsets of [header block, payload, CRLF] per frame: l_i, l_i + hlen_i, p_{i+1} - 2
    starts = pc.take(o, pc.add(pc.multiply(ar, 2), 1))
    ends = pc.subtract(pc.take(o, pc.multiply(pc.add(ar, 1), 2)), _I32_2)
    parts = pa.concat_arrays([starts, pc.add(starts, hlen), ends, ends.slice(k - 1)])
    j = _arange(3 * k)
    q = pc.divide(j, 3)
    perm = pa.concat_arrays(
        [
            pc.add(pc.multiply(pc.subtract(j, pc.multiply(q, 3)), k), q),
            pa.array([3 * k], q.type),
        ]
    )
    body = pa.Array.from_buffers(b, 3 * k, [None, parts.take(perm).buffers()[1], data])
    a3 = pc.multiply(ar, 3)
    payloads = body.take(pc.add(a3, 1))
    if not keep_headers or hmsgs == 0:
        headers = pa.nulls(k, b)
    else:
        headers = body.take(a3)
        if hmsgs != k:
            headers = pc.if_else(is_h, headers, pa.scalar(None, b))
    return [subjects, seqs, times, headers, payloads]


class Columns:
    """A chunk of read messages, as they came off the wire, in delivery order: runs of the
    receive buffer (``_Run``, from ``RangeReader._fast``) and rows decoded one by one
    (``_Rows``), turned into Arrow arrays by ``arrays`` when the chunk becomes a batch.

    ``arrays()`` gives binary arrays: subjects (UTF-8 bytes), the stream sequences and times
    (ns) as the ASCII decimal tokens of the ack subject, header blocks (``NATS/1.0\\r\\n…``,
    null for none or when headers are not kept), payloads.
    """

    def __init__(self, keep_headers: bool = True) -> None:
        self.keep_headers = keep_headers
        self._parts: list[_Run | _Rows] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add_run(self, buf: bytes, offs: list[int]) -> None:
        """Frames found by ``_fast`` (see ``_Run``; ``offs`` ends with the run's end)."""
        self._parts.append(_Run(buf, offs))
        self._n += len(offs) >> 1

    def append(
        self, subject: bytes, seq: bytes, ts_ns: bytes, header: bytes | None, data: bytes
    ) -> None:
        rows = self._parts[-1] if self._parts else None
        if not isinstance(rows, _Rows):
            rows = _Rows()
            self._parts.append(rows)
        rows.subjects.append(subject)
        rows.seqs.append(seq)
        rows.times_ns.append(ts_ns)
        rows.headers.append(header)
        rows.data.append(data)
        self._n += 1

    def pop(self) -> None:
        """Drop the last message."""
        last = self._parts[-1]
        last.pop()
        self._n -= 1
        if not len(last):
            self._parts.pop()

    def last_seq(self) -> int | None:
        return self._parts[-1].last_seq() if self._parts else None

    def arrays(self) -> list[pa.Array]:
        """``[subjects, seqs, times_ns, headers, data]`` (binary arrays, see the class doc)."""
        if not self._parts:
            return [pa.array([], pa.binary()) for _ in range(5)]
        cols: list[list[pa.Array]] = []
        runs: list[_Run] = []
        for p in [*self._parts, None]:
            if isinstance(p, _Run):
                runs.append(p)
                continue
            if len(runs) == 1:
                cols.append(runs[0].arrays(self.keep_headers))
            elif runs:
                cols.append(_cut(*_Run.merged(runs), self.keep_headers))
            runs = []
            if p is not None:
                cols.append(p.arrays(self.keep_headers))
        if len(cols) == 1:
            return cols[0]
        return [pa.concat_arrays(list(c)) for c in zip(*cols, strict=True)]

    def seq_list(self) -> list[int]:
        return [int(x) for x in self.arrays()[1].to_pylist()]

    def subject_list(self) -> list[str]:
        return [x.decode() for x in self.arrays()[0].to_pylist()]

    def header_list(self) -> list[list[tuple[str, list[str]]] | None]:
        return [header_pairs(h) for h in self.arrays()[3].to_pylist()]

    @property
    def data(self) -> list[bytes]:
        return list(self.arrays()[4].to_pylist())


_JS_DELIVERY = re.compile(
    rb"H?MSG [^ \r\n]++ [^ \r\n]++ \$JS\.ACK\.[^ .\r\n]++\.[^ .\r\n]++\."
    rb"\d++\.(\d++)\.\d++\.\d++\.(\d++)(?: \d++)? (\d++)\r\n"
)
"""A pull delivery's ``MSG``/``HMSG`` line with a 9-token ack subject: stream seq, pending,
size.  Other forms (domains) take the generic path."""


class RangeReader:
    """Reads the messages with sequences in ``[first, end)`` (see the module doc).

    Use ``await open()``, then ``await next_chunk()`` until it returns None, then
    ``await close()`` (always, also after an error).

    Cancellation: cancelling ``next_chunk`` loses nothing the caller had; ``close`` still
    deletes the consumer (the server also drops it after ``CONSUMER_IDLE_NS`` idle).
    """

    def __init__(
        self,
        conn: ConnectOptions,
        stream: str,
        first: int,
        end: int,
        filters: Sequence[str] = (),
        *,
        include_headers: bool = True,
        fetch_batch: int = 1024,
        fetch_timeout_s: float = 5.0,
        raw: bool | None = None,
    ) -> None:
        self.conn, self.stream, self.first, self.end = conn, stream, first, end
        self.use_raw = wire.supports(conn) if raw is None else raw
        self.filters = tuple(filters)
        self.include_headers = include_headers
        self.fetch_batch = fetch_batch
        self.fetch_timeout_s = fetch_timeout_s
        self.nc: Client | None = None
        self.consumer: str | None = None
        self.done = end <= first
        self._chunk = Columns(include_headers)
        self._ready = asyncio.Event()
        self._error: BaseException | None = None
        self._requested = 0
        self._received_for_requests = 0
        self._inbox = ""
        self._sub: Any = None
        self._raw: wire.RawConnection | None = None
        self._last_seq = first - 1
        """The highest sequence received so far."""
        self._check_from: int | None = None
        """Set when the server said nothing is pending: verify by sequence from here."""

    async def open(self) -> None:
        """Connect and create the consumer (nothing to do for an empty range)."""
        if self.done:
            return
        self.nc = await connect(
            self.conn, name=f"trijet-spark-read-{os.getpid()}", raw_headers=not self.use_raw
        )
        prefix = self.conn.api_prefix
        self._inbox = self.nc.new_inbox()
        if self.use_raw:
            self._raw = wire.RawConnection(self.conn, f"trijet-spark-data-{os.getpid()}")
            await self._raw.connect()
            self._raw.subscribe(self._inbox)
            self._raw.start(self._on_raw, self._fail, self._fast)
        else:
            self._sub = await self.nc.subscribe(self._inbox, cb=self._on_msg)
        cfg = consumer_config(self.first, None, self.filters)
        info = await api(
            self.nc,
            f"{prefix}.CONSUMER.CREATE.{self.stream}",
            {"stream_name": self.stream, "config": cfg},
        )
        self.consumer = info["name"]
        if int(info.get("num_pending", 0)) == 0 and not await self._more_stored():
            self.done = True
            return
        self._pull()
        self._pull()

    def _pull(self) -> None:
        assert self.nc is not None
        remaining = self.end - self.first
        batch = max(1, min(self.fetch_batch, remaining))
        body = json.dumps({"batch": batch, "expires": int(self.fetch_timeout_s * 1e9)}).encode()
        self._requested += batch
        subject = f"{self.conn.api_prefix}.CONSUMER.MSG.NEXT.{self.stream}.{self.consumer}"
        if self._raw is not None:
            self._raw.publish(subject, body, self._inbox)
        else:
            self._pending_pub = asyncio.ensure_future(
                self.nc.publish(subject, body, reply=self._inbox)
            )

    async def _on_msg(self, msg: Msg) -> None:
        """nats-py data plane (credentials the raw connection cannot present)."""
        if self.done:
            return
        hdrs = msg.headers or {}
        if not msg.reply:
            self._status(hdrs.get("Status", ""), hdrs.get("Description", ""))
            return
        t = msg.reply.encode().split(b".")
        if len(t) != 9 and len(t) < 12:
            self._fail(ValueError(f"not a JetStream ack subject: {msg.reply!r}"))
            return
        block: Any = hdrs.get(RAW_HEADERS) if self.include_headers else None
        self._deliver(msg.subject.encode(), t, block, msg.data)

    def _on_raw(self, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes) -> None:
        """Raw data plane (``pipeline.wire``): the frames ``_fast`` left (statuses, domains)."""
        if self.done:
            return
        if reply is None:
            status = wire.parse_headers(hdr)[0] if hdr else None
            desc = hdr.split(b"\r\n", 1)[0][13:].decode(errors="replace") if hdr else ""
            self._status(status or "", desc)
            return
        t = reply.split(b".")
        if len(t) != 9 and len(t) < 12:
            self._fail(ValueError(f"not a JetStream ack subject: {reply!r}"))
            return
        self._deliver(subject, t, hdr if self.include_headers else None, data)

    def _fast(self, buf: bytes, pos: int, n: int) -> int:
        """Find the run of plain deliveries at ``buf[pos:n]`` (see ``wire.FastPath``).

        Per message only the line is matched and two offsets kept (``_Run``); subjects,
        sequences, times, header blocks and payloads are cut out of ``buf`` by Arrow when the
        chunk becomes a batch.  The stop rules are checked on the run's last message
        (deliveries come in sequence order).
        """
        if self.done:
            return pos
        match = _JS_DELIVERY.match
        offs: list[int] = []
        add = offs.append
        last = None
        while pos < n:
            m = match(buf, pos)
            if m is None:
                break
            start = m.end()
            end = start + int(m[3])
            if end + 2 > n:
                break
            add(pos)
            add(start)
            pos = end + 2
            last = m
        if last is not None:
            add(pos)
            self._chunk.add_run(buf, offs)
            self._received_for_requests += len(offs) >> 1
            self._after(int(last[1]), last[2] == b"0")
        return pos

    def _deliver(self, subject: bytes, t: list[bytes], header: bytes | None, data: bytes) -> None:
        """One delivery with its split ack subject ``t`` (9 tokens, or 12+ with a domain)."""
        seq, ts, pending = (t[5], t[7], t[8]) if len(t) == 9 else (t[7], t[9], t[10])
        self._received_for_requests += 1
        self._chunk.append(subject, seq, ts, header, data)
        self._after(int(seq), pending == b"0")

    def _after(self, last_seq: int, none_pending: bool) -> None:
        """Messages up to ``last_seq`` were appended: drop any past the range, stop or pull.

        ``none_pending`` (the server's count) never stops the read by itself: it asks
        ``next_chunk`` to check by sequence (``_more_stored``)."""
        c = self._chunk
        if last_seq >= self.end:
            while len(c) and (c.last_seq() or 0) >= self.end:
                c.pop()
            self._finish()
            return
        self._last_seq = last_seq
        if last_seq >= self.end - 1:
            self._finish()
            return
        self._maybe_pull()
        if none_pending:
            self._check_from = last_seq + 1
            self._ready.set()
        elif len(c) >= self.fetch_batch:
            self._ready.set()

    async def _more_stored(self) -> bool:
        """True when the stream holds a message of the range after the last one read."""
        assert self.nc is not None
        nxt = await next_stored(
            self.nc, self.conn.api_prefix, self.stream, self._last_seq + 1, self.filters
        )
        return nxt is not None and nxt < self.end

    def _status(self, status: str, description: str) -> None:
        if status in ("404", "408", "409"):
            # a pull request ended without filling: count it as completed
            if status == "409" and "Exceeded" not in description:
                self._fail(JetStreamError(f"pull ended: {status} {description}"))
                return
            self._received_for_requests += self.fetch_batch
            self._maybe_pull()

    def _maybe_pull(self) -> None:
        # one request completes per fetch_batch messages: keep two outstanding.  A run of
        # deliveries (``_fast``) may complete more than one request at once, so top up in a
        # loop (at most two: each pull asks for fetch_batch more)
        for _ in range(2):
            if self._requested - self._received_for_requests > self.fetch_batch:
                return
            self._pull()

    def _finish(self) -> None:
        self.done = True
        self._ready.set()

    def _fail(self, e: BaseException) -> None:
        self._error = e
        self.done = True
        self._ready.set()

    async def next_chunk(self) -> Columns | None:
        """The next chunk of messages (in sequence order), or None when the range is read."""
        while True:
            if self._error is not None:
                raise self._error
            if self._check_from is not None and not self.done:
                # the server said nothing is pending: stop only if the stream agrees by sequence
                check, self._check_from = self._check_from, None
                if check > self._last_seq and not await self._more_stored():
                    self._finish()
                continue
            if len(self._chunk) >= self.fetch_batch or (self.done and len(self._chunk)):
                chunk, self._chunk = self._chunk, Columns(self.include_headers)
                return chunk
            if self.done:
                return None
            self._ready.clear()
            had = len(self._chunk)
            try:
                await asyncio.wait_for(self._ready.wait(), self.fetch_timeout_s * 2)
            except TimeoutError:
                if len(self._chunk) > had:
                    continue  # slow but moving: a chunk fills slower than the timeout
                raise JetStreamError(
                    f"no progress reading {self.stream} [{self.first}, {self.end}) within "
                    f"{self.fetch_timeout_s * 2:.1f}s (last sequence read {self._chunk.last_seq()})"
                ) from None

    async def close(self) -> None:
        """Delete the consumer (best effort) and close the connections."""
        nc, self.nc = self.nc, None
        self.done = True
        raw, self._raw = self._raw, None
        if raw is not None:
            await raw.close()
        if nc is None:
            return
        try:
            if self.consumer and nc.is_connected:
                await api(
                    nc, f"{self.conn.api_prefix}.CONSUMER.DELETE.{self.stream}.{self.consumer}"
                )
        except Exception as e:  # the consumer times out by itself (inactive_threshold)
            log.debug("consumer delete failed stream=%s err=%s", self.stream, e)
        finally:
            await nc.close()


async def seq_at_time(conn: ConnectOptions, nc: Client, stream: str, time_ns: int) -> int | None:
    """The first sequence stored at or after ``time_ns``, or None when there is none yet."""
    prefix = conn.api_prefix
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=0)
    info = await api(
        nc,
        f"{prefix}.CONSUMER.CREATE.{stream}",
        {"stream_name": stream, "config": consumer_config(None, time_ns, ())},
    )
    name = info["name"]
    try:
        if int(info.get("num_pending", 0)) == 0:
            return None
        await nc.publish(
            f"{prefix}.CONSUMER.MSG.NEXT.{stream}.{name}",
            json.dumps({"batch": 1, "expires": int(REQUEST_TIMEOUT_S * 1e9)}).encode(),
            reply=inbox,
        )
        while True:
            msg = await sub.next_msg(timeout=REQUEST_TIMEOUT_S)
            if msg.reply:
                return parse_ack_subject(msg.reply).stream_seq
            status = (msg.headers or {}).get("Status")
            if status in ("404", "408"):
                return None
    finally:
        await sub.unsubscribe()
        try:
            await api(nc, f"{prefix}.CONSUMER.DELETE.{stream}.{name}")
        except Exception as e:
            log.debug("consumer delete failed stream=%s err=%s", stream, e)
