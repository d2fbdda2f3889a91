"""The ceiling of a Python data source's ``count()`` on this machine, with no NATS at all.

Theory of operation: a trivial pyspark ``DataSource`` yields one prebuilt ``pyarrow.RecordBatch``
(``--batch`` rows) over and over until each partition has its share of ``--rows``; nothing is
fetched or parsed, so the rate is what Spark itself (the JVM plus its Python workers) can
take from a Python source.  Two schemas: ``full`` is the jetstream source's own schema (the
128-byte ``data`` column filled), ``narrow`` a single BIGINT column, so the JVM's per-column
cost shows.  Each case runs untimed once (JIT, worker start), then ``--repeat`` timed counts;
the printed CPU is microseconds per row for this process and its descendants (the Spark
JVM and its Python workers), from ``/proc``.

Run: ``python -m bench.spark_ceiling [--rows 1000000] [--partitions 2 8]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pipeline.jetstream import SCHEMA as FULL_SCHEMA

NARROW_SCHEMA = "seq BIGINT NOT NULL"


def _descendant_ticks(root: int) -> int:
    """utime+stime (clock ticks) of ``root`` and every live descendant."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(name)] = int(rest[1])
        ticks[int(name)] = int(rest[11]) + int(rest[12])
    total = 0
    for pid, t in ticks.items():
        p, hops = pid, 0
        while p and p != root and hops < 64:
            p, hops = parent.get(p, 0), hops + 1
        if p == root:
            total += t
    return total


class _Part(InputPartition):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _Reader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], narrow: bool) -> None:
        self.rows = int(options["rows"])
        self.parts = int(options["partitions"])
        self.batch = int(options["batch"])
        self.narrow = narrow

    def partitions(self) -> list[InputPartition]:
        share = self.rows // self.parts
        return [_Part(share + (1 if i < self.rows % self.parts else 0)) for i in range(self.parts)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        n = self.batch
        if self.narrow:
            template = pa.RecordBatch.from_arrays(
                [pa.array(range(n), pa.int64())],
                schema=pa.schema([pa.field("seq", pa.int64(), nullable=False)]),
            )
        else:
            schema = pa.schema(
                [
                    pa.field("stream", pa.string(), nullable=False),
                    pa.field("subject", pa.string(), nullable=False),
                    pa.field("seq", pa.int64(), nullable=False),
                    pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
                    pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
                    pa.field("data", pa.binary(), nullable=False),
                ]
            )
            template = pa.RecordBatch.from_arrays(
                [
                    pa.repeat(pa.scalar("BENCH", pa.string()), n),
                    pa.repeat(pa.scalar("bench.x", pa.string()), n),
                    pa.array(range(n), pa.int64()),
                    pa.array([0] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                    pa.nulls(n, schema.field("headers").type),
                    pa.array([b"x" * 128] * n, pa.binary()),
                ],
                schema=schema,
            )
        left = partition.rows
        while left > 0:
            k = min(left, n)
            yield template if k == n else template.slice(0, k)
            left -= k


class FullSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ceiling_full"

    def schema(self) -> str:
        return FULL_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(self.options, narrow=False)


class NarrowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ceiling_narrow"

    def schema(self) -> str:
        return NARROW_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(self.options, narrow=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--partitions", type=int, nargs="+", default=[2, 8])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(FullSource)
    spark.dataSource.register(NarrowSource)
    hz = os.sysconf("SC_CLK_TCK")
    print(
        f"spark_ceiling: {args.rows} rows, batch {args.batch}, {args.master}, load {os.getloadavg()[0]:.2f}"
    )
    for kind in ("full", "narrow"):
        for parts in args.partitions:
            opts = {"rows": str(args.rows), "partitions": str(parts), "batch": str(args.batch)}

            def count(o: dict[str, str] = opts, k: str = kind) -> int:
                return int(spark.read.format(f"ceiling_{k}").options(**o).load().count())

            count()
            rates, cpus = [], []
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), _descendant_ticks(os.getpid())
                got = count()
                dt, dc = time.perf_counter() - t0, _descendant_ticks(os.getpid()) - c0
                assert got == args.rows, got
                rates.append(args.rows / dt)
                cpus.append(dc / hz * 1e6 / args.rows)
            print(
                f"  {kind:6} partitions={parts:2}  count={statistics.median(rates):10.0f} rows/s"
                f"  cpu (driver+JVM+workers) {statistics.median(cpus):5.2f} us/row"
                f"  load {os.getloadavg()[0]:.2f}"
            )
    spark.stop()


if __name__ == "__main__":
    main()
