"""The analytics job (batch) checked against the same metrics computed in plain Python."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest

from pipeline.analytics import parse_args, run_batch, run_streaming
from tests.pipeline.helpers import create_stream, msg_ids, publish, stream_name, stream_state
from tests.support.aio import run
from tests.support.servers import ServerProcess

# the first Spark module of the package: its first test also pays the session's start and the
# first Python data source query (JVM and worker start-up, over 100 s seen at load 17)
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _publish_duplicate_id(url: str, subject: str, msg_id: str) -> int:
    """Store a second message with ``msg_id`` once the stream's (short) window forgot it."""

    async def go() -> int:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            for _ in range(10_000):  # bounded: each try is one round trip
                ack = await js.publish(subject, b"again", headers={"Nats-Msg-Id": msg_id})
                if not ack.duplicate:
                    return ack.seq
            raise AssertionError("duplicate window never expired")
        finally:
            await nc.close()

    return run(go)


def _delete(url: str, stream: str, seq: int) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().delete_msg(stream, seq)
        finally:
            await nc.close()

    run(go)


def _expected(rows: list[Any]) -> dict[tuple[str, datetime], dict[str, int]]:
    groups: dict[tuple[str, datetime], list[Any]] = defaultdict(list)
    for r in rows:
        w = r.timestamp.replace(second=0, microsecond=0)
        groups[(r.subject, w)].append(r)
        groups[("*", w)].append(r)

    def pct(sizes: list[int], p: float) -> int:
        return sorted(sizes)[max(0, math.ceil(p * len(sizes)) - 1)]

    out = {}
    for key, g in groups.items():
        sizes = [len(r.data) for r in g]
        seqs = [r.seq for r in g]
        ids = [r.headers["Nats-Msg-Id"][0] for r in g if r.headers and "Nats-Msg-Id" in r.headers]
        out[key] = {
            "count": len(g),
            "bytes": sum(sizes),
            "size_p50": pct(sizes, 0.5),
            "size_p99": pct(sizes, 0.99),
            "first_seq": min(seqs),
            "last_seq": max(seqs),
            "duplicate_msg_ids": len(ids) - len(set(ids)),
            "seq_gaps": max(seqs) - min(seqs) + 1 - len(g),
        }
    return out


def test_batch_analytics_to_parquet_and_back_into_a_stream(
    spark: Any, js: ServerProcess, tmp_path: Path
) -> None:
    name, metrics_stream = stream_name("an"), stream_name("metrics")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"], duplicate_window=0.1)
    create_stream(js.url, metrics_stream, [f"{metrics_stream.lower()}.>"])
    for k in range(3):
        publish(js.url, [(f"{base}.{'ab'[k % 2]}", b"x" * (k + 1))], {"Nats-Msg-Id": f"id-{k}"})
    publish(js.url, [(f"{base}.{'ab'[k % 2]}", b"x" * (k % 37 + 1)) for k in range(3, 300)])
    dup_seq = _publish_duplicate_id(js.url, f"{base}.a", "id-0")
    _delete(js.url, name, 150)
    out = tmp_path / "metrics"
    args = parse_args(
        [
            *("--servers", js.url, "--stream", name, "--out", str(out)),
            *("--publish", f"{metrics_stream.lower()}.{base}"),
        ]
    )
    run_batch(spark, args)
    got = {
        (r.subject, r.window_start.replace(tzinfo=UTC)): r.asDict()
        for r in spark.read.parquet(str(out)).collect()
    }
    rows = spark.read.format("jetstream").option("servers", js.url).option("stream", name).load()
    raw = rows.selectExpr("subject", "seq", "timestamp", "data", "headers").collect()
    assert len(raw) == 300 and dup_seq == 301
    want = _expected(raw)
    want = {(s, w.replace(tzinfo=UTC)): v for (s, w), v in want.items()}
    assert set(got) == set(want)
    for key, metrics in want.items():
        assert {k: got[key][k] for k in metrics} == metrics, key
    assert sum(v["duplicate_msg_ids"] for (s, _), v in got.items() if s == "*") == 1
    assert sum(v["count"] for (s, _), v in got.items() if s == "*") == 300
    # the same rows went into the metrics stream with ids fixed by (stream, subject, window),
    # so a re-run is deduplicated (the sink's re-run tests show the dedupe itself)
    assert stream_state(js.url, metrics_stream).messages == len(got)
    ids = msg_ids(js.url, metrics_stream)
    ends = spark.read.parquet(str(out)).selectExpr(
        "subject", "date_format(window_end, 'yyyyMMddHHmm') AS w"
    )
    assert sorted(ids) == sorted(f"{name}:{r.subject}:{r.w}" for r in ends.collect())
    back = spark.read.format("jetstream").option("servers", js.url)
    payloads = back.option("stream", metrics_stream).load().select("data").collect()
    assert sorted(json.loads(bytes(p.data))["count"] for p in payloads) == sorted(
        v["count"] for v in got.values()
    )


