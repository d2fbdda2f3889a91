"""The ``jetstream`` PySpark data source: batch and streaming reads, batch and streaming writes.

Theory of operation (the facts behind it: ``reference/spark-pipeline.md``):

* Register once per session: ``spark.dataSource.register(JetStreamDataSource)``, then
  ``spark.read/readStream.format("jetstream")`` and ``df.write/writeStream.format("jetstream")``.
* **Offsets are stream sequences in Spark's checkpoint** (``pipeline.plan``): the source never
  acks and keeps no durable consumer, so a query killed anywhere and restarted from its
  checkpoint re-plans the same ``[start, end)`` ranges and reads every message exactly once.
  ``partitions(start, end)`` is arithmetic only — no server call — so a re-planned batch gets
  the same tasks.  ``latestOffset`` asks the server (``STREAM.INFO``) for ``last_seq + 1``,
  clips it by ``maxMessagesPerTrigger`` (a ``ReadMaxRows`` limit) and, under
  ``Trigger.AvailableNow``, by the target fixed in ``prepareForTriggerAvailableNow``.
  ``maxMessagesPerTrigger`` counts sequences: with a subject filter or deleted messages a batch
  holds fewer rows.
* ``failOnDataLoss`` (default true): a batch whose start lies below the stream's first
  sequence (purged, aged out) fails the query; false skips the gap (the reading consumer starts
  at the first sequence still there).
* Each task reads its range statelessly (``natsio.RangeReader``) on a fresh event loop and
  yields ``pyarrow.RecordBatch``es in the session's Arrow schema.
* The sink publishes each row with a deterministic ``Nats-Msg-Id`` and returns from a task only
  after every PubAck arrived, so a re-run task or micro-batch is dropped by the stream's
  duplicate window (``duplicate_window``, default 2 minutes).  **Beyond that window a re-run
  publishes duplicates**: size the target stream's window to cover your retry horizon.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pipeline import headers as hdrs
from pipeline import natsio, publish
from pipeline.plan import (
    EARLIEST,
    LATEST,
    DataLossError,
    OptionError,
    SinkOptions,
    SourceOptions,
    check_data_loss,
    clip_end,
    make_offset,
    normalize_headers,
    offset_next,
    row_msg_id,
    split_range,
)

log = logging.getLogger(__name__)

SCHEMA = (
    "stream STRING NOT NULL, subject STRING NOT NULL, seq BIGINT NOT NULL, "
    "timestamp TIMESTAMP NOT NULL, headers MAP<STRING, ARRAY<STRING>>, data BINARY NOT NULL"
)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- planning against the server (driver side) ---------------------------------


async def _resolve(opts: SourceOptions, streaming: bool) -> tuple[int, int, int, int]:
    """``(first_seq, last_seq, start_next, end_next)`` for the options, from the server."""
    nc = await natsio.connect(opts.conn, name="trijet-spark-plan")
    try:
        first, last = await natsio.stream_state(nc, opts.conn.api_prefix, opts.stream)
        if opts.starting_timestamp_ns is not None:
            at = await natsio.seq_at_time(opts.conn, nc, opts.stream, opts.starting_timestamp_ns)
            start = at if at is not None else last + 1
        else:
            pos = opts.starting_sequence or (LATEST if streaming else EARLIEST)
            if pos == EARLIEST:
                start = max(first, 1)
            elif pos == LATEST:
                start = last + 1
            else:
                start = int(pos)
        end = last + 1
        if opts.ending_timestamp_ns is not None:
            at = await natsio.seq_at_time(opts.conn, nc, opts.stream, opts.ending_timestamp_ns)
            end = min(end, at if at is not None else last + 1)
        if isinstance(opts.ending_sequence, int):
            end = min(end, opts.ending_sequence + 1)
        return first, last, start, max(start, end)
    finally:
        await nc.close()


def _loss_guard(opts: SourceOptions, start_next: int, first: int, last: int) -> None:
    lost = check_data_loss(start_next, first, last)
    if lost and opts.fail_on_data_loss:
        raise DataLossError(
            f"stream {opts.stream}: sequences [{start_next}, {start_next + lost}) are gone "
            f"(first_seq is now {first}); set failOnDataLoss=false to skip them"
        )
    if lost:
        log.warning("data loss skipped stream=%s from=%d count=%d", opts.stream, start_next, lost)


# -- reading (executor side) ---------------------------------------------------


class SeqPartition(InputPartition):
    """One task: read ``[first, end)`` of the stream.  Carries everything it needs."""

    def __init__(self, opts: SourceOptions, first: int, end: int, check_loss: bool = False):
        super().__init__((first, end))
        self.opts, self.first, self.end, self.check_loss = opts, first, end, check_loss


def _partitions(opts: SourceOptions, start: int, end: int, check_loss: bool) -> list[SeqPartition]:
    ranges = split_range(start, end, opts.min_partitions, opts.max_messages_per_partition)
    return [SeqPartition(opts, r.first, r.end, check_loss) for r in ranges]


def _to_batch(opts: SourceOptions, cols: natsio.Columns, pa_schema: pa.Schema) -> pa.RecordBatch:
    """One chunk as an Arrow batch: the chunk's binary columns (``Columns.arrays``, cut out
    of the receive buffers by Arrow) converted in bulk -- the ASCII sequence and time tokens
    to integers, subjects to UTF-8, header blocks parsed into the multi-valued map
    (``hdrs.header_map_array``)."""
    subjects, seqs, times_ns, blocks, data = cols.arrays()
    n = len(seqs)
    ts_ns = times_ns.cast(pa.int64())
    headers_type = pa_schema.field("headers").type
    if opts.include_headers and blocks.null_count < n:
        headers = hdrs.header_map_array(blocks)
        if headers.type != headers_type:
            headers = headers.cast(headers_type)
    else:
        headers = pa.nulls(n, headers_type)
    arrays = [
        pa.repeat(pa.scalar(opts.stream, pa_schema.field("stream").type), n),
        hdrs.utf8_array(subjects).cast(pa_schema.field("subject").type),
        seqs.cast(pa_schema.field("seq").type),
        pc.divide(ts_ns, 1000).cast(pa_schema.field("timestamp").type),
        headers,
        data.cast(pa_schema.field("data").type),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa_schema)


def read_partition(p: SeqPartition, schema: StructType) -> Iterator[pa.RecordBatch]:
    """Yield the partition's messages as Arrow batches (a fresh loop and connection)."""
    pa_schema = to_arrow_schema(schema, timezone="UTC")
    opts = p.opts
    loop = asyncio.new_event_loop()
    reader = natsio.RangeReader(
        opts.conn,
        opts.stream,
        p.first,
        p.end,
        opts.filter_subjects,
        include_headers=opts.include_headers,
        fetch_batch=opts.fetch_batch,
        fetch_timeout_s=opts.fetch_timeout_ms / 1000,
    )
    try:
        loop.run_until_complete(reader.open())
        if p.check_loss:
            # on the reader's connection (its consumer reads nothing before next_chunk)
            nc = reader.nc or loop.run_until_complete(natsio.connect(opts.conn))
            try:
                first, last = loop.run_until_complete(
                    natsio.stream_state(nc, opts.conn.api_prefix, opts.stream)
                )
            finally:
                if nc is not reader.nc:
                    loop.run_until_complete(nc.close())
            _loss_guard(opts, p.first, first, last)
        while True:
            cols = loop.run_until_complete(reader.next_chunk())
            if cols is None:
                break
            yield _to_batch(opts, cols, pa_schema)
    finally:
        try:
            loop.run_until_complete(reader.close())
        finally:
            loop.close()


