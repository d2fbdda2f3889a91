"""The ``jetstream`` sink: msg-id dedupe on re-runs, a failed-and-retried task, streaming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.helpers import (
    create_stream,
    msg_ids,
    publish,
    stream_name,
    stream_state,
    wait_for_messages,
)
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.spark
WAIT_S = 120.0


def _write(df: Any, url: str, **opts: Any) -> None:
    w = df.write.format("jetstream").mode("append").option("servers", url)
    for k, v in opts.items():
        w = w.option(k, str(v))
    w.save()


def test_sink_run_twice_gives_all_duplicates(spark: Any, js: ServerProcess) -> None:
    name = stream_name("sink")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    df = spark.range(0, 1000, numPartitions=3).selectExpr(
        f"concat('{base}.', CAST(id % 4 AS STRING)) AS subject",
        "CAST(concat('payload-', CAST(id AS STRING)) AS BINARY) AS data",
        "concat('row-', CAST(id AS STRING)) AS msg_id",
        "map('X-Row', array(CAST(id AS STRING)), 'X-Multi', array('a', 'b', 'a')) AS headers",
    )
    _write(df, js.url)
    st = stream_state(js.url, name)
    assert (st.messages, st.last_seq) == (1000, 1000)
    _write(df, js.url)  # a re-run inside the duplicate window: all dropped
    st = stream_state(js.url, name)
    assert (st.messages, st.last_seq) == (1000, 1000)
    ids = msg_ids(js.url, name)
    assert sorted(ids) == sorted(f"row-{i}" for i in range(1000))
    # read back through the source: subject, payload and headers made the trip
    back = (
        spark.read.format("jetstream")
        .option("servers", js.url)
        .option("stream", name)
        .load()
        .where("headers['X-Row'][0] = '7'")
        .collect()
    )
    assert [(r.subject, bytes(r.data), r.headers) for r in back] == [
        (
            f"{base}.3",
            b"payload-7",
            {"X-Row": ["7"], "X-Multi": ["a", "b", "a"], "Nats-Msg-Id": ["row-7"]},
        )
    ]


def test_sink_hash_ids_and_subject_option(spark: Any, js: ServerProcess) -> None:
    name = stream_name("hash")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    df = spark.range(0, 500, numPartitions=2).selectExpr("CAST(id AS STRING) AS data")
    _write(df, js.url, subject=f"{base}.all")  # data as string, no msg_id column: content hash
    _write(df, js.url, subject=f"{base}.all", msgId="hash")
    st = stream_state(js.url, name)
    assert (st.messages, st.last_seq) == (500, 500)
    assert len(set(msg_ids(js.url, name))) == 500


def test_task_failing_once_is_retried_without_duplicates(
    spark: Any, js: ServerProcess, tmp_path: Path
) -> None:
    """The session runs ``local[2,2]``: a task may fail once and is re-run; the rows its first
    attempt published before failing are republished with the same ids and dropped."""
    from pyspark.sql.functions import udf

    name = stream_name("retry")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    marker = tmp_path / "failed-once"
    n = 2000

    url = js.url
    # long ids: the UDF worker's output buffer (64 KiB) fills and reaches the sink in pieces
    pad = "0" * 120

    def fail_once(i: int) -> str:
        if i == 1500 and not marker.exists():
            # fail only once the sink has published part of this task's earlier rows
            wait_for_messages(url, name, f"{base}.x")
            marker.write_text(str(stream_state(url, name).messages))
            raise RuntimeError("injected failure, first attempt only")
        return f"row-{i}-{pad}"

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = spark.range(0, n, numPartitions=1).selectExpr(
            f"'{base}.x' AS subject", "CAST(CAST(id AS STRING) AS BINARY) AS data", "id"
        )
        ids = udf(fail_once, "string", useArrow=False)("id")
        _write(df.withColumn("msg_id", ids).drop("id"), js.url, maxInflight=64)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert 0 < int(marker.read_text()) < n  # the first attempt published part of the task
    st = stream_state(js.url, name)
    assert st.messages == n
    assert sorted(msg_ids(js.url, name)) == sorted(f"row-{i}-{pad}" for i in range(n))


def test_streaming_sink_replayed_from_scratch_adds_nothing(
    spark: Any, js: ServerProcess, tmp_path: Path
) -> None:
    src, dst = stream_name("src"), stream_name("dst")
    create_stream(js.url, src, [f"{src.lower()}.>"])
    create_stream(js.url, dst, [f"{dst.lower()}.>"])
    publish(js.url, [(f"{src.lower()}.{i % 5}", b"%d" % i) for i in range(800)])

    def run(ckpt: Path) -> None:
        q = (
            spark.readStream.format("jetstream")
            .option("servers", js.url)
            .option("stream", src)
            .option("startingSequence", "earliest")
            .load()
            .selectExpr(
                f"concat('{dst.lower()}.', subject) AS subject",
                "data",
                "concat(stream, ':', CAST(seq AS STRING)) AS msg_id",
            )
            .writeStream.format("jetstream")
            .option("servers", js.url)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(WAIT_S)
        assert q.exception() is None

    run(tmp_path / "c1")
    st = stream_state(js.url, dst)
    assert (st.messages, st.last_seq) == (800, 800)
    run(tmp_path / "c2")  # a new checkpoint replays every micro-batch
    st = stream_state(js.url, dst)
    assert (st.messages, st.last_seq) == (800, 800)
    assert sorted(msg_ids(js.url, dst)) == sorted(f"{src}:{s}" for s in range(1, 801))