T0 = datetime(2026, 1, 1, tzinfo=UTC)
# (subject, event time in seconds after T0) per micro-batch of 4 (maxMessagesPerTrigger=4).
# Watermark delay 30 s; Spark moves the watermark after each batch to max event time - 30 s
# and a batch uses the watermark of the one before.
STREAM_BATCHES = [
    [("a", 10), ("b", 20), ("a", 30), ("b", 50)],  # -> watermark T0+20s
    [("a", 70), ("b", 55), ("a", 80), ("b", 100)],  # 55 s is late but above it: counted
    [("a", 125), ("a", 130), ("b", 140), ("a", 165)],
]  # this batch runs with watermark T0+70s, past the end of window [0, 60 s): emitted
# (rows below the watermark are not guaranteed to be dropped — Spark's guide — so none here)


def test_streaming_analytics_with_watermark(spark: Any, js: ServerProcess, tmp_path: Path) -> None:
    """Event times from a header make the windows and the watermark deterministic: exactly
    the first minute's window is emitted (once, in the third micro-batch, none before), with
    the late row that was still above the watermark; later windows stay open."""
    name = stream_name("live")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    for batch in STREAM_BATCHES:
        for subject, secs in batch:
            ms = int((T0 + timedelta(seconds=secs)).timestamp() * 1000)
            publish(js.url, [(f"{base}.{subject}", b"x" * secs)], {"Event-Time": str(ms)})
    out, ckpt = tmp_path / "live", tmp_path / "ck"
    args = parse_args(
        [
            *("--servers", js.url, "--stream", name, "--out", str(out), "--streaming"),
            *("--checkpoint", str(ckpt), "--watermark", "30 seconds", "--available-now"),
            *("--event-time-header", "Event-Time", "--max-per-trigger", "4"),
        ]
    )
    assert spark.conf.get("spark.sql.streaming.noDataMicroBatches.enabled") == "false"
    q = run_streaming(spark, args)
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress] == [4, 4, 4]
    got = {(r.subject, r.batch): r.asDict() for r in spark.read.parquet(str(out)).collect()}
    # window [T0, T0+60s): seqs 1 (a), 2 (b), 3 (a), 4 (b), 6 (b, late); payload = seconds
    assert set(got) == {(f"{base}.a", 2), (f"{base}.b", 2), ("*", 2)}
    for subject, want in [
        (f"{base}.a", {"count": 2, "bytes": 40, "first_seq": 1, "last_seq": 3, "seq_gaps": 1}),
        (f"{base}.b", {"count": 3, "bytes": 125, "first_seq": 2, "last_seq": 6, "seq_gaps": 2}),
        ("*", {"count": 5, "bytes": 165, "first_seq": 1, "last_seq": 6, "seq_gaps": 1}),
    ]:
        row = got[(subject, 2)]
        assert row["window_start"].replace(tzinfo=UTC) == T0, subject
        assert {k: row[k] for k in want} == want, subject