class JetStreamBatchReader(DataSourceReader):
    """Batch read: start/end resolved once at planning, then split into sequence ranges."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts, self.schema = opts, schema

    def partitions(self) -> list[SeqPartition]:
        first, last, start, end = _run(_resolve(self.opts, streaming=False))
        _loss_guard(self.opts, start, first, last)
        # the start is checked again by each task: a purge between planning and reading
        return _partitions(self.opts, start, end, check_loss=self.opts.fail_on_data_loss)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeqPartition):
            return iter(())  # Spark plans one placeholder task for an empty partition list
        return read_partition(partition, self.schema)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming read: offsets ``{"stream", "next"}`` in the checkpoint (module doc)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts, self.schema = opts, schema
        self._available_now_target: int | None = None

    def _state(self) -> tuple[int, int]:
        async def go() -> tuple[int, int]:
            nc = await natsio.connect(self.opts.conn, name="trijet-spark-offsets")
            try:
                return await natsio.stream_state(nc, self.opts.conn.api_prefix, self.opts.stream)
            finally:
                await nc.close()

        return _run(go())

    def initialOffset(self) -> dict[str, Any]:
        _, _, start, _ = _run(_resolve(self.opts, streaming=True))
        return make_offset(self.opts.stream, start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_messages_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _, last = self._state()
        self._available_now_target = last + 1

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        first, last = self._state()
        if start is None:
            start = self.initialOffset()
        start_next = offset_next(start, self.opts.stream)
        _loss_guard(self.opts, start_next, first, last)
        if not self.opts.fail_on_data_loss:
            start_next = max(start_next, min(first, last + 1))
        available = last + 1
        if self._available_now_target is not None:
            available = min(available, self._available_now_target)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if limit is None:
            max_rows = self.opts.max_messages_per_trigger
        end = clip_end(start_next, available, max_rows)
        return make_offset(self.opts.stream, max(end, offset_next(start, self.opts.stream)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[SeqPartition]:
        a = offset_next(start, self.opts.stream)
        b = offset_next(end, self.opts.stream)
        return _partitions(self.opts, a, b, check_loss=self.opts.fail_on_data_loss)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeqPartition):
            return iter(())  # Spark plans one placeholder task for an empty partition list
        return read_partition(partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in the checkpoint; the source never acks."""


