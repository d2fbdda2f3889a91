"""Streaming reads: exact micro-batch sizes, restart from the checkpoint, kill mid-run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.helpers import create_stream, publish, purge, stream_name
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.spark
WAIT_S = 120.0


def _query(
    spark: Any, url: str, stream: str, out: Path, ckpt: Path, trigger: dict[str, Any], **o: Any
) -> Any:
    r = spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
    for k, v in o.items():
        r = r.option(k, str(v))
    return (
        r.load()
        .select("seq", "subject", "data")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def _batch_sizes(q: Any) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def _seqs(spark: Any, out: Path) -> list[int]:
    return sorted(r.seq for r in spark.read.parquet(str(out)).select("seq").collect())


def test_available_now_batch_sizes_and_restart(
    spark: Any, js: ServerProcess, tmp_path: Path
) -> None:
    name = stream_name("strm")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(1000)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"startingSequence": "earliest", "maxMessagesPerTrigger": 400}
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True}, **opts)
    assert q.awaitTermination(WAIT_S)
    assert q.exception() is None
    assert _batch_sizes(q) == [400, 400, 200]
    assert _seqs(spark, out) == list(range(1, 1001))
    # more messages, then a restart from the checkpoint: only the new ones, in exact batches
    publish(js.url, [(f"{base}.y", b"%d" % i) for i in range(500)])
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True}, **opts)
    assert q.awaitTermination(WAIT_S)
    assert _batch_sizes(q) == [400, 100]
    assert _seqs(spark, out) == list(range(1, 1501))


def test_stopped_mid_run_then_restarted_reads_each_once(
    spark: Any, js: ServerProcess, tmp_path: Path
) -> None:
    name = stream_name("kill")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(1200)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"startingSequence": "earliest", "maxMessagesPerTrigger": 100}
    q = _query(spark, js.url, name, out, ckpt, {"processingTime": "0 seconds"}, **opts)
    deadline = time.monotonic() + WAIT_S
    # bounded wait for the first completed micro-batch (awaitTermination is the wait)
    while not _batch_sizes(q):
        assert time.monotonic() < deadline, "no micro-batch completed"
        q.awaitTermination(0.2)
    q.stop()  # may interrupt a batch in flight
    done = len(_seqs(spark, out))
    assert 100 <= done < 1200
    publish(js.url, [(f"{base}.y", b"%d" % i) for i in range(300)])
    # the restart plans the interrupted batch again from the offset log, then the rest at once
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True}, startingSequence="latest")
    assert q.awaitTermination(WAIT_S)
    assert q.exception() is None
    assert _seqs(spark, out) == list(range(1, 1501))


def test_streaming_fail_on_data_loss(spark: Any, js: ServerProcess, tmp_path: Path) -> None:
    name = stream_name("sloss")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(100)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True}, startingSequence="earliest")
    assert q.awaitTermination(WAIT_S)
    publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(100)])
    purge(js.url, name, keep=20)  # 101..180 are gone before the query saw them
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True})
    with pytest.raises(Exception, match="are gone"):
        q.awaitTermination(WAIT_S)
    q = _query(spark, js.url, name, out, ckpt, {"availableNow": True}, failOnDataLoss="false")
    assert q.awaitTermination(WAIT_S)
    assert q.exception() is None
    assert _seqs(spark, out) == list(range(1, 101)) + list(range(181, 201))
