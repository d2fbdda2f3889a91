"""Stream analytics on the ``jetstream`` source: per subject and one-minute window.

Theory of operation: one job, two shapes.

* **Batch** (default): read the stream (optionally a subject filter and a start time), and per
  ``(subject, window)`` compute count, bytes, payload size p50/p99, first/last sequence,
  duplicate ``Nats-Msg-Id``s (rows whose id another row in the group already carries) and
  sequence gaps (sequences between first and last that the group does not hold).  Rows with
  ``subject = "*"`` are the whole stream per window: there the gaps are deleted or missing
  messages.  Gaps and duplicates are counted inside one window; ones that straddle a window
  boundary are not.  Results go to Parquet (``--out``) and/or are published back into a
  stream through the sink (``--publish SUBJECT``, JSON per row, ``Nats-Msg-Id`` =
  ``<stream>:<subject>:<window end>`` so a re-run adds nothing inside the duplicate window).
* **Streaming** (``--streaming``): the same aggregation with a watermark on the message time
  (``--watermark``, default 2 minutes) in append mode: each window is emitted once, after the
  watermark passes its end (Spark moves the watermark at the end of a micro-batch to the
  latest event time seen minus the delay; rows older than the watermark are dropped); every
  micro-batch goes to ``<out>/batch=<id>`` (overwritten on a replay) and/or the sink.
  ``--available-now`` processes what is there and stops.
* **Event time**: the stream's store time, or with ``--event-time-header NAME`` the time a
  producer put in that header (epoch milliseconds or ISO-8601; a message without it, or with a
  value that does not parse, keeps its store time).

Run: ``python -m pipeline.analytics --servers nats://127.0.0.1:4222 --stream ORDERS --out m``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

PERCENTILE_ACCURACY = 100_000


def metrics_sql(view: str) -> str:
    """The aggregation over a temp view of the source's rows (batch and streaming alike)."""
    return f"""
    SELECT coalesce(subject, '*') AS subject,
           window.start AS window_start, window.end AS window_end,
           count(*) AS count,
           sum(size) AS bytes,
           percentile_approx(size, 0.5, {PERCENTILE_ACCURACY}) AS size_p50,
           percentile_approx(size, 0.99, {PERCENTILE_ACCURACY}) AS size_p99,
           min(seq) AS first_seq,
           max(seq) AS last_seq,
           count(msg_id) - size(collect_set(msg_id)) AS duplicate_msg_ids,
           max(seq) - min(seq) + 1 - count(*) AS seq_gaps
    FROM (SELECT subject, seq, timestamp, length(data) AS size,
                 headers['Nats-Msg-Id'][0] AS msg_id,
                 window(event_time, '1 minute') AS window
          FROM {view})
    GROUP BY GROUPING SETS ((subject, window), (window))
    """


def with_event_time(rows: Any, header: str | None) -> Any:
    """``rows`` with an ``event_time`` column: the header's time, else the store time."""
    from pyspark.sql import functions as F

    if not header:
        return rows.withColumn("event_time", F.col("timestamp"))
    raw = F.col("headers").getItem(header).getItem(0)
    parsed = F.when(raw.rlike("^[0-9]+$"), F.timestamp_millis(raw.cast("bigint"))).otherwise(
        F.try_to_timestamp(raw)
    )
    return rows.withColumn("event_time", F.coalesce(parsed, F.col("timestamp")))


def source(spark: Any, args: argparse.Namespace, streaming: bool, ending: int | None = None) -> Any:
    r = (spark.readStream if streaming else spark.read).format("jetstream")
    r = r.option("servers", args.servers).option("stream", args.stream)
    if args.subject:
        r = r.option("filterSubjects", args.subject)
    if args.since:
        r = r.option("startingTimestamp", args.since)
    elif streaming:
        r = r.option("startingSequence", "earliest")
    if ending is not None:
        r = r.option("endingSequence", str(max(ending, 1)))
    if streaming and args.max_per_trigger:
        r = r.option("maxMessagesPerTrigger", str(args.max_per_trigger))
    return with_event_time(r.load(), args.event_time_header)


