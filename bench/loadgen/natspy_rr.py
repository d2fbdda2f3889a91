"""Request/reply with nats-py, the Python client users have (``bench/core_bench.py``).

Theory of operation: ``rep`` subscribes a callback that answers each request
with its own payload (``msg.respond``), flushes, prints ``READY`` and serves
until ``-n`` requests were answered or nothing came for ``-t`` seconds.
``req`` runs ``-k`` asyncio workers, each sending ``nc.request`` one at a time
(nats-py's shared ``_INBOX.<id>.*`` response subscription, as users get it), until
``-n`` requests were answered in total; it prints one JSON line in
``loadgen``'s shape (``ok``, ``done``, ``inflight``, ``rps`` from the first
request to the last answer, ``lat_us`` percentiles).  Same command line as the
C load generator's ``req``/``rep`` (``-H -P -s -n -z -k -t``).

Run: ``python bench/loadgen/natspy_rr.py rep|req -P PORT -s SUBJECT -n N [-k K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import nats
from nats.errors import TimeoutError as NatsTimeout


async def rep(args: argparse.Namespace) -> dict[str, object]:
    nc = await nats.connect(f"nats://{args.H}:{args.P}")
    done = asyncio.Event()
    answered = 0
    last = time.monotonic()

    async def cb(msg: object) -> None:
        nonlocal answered, last
        await msg.respond(msg.data)  # type: ignore[attr-defined]
        answered += 1
        last = time.monotonic()
        if answered >= args.n:
            done.set()

    await nc.subscribe(args.s, cb=cb)
    await nc.flush()
    print("READY", flush=True)
    while not done.is_set() and time.monotonic() - last < args.t:
        try:
            await asyncio.wait_for(done.wait(), 0.2)
        except TimeoutError:
            pass
    await nc.drain()
    return {"mode": "rep", "replied": answered, "ok": answered >= args.n}


async def req(args: argparse.Namespace) -> dict[str, object]:
    nc = await nats.connect(f"nats://{args.H}:{args.P}")
    payload = b"x" * args.z
    k = max(1, args.k)
    lat: list[float] = []
    issued = 1  # the first request (below) counts: the responder answers -n in all
    failed = 0
    err = ""

    async def worker() -> None:
        nonlocal issued, failed, err
        while issued < args.n and not failed:
            issued += 1
            t0 = time.perf_counter()
            try:
                m = await nc.request(args.s, payload, timeout=args.t)
            except (TimeoutError, NatsTimeout) as exc:
                failed += 1
                err = f"request timed out: {exc!r}"
                return
            lat.append(time.perf_counter() - t0)
            if len(m.data) != args.z:
                failed += 1
                err = f"answer of {len(m.data)} bytes"
                return

    # one request first: the response subscription is set up outside the figure
    # (it counts as one of the -n, not in the rate or the latencies)
    await nc.request(args.s, payload, timeout=args.t)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(k)))
    el = time.perf_counter() - t0
    await nc.close()
    lat.sort()
    n = len(lat)
    done = n + 1

    def pct(q: float) -> float:
        return lat[int((n - 1) * q)] * 1e6 if n else 0.0

    return {
        "mode": "req",
        "ok": not failed and done >= args.n,
        "requests": args.n,
        "done": done,
        "inflight": k,
        "elapsed_s": el,
        "rps": n / el if el > 0 else 0.0,
        "lat_us": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
        "closed": False,
        "timeout": bool(failed),
        "err": err,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["req", "rep"])
    p.add_argument("-H", default="127.0.0.1")
    p.add_argument("-P", type=int, default=4222)
    p.add_argument("-s", default="bench.rr")
    p.add_argument("-n", type=int, default=10000)
    p.add_argument("-z", type=int, default=128)
    p.add_argument("-k", type=int, default=1)
    p.add_argument("-t", type=float, default=10.0)
    args = p.parse_args()
    res = asyncio.run(rep(args) if args.mode == "rep" else req(args))
    print(json.dumps(res), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
