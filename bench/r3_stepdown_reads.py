"""API reads of an R3 stream across leader stepdowns: trijet and nats-server side by side.

Theory of operation: for each server kind (a fresh three-node cluster each,
``tests.support.cluster``), an R3 file stream ``SD`` holds one message; nats-py
clients on every node keep ``--readers`` request loops each going
(``STREAM.INFO`` and ``STREAM.MSG.GET`` in turn, every request on its own
inbox, waited for ``--timeout`` s, then a short look for a second answer) while
the stream's leader is stepped down ``--stepdowns`` times (each after
``--settle`` s).  Printed per server: the time from a stepdown request to a
new leader answering (median, max), the reads answered, unanswered and
answered twice, and read latency p50/p99.  nats-server leaves a request about
an asset in a leader gap unanswered (reference/jetstream-cluster.md 6.1, the
client times out and asks again); trijet hands such requests from the old
leader to the new one (``node.jetstream.handover``).

Run: ``python -m bench.r3_stepdown_reads [--servers reference,trijet] [--stepdowns 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from bench.common import comma_list
from tests.support.aio import answers_to
from tests.support.cluster import start_cluster

#: a bounded look for a second answer to a request already answered
AFTER_S = 0.05


async def _scenario(urls: list[str], args: argparse.Namespace) -> dict[str, Any]:
    conns = [await nats.connect(u) for u in urls]
    try:
        js = conns[0].jetstream(timeout=5)
        await js.add_stream(name="SD", subjects=["sd.>"], num_replicas=3)
        await js.publish("sd.a", b"one")
        stop = asyncio.Event()
        lat: list[float] = []
        counts = {"answered": 0, "unanswered": 0, "twice": 0}

        async def reader(nc: Any) -> None:
            for i in range(10_000_000):  # bounded; stopped after the stepdowns
                if stop.is_set():
                    return
                if i % 2:
                    subject, payload = "$JS.API.STREAM.INFO.SD", b""
                else:
                    subject, payload = "$JS.API.STREAM.MSG.GET.SD", b'{"seq":1}'
                got, first = await answers_to(nc, subject, payload, args.timeout, AFTER_S)
                if first is not None:
                    lat.append(first)
                if not got:
                    counts["unanswered"] += 1
                else:
                    counts["answered"] += 1
                    counts["twice"] += len(got) > 1

        tasks = [asyncio.ensure_future(reader(nc)) for nc in conns for _ in range(args.readers)]
        gaps: list[float] = []
        failed = 0
        await asyncio.sleep(args.settle)
        for _ in range(args.stepdowns):
            before = None
            for _ in range(50):  # bounded
                try:
                    before = str((await js.stream_info("SD")).cluster.leader)
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            t0 = time.monotonic()
            try:
                await conns[0].request("$JS.API.STREAM.LEADER.STEPDOWN.SD", b"", timeout=5)
            except Exception:
                failed += 1
                continue
            for _ in range(500):  # bounded: ~10 s
                try:
                    now = str(
                        (
                            await js.stream_info(
                                "SD",
                            )
                        ).cluster.leader
                    )
                except Exception:
                    now = None
                if now and now not in (before, "None"):
                    gaps.append(time.monotonic() - t0)
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(args.settle)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), args.timeout + 10)
        lat.sort()
        return {
            "stepdown_s_median": statistics.median(gaps) if gaps else None,
            "stepdown_s_max": max(gaps) if gaps else None,
            "stepdowns": len(gaps),
            "stepdowns_failed": failed,
            **counts,
            "read_p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "read_p99_ms": 1000 * lat[int(len(lat) * 0.99)] if lat else None,
        }
    finally:
        for nc in conns:
            await nc.close()


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.3f}" if isinstance(v, float) else f"{v:,}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", default="reference,trijet", help="comma list of reference, trijet")
    p.add_argument("--stepdowns", type=int, default=20)
    p.add_argument("--readers", type=int, default=3, help="request loops per node")
    p.add_argument("--settle", type=float, default=0.3, help="s after each stepdown")
    p.add_argument("--timeout", type=float, default=2.0, help="s a request is waited for")
    args = p.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for kind in comma_list(args.servers):
        work = Path(tempfile.mkdtemp(prefix=f"sdreads-{kind}-"))
        load = os.getloadavg()[0]
        with start_cluster(kind, workdir=work) as c:  # type: ignore[arg-type]
            results[kind] = asyncio.run(_scenario(list(c.urls), args))
        results[kind]["load"] = load
        print(f"{kind}: " + "  ".join(f"{k}={_fmt(v)}" for k, v in results[kind].items()))
    keys = [k for k in next(iter(results.values())) if k != "load"]
    print(f"\n{'metric':<22}" + "".join(f"{s:>14}" for s in results))
    for k in keys:
        print(f"{k:<22}" + "".join(f"{_fmt(results[s].get(k)):>14}" for s in results))


if __name__ == "__main__":
    main()