# -- writing -------------------------------------------------------------------


@dataclass
class PublishCommit(WriterCommitMessage):
    """One task's totals."""

    published: int
    duplicates: int
    retries: int


def _rows_of(batch: pa.RecordBatch) -> Iterator[tuple[str | None, Any, Any, str | None]]:
    names = batch.schema.names
    if "data" not in names:
        raise OptionError("the sink needs a data column (binary or string)")
    cols = {
        n: batch.column(n).to_pylist()
        for n in ("subject", "data", "headers", "msg_id")
        if n in names
    }
    n = batch.num_rows
    none = [None] * n
    yield from zip(
        cols.get("subject", none),
        cols["data"],
        cols.get("headers", none),
        cols.get("msg_id", none),
        strict=True,
    )


def _messages_of(opts: SinkOptions, batch: pa.RecordBatch) -> list[tuple[str, bytes, bytes | None]]:
    """A batch's rows as ``(subject, payload, header block)``: the row's headers plus
    ``Nats-Msg-Id`` (``row_msg_id``) and ``Nats-Expected-Stream`` when set."""
    out: list[tuple[str, bytes, bytes | None]] = []
    append = out.append
    expected = opts.expected_stream
    for subject, data, raw_headers, msg_id in _rows_of(batch):
        subject = opts.subject or subject
        if not subject:
            raise OptionError("row without subject: set option subject or a subject column")
        if data is None:
            raise OptionError("row with null data")
        if isinstance(data, str):
            data = data.encode()
        headers = normalize_headers(raw_headers) if raw_headers else {}
        mid = row_msg_id(opts.msg_id, subject, data, headers, msg_id, prefix=opts.msg_id_prefix)
        if not headers and not expected and mid:
            append((subject, data, hdrs.msg_id_block(mid)))
            continue
        set_here = {"Nats-Msg-Id": mid, "Nats-Expected-Stream": expected}
        pairs = [(k, v) for k, v in headers.items() if not set_here.get(k)]
        pairs += [(k, [v]) for k, v in set_here.items() if v]
        append((subject, data, hdrs.encode_headers(pairs)))
    return out


async def _publish_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> PublishCommit:
    nc = await natsio.connect(opts.conn, name="trijet-spark-write", raw_headers=True)
    pub = publish.Publisher(nc, max_inflight=opts.max_inflight, timeout_s=opts.timeout_ms / 1000)
    try:
        await pub.start()
        it = iter(batches)
        while True:
            # Spark's iterator blocks on the JVM's socket: wait for it in a thread so the loop
            # keeps reading PubAcks meanwhile (a client that stops reading is a slow consumer)
            batch = await asyncio.to_thread(next, it, None)
            if batch is None:
                break
            await pub.publish_many(_messages_of(opts, batch))
        r = await pub.flush()
        return PublishCommit(r.published, r.duplicates, r.retries)
    finally:
        try:
            await pub.close()
        finally:
            await nc.close()


class JetStreamWriter(DataSourceArrowWriter):
    """Batch sink: columns ``subject``/option ``subject``, ``data``, ``headers``, ``msg_id``."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        return _run(_publish_batches(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, PublishCommit)]
        log.info(
            "jetstream sink committed tasks=%d published=%d duplicates=%d",
            len(done),
            sum(m.published for m in done),
            sum(m.duplicates for m in done),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publishes cannot be undone; a re-run is deduplicated within the window."""
        log.warning("jetstream sink aborted tasks=%d", len(messages))


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: each micro-batch as the batch sink; re-runs deduplicated by msg id."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        return _run(_publish_batches(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, PublishCommit)]
        log.info(
            "jetstream sink batch=%d published=%d duplicates=%d",
            batchId,
            sum(m.published for m in done),
            sum(m.duplicates for m in done),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("jetstream sink batch=%d aborted", batchId)


class JetStreamDataSource(DataSource):
    """``format("jetstream")``: see the module doc and README for options."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> JetStreamBatchReader:
        return JetStreamBatchReader(SourceOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> JetStreamStreamReader:
        opts = SourceOptions.parse(self.options)
        if opts.ending_sequence is not None or opts.ending_timestamp_ns is not None:
            raise OptionError("endingSequence/endingTimestamp are for batch reads only")
        return JetStreamStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        return JetStreamWriter(SinkOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> JetStreamStreamWriter:
        return JetStreamStreamWriter(SinkOptions.parse(self.options))
