"""Batch reads through the ``jetstream`` source, against trijet and nats-server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.pipeline.helpers import create_stream, publish, purge, stream_name
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.spark


def _read(spark: Any, url: str, stream: str, **opts: Any) -> Any:
    r = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def test_batch_read_count_order_and_columns(spark: Any, js: ServerProcess) -> None:
    name = stream_name("read")
    create_stream(js.url, name, [f"{name.lower()}.>"])
    n = 1500
    msgs = [(f"{name.lower()}.{'a' if i % 3 else 'b'}", b"p%04d" % i) for i in range(n)]
    seqs = publish(js.url, msgs[:1], headers={"Nats-Msg-Id": "first", "X-K": "v"})
    seqs += publish(js.url, msgs[1:10], headers={"X-K": "w"})
    seqs += publish(js.url, msgs[10:])
    assert seqs == list(range(1, n + 1))
    df = _read(spark, js.url, name, minPartitions=3, maxMessagesPerPartition=400)
    assert df.rdd.getNumPartitions() == 4
    rows = df.orderBy("seq").collect()
    assert [r.seq for r in rows] == seqs
    assert [(r.subject, bytes(r.data)) for r in rows] == msgs
    assert {r.stream for r in rows} == {name}
    assert rows[0].headers == {"Nats-Msg-Id": ["first"], "X-K": ["v"]}
    assert rows[9].headers == {"X-K": ["w"]}
    assert rows[10].headers is None
    assert all(r.timestamp is not None for r in rows)
    assert [r.timestamp for r in rows] == sorted(r.timestamp for r in rows)


def test_filters_and_sequence_bounds(spark: Any, js: ServerProcess) -> None:
    name = stream_name("filt")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    msgs = [(f"{base}.{('a', 'b', 'c')[i % 3]}", b"x%d" % i) for i in range(600)]
    publish(js.url, msgs)
    a = _read(spark, js.url, name, filterSubject=f"{base}.a").collect()
    assert sorted(r.seq for r in a) == list(range(1, 601, 3))
    ab = _read(spark, js.url, name, filterSubjects=f"{base}.a,{base}.c").collect()
    assert sorted(r.seq for r in ab) == [s for s in range(1, 601) if s % 3 != 2]
    # sparse ranges: a filter that matches only a few sequences of many tasks
    c = _read(spark, js.url, name, filterSubject=f"{base}.c", minPartitions=7).collect()
    assert sorted(r.seq for r in c) == list(range(3, 601, 3))
    bounded = _read(spark, js.url, name, startingSequence=101, endingSequence=250).collect()
    assert sorted(r.seq for r in bounded) == list(range(101, 251))
    tail = _read(spark, js.url, name, startingSequence=590).collect()
    assert sorted(r.seq for r in tail) == list(range(590, 601))
    none = _read(spark, js.url, name, filterSubject=f"{base}.zzz").count()
    assert none == 0


def test_start_and_end_by_timestamp(spark: Any, js: ServerProcess) -> None:
    name = stream_name("time")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    # three rounds, each acknowledged before the next: round k's times precede round k+1's
    # (within a round a server may stamp many messages with one time)
    rounds = [publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(100)]) for _ in range(3)]
    us = dict(_read(spark, js.url, name).selectExpr("seq", "unix_micros(timestamp)").collect())
    t_start, t_end = us[rounds[1][0]], us[rounds[2][0]]
    assert us[rounds[0][-1]] < t_start < t_end

    def iso(t_us: int) -> str:
        return datetime.fromtimestamp(t_us // 10**6, UTC).strftime("%Y-%m-%dT%H:%M:%S") + (
            f".{t_us % 10**6:06d}Z"
        )

    got = _read(
        spark, js.url, name, startingTimestamp=iso(t_start), endingTimestamp=iso(t_end)
    ).collect()
    assert sorted(r.seq for r in got) == rounds[1]
    # epoch milliseconds: everything stored at or after the millisecond
    ms = t_start // 1000
    got_ms = _read(spark, js.url, name, startingTimestamp=ms).collect()
    assert sorted(r.seq for r in got_ms) == sorted(s for s, t in us.items() if t >= ms * 1000)
    assert set(rounds[1] + rounds[2]) <= {r.seq for r in got_ms}


def test_fail_on_data_loss_after_purge(spark: Any, js: ServerProcess) -> None:
    name = stream_name("loss")
    base = name.lower()
    create_stream(js.url, name, [f"{base}.>"])
    publish(js.url, [(f"{base}.x", b"%d" % i) for i in range(200)])
    purge(js.url, name, keep=50)  # sequences 1..150 are gone
    with pytest.raises(Exception, match="are gone"):
        _read(spark, js.url, name, startingSequence=100).count()
    got = _read(spark, js.url, name, startingSequence=100, failOnDataLoss="false").collect()
    assert sorted(r.seq for r in got) == list(range(151, 201))
    # earliest starts at the first sequence still stored: no loss
    assert _read(spark, js.url, name).count() == 50