def to_sink_rows(metrics: Any, stream: str, subject: str) -> Any:
    """Metric rows as the sink's columns: a JSON payload, a deterministic msg id."""
    from pyspark.sql import functions as F

    return metrics.select(
        F.lit(subject).alias("subject"),
        F.to_json(F.struct(*metrics.columns)).alias("data"),
        F.concat_ws(
            ":", F.lit(stream), "subject", F.date_format("window_end", "yyyyMMddHHmm")
        ).alias("msg_id"),
    )


def write_outputs(metrics: Any, args: argparse.Namespace, out: str | None) -> None:
    if out:
        metrics.write.mode("overwrite").parquet(out)
    if args.publish:
        (
            to_sink_rows(metrics, args.stream, args.publish)
            .write.format("jetstream")
            .mode("append")
            .option("servers", args.publish_servers or args.servers)
            .save()
        )


def _last_seq(args: argparse.Namespace) -> int:
    import asyncio

    from pipeline import natsio
    from pipeline.plan import ConnectOptions

    conn = ConnectOptions.parse({"servers": args.servers})

    async def go() -> int:
        nc = await natsio.connect(conn, name="trijet-analytics")
        try:
            return (await natsio.stream_state(nc, conn.api_prefix, args.stream))[1]
        finally:
            await nc.close()

    return asyncio.run(go())


def run_batch(spark: Any, args: argparse.Namespace) -> Any:
    """The metrics DataFrame (cached), after writing it to ``--out``/``--publish``."""
    # pin the end: Parquet, the sink and --show must see the same messages
    rows = source(spark, args, streaming=False, ending=_last_seq(args))
    rows.createOrReplaceTempView("js_rows")
    metrics = spark.sql(metrics_sql("js_rows")).orderBy("window_start", "subject").cache()
    write_outputs(metrics, args, args.out)
    return metrics


def run_streaming(spark: Any, args: argparse.Namespace) -> Any:
    rows = source(spark, args, streaming=True).withWatermark("event_time", args.watermark)
    rows.createOrReplaceTempView("js_rows_stream")
    metrics = spark.sql(metrics_sql("js_rows_stream"))

    def each_batch(df: Any, batch_id: int) -> None:
        write_outputs(df, args, f"{args.out}/batch={batch_id}" if args.out else None)

    w = metrics.writeStream.outputMode("append").foreachBatch(each_batch)
    w = w.option("checkpointLocation", args.checkpoint)
    w = (
        w.trigger(availableNow=True)
        if args.available_now
        else w.trigger(processingTime="10 seconds")
    )
    return w.start()


def session(master: str) -> Any:
    """A Spark session with the ``jetstream`` source registered (workers use this Python)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipeline.jetstream import JetStreamDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("trijet-analytics")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.dataSource.register(JetStreamDataSource)
    return spark


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m pipeline.analytics", description=__doc__.split("\n")[0]
    )
    p.add_argument("--servers", required=True, help="comma-separated nats:// URLs")
    p.add_argument("--stream", required=True)
    p.add_argument("--subject", help="subject filter(s), comma-separated")
    p.add_argument("--since", help="start time: epoch ms or ISO-8601")
    p.add_argument("--out", help="Parquet directory for the metrics")
    p.add_argument("--publish", metavar="SUBJECT", help="publish metric rows to this subject")
    p.add_argument("--publish-servers", help="servers for --publish (default --servers)")
    p.add_argument("--streaming", action="store_true", help="run as a streaming query")
    p.add_argument("--checkpoint", help="checkpoint directory (streaming)")
    p.add_argument("--watermark", default="2 minutes", help="event-time delay (streaming)")
    p.add_argument(
        "--event-time-header",
        metavar="NAME",
        help="event time from this header (epoch ms or ISO-8601) instead of the store time",
    )
    p.add_argument("--max-per-trigger", type=int, help="maxMessagesPerTrigger (streaming)")
    p.add_argument("--available-now", action="store_true", help="streaming: process and stop")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--show", type=int, default=20, help="print this many metric rows (batch)")
    a = p.parse_args(argv)
    if not (a.out or a.publish):
        p.error("give --out and/or --publish")
    if a.streaming and not a.checkpoint:
        p.error("--streaming needs --checkpoint")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    spark = session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.streaming:
            q = run_streaming(spark, args)
            q.awaitTermination()
        else:
            metrics = run_batch(spark, args)
            if args.show:
                metrics.show(args.show, truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
