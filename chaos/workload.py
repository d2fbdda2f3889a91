"""Workloads: real nats-py clients on every node, recording a history.

Theory of operation: each worker owns one nats-py connection whose server list starts with "its"
node and continues with the others (``dont_randomize``), reconnecting forever with a short wait,
so a worker keeps going across kills and partitions.  Every operation is recorded as invoke then
ok / fail / info (``chaos.history``); a timeout is always ``info``, never ``fail``, because the
server may have done the work.  Workers pace themselves (``rate_per_s``) so the harness, not the
CPU, decides the load, and each loop ends when the run's ``stop`` event is set or its deadline
passes.

- W1 (``w1-*``): publish unique values ``w1-<i>-<n>`` to ``log.<i>`` with ``Nats-Msg-Id`` = value;
  a timeout is retried with the same id (up to ``PUB_ATTEMPTS``); ok carries the ack's seq and
  its duplicate flag.
- W2 (``w2-*``): the CAS chain on stream CHAIN: payload ``str(last+1)`` with
  ``Nats-Expected-Last-Sequence: last``; a wrong-last answer is ``fail``, then ``last`` is re-read.
- W3 (``w3-*``): the durable pull consumer ``c1`` on LOG (``pull_subscribe`` sets its filter
  ``log.>``): fetch, record a ``deliver`` event (stream seq, consumer seq, delivery count), then
  ``ack_sync`` recorded as an op.  Now and then (``DISCONNECT_P`` per batch) a worker drops its
  connection with a fetched batch unacked and reconnects, so redelivery is exercised.
- W4 (``w4-*``): W1 and W3 on stream WQ (work-queue retention, removal on ack): publishes
  ``wq-publish`` to ``wq.<i>``, consumer ``wq1`` records ``deliver`` (stream WQ) and ``wq-ack``.
- KV (``kv-*``): per-key read then CAS increment (``update`` with ``last`` = the read revision) on
  bucket CAS (R3, direct gets off so reads go to the leader).

All randomness comes from a ``random.Random`` seeded per worker from the run's seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass
from typing import Any

import nats
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import api
from nats.js.errors import APIError, KeyNotFoundError

from chaos.history import History

LOG, CHAIN, KV_BUCKET, CONSUMER = "LOG", "CHAIN", "CAS", "c1"
WQ, WQ_CONSUMER = "WQ", "wq1"
ARRIVALS_MAX = 10_000
"""Arrival stamps a consumer worker keeps (messages it never records are dropped oldest first)."""
KV_KEYS = ("k0", "k1", "k2")
PUB_TIMEOUT_S = 1.5
PUB_ATTEMPTS = 3
OP_TIMEOUT_S = 1.5
WRONG_LAST_SEQ = 10071
DISCONNECT_P = 0.02  # per fetched batch, while the faults run: W3's random disconnects
KV_SLOWER = 5.0  # KV workers pace 5x slower: per-key histories stay small enough to search


async def _quiet(*_: Any) -> None:
    """nats-py callbacks: stay silent (the history records what matters)."""


async def connect(urls: list[str], first: int, name: str, *, reconnect: bool = True) -> Any:
    """A nats-py client preferring ``urls[first]``; reconnects forever (bounded wait per try)."""
    order = urls[first:] + urls[:first] if reconnect else [urls[first]]
    return await nats.connect(
        servers=order,
        name=name,
        dont_randomize=True,
        allow_reconnect=reconnect,
        max_reconnect_attempts=-1 if reconnect else 0,
        reconnect_time_wait=0.25,
        connect_timeout=1.0,
        ping_interval=2,
        max_outstanding_pings=2,
        error_cb=_quiet,
        disconnected_cb=_quiet,
        reconnected_cb=_quiet,
        closed_cb=_quiet,
    )


async def setup(nc: Any, replicas: int, deadline_s: float) -> None:
    """Create streams LOG, CHAIN and WQ, consumers c1 and wq1, bucket CAS with keys at 0
    (retried until ``deadline_s`` of the loop's clock; the meta leader may still be settling).

    The streams and the bucket are created concurrently, then the consumers and the keys: on
    a replicated cluster each create waits for its group's first election, and these overlap.
    A retry repeats every step (creates with an identical config are idempotent)."""
    js = nc.jetstream(timeout=2.0)
    loop = asyncio.get_running_loop()
    last: Exception | None = None

    def stream(name: str, subjects: list[str], **kw: Any) -> Any:
        return js.add_stream(
            api.StreamConfig(
                name=name, subjects=subjects, num_replicas=replicas,
                storage=api.StorageType.FILE, duplicate_window=120.0, allow_direct=True, **kw,
            )
        )  # fmt: skip

    def consumer(name: str, durable: str, filt: str, **kw: Any) -> Any:
        return js.add_consumer(
            name,
            api.ConsumerConfig(
                durable_name=durable, ack_policy=api.AckPolicy.EXPLICIT, filter_subject=filt,
                ack_wait=4.0, **kw,
            ),
        )  # fmt: skip

    while loop.time() < deadline_s:
        try:
            *_, kv = await _all(
                stream(LOG, ["log.>"]),
                stream(CHAIN, ["chain"]),
                stream(WQ, ["wq.>"], retention=api.RetentionPolicy.WORK_QUEUE),
                js.create_key_value(
                    api.KeyValueConfig(bucket=KV_BUCKET, replicas=replicas, direct=False)
                ),
            )
            await _all(
                consumer(WQ, WQ_CONSUMER, "wq.>"),
                consumer(LOG, CONSUMER, "log.>", max_ack_pending=2000),
                *(kv.put(key, b"0") for key in KV_KEYS),
            )
            return
        except Exception as exc:  # not ready yet: try again until the deadline
            last = exc
            await asyncio.sleep(0.3)
    raise RuntimeError(f"setup did not succeed before its deadline: {last!r}")


async def _all(*aws: Any) -> list[Any]:
    """Await all of ``aws`` concurrently; every one has ended when this returns or raises
    (the first exception), so a retry never overlaps a straggler."""
    got = await asyncio.gather(*aws, return_exceptions=True)
    for g in got:
        if isinstance(g, BaseException):
            raise g
    return got


@dataclass
class Ctx:
    """What every worker shares."""

    hist: History
    urls: list[str]
    stop: asyncio.Event
    rate_per_s: float


async def _pace(ctx: Ctx, rng: random.Random, slower: float = 1.0) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ctx.stop.wait(), rng.expovariate(ctx.rate_per_s / slower))


async def w1_producer(
    ctx: Ctx, i: int, rng: random.Random, kind: str = "w1", prefix: str = "log", f: str = "publish"
) -> None:
    """W1 (or, with ``kind="w4", prefix="wq", f="wq-publish"``, W4's producer)."""
    proc = f"{kind}-{i}"
    nc = await connect(ctx.urls, i % len(ctx.urls), proc)
    js = nc.jetstream(timeout=PUB_TIMEOUT_S)
    try:
        for n in range(10**9):
            if ctx.stop.is_set():
                break
            value = f"{proc}-{n}"
            op = ctx.hist.invoke(proc, f, value=value, subject=f"{prefix}.{i}")
            unknown, outcome = False, None
            for _attempt in range(PUB_ATTEMPTS):
                try:
                    ack = await js.publish(
                        f"{prefix}.{i}", value.encode(), headers={"Nats-Msg-Id": value}
                    )
                    outcome = {"seq": ack.seq, "dup": bool(ack.duplicate)}
                    break
                except (NatsTimeout, TimeoutError):
                    unknown = True
                except NoRespondersError:
                    await asyncio.sleep(0.1)
                except APIError as exc:
                    outcome = {"error": f"{exc.err_code}"}
                    await asyncio.sleep(0.1)
                    if not unknown:
                        break
                except Exception as exc:  # connection trouble: unknown
                    unknown = True
                    await asyncio.sleep(0.1)
                    outcome = {"error": repr(exc)[:120]}
            if outcome is not None and "seq" in outcome:
                ctx.hist.complete(op, "ok", **outcome)
            elif unknown:
                ctx.hist.complete(op, "info", **(outcome or {"error": "timeout"}))
            else:
                ctx.hist.complete(op, "fail", **(outcome or {"error": "no responders"}))
            await _pace(ctx, rng)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def _last_seq(js: Any) -> int | None:
    try:
        info = await js.stream_info(CHAIN)
        return int(info.state.last_seq)
    except Exception:
        return None


async def w2_chain(ctx: Ctx, i: int, rng: random.Random) -> None:
    nc = await connect(ctx.urls, i % len(ctx.urls), f"w2-{i}")
    js = nc.jetstream(timeout=OP_TIMEOUT_S)
    proc = f"w2-{i}"
    last: int | None = None
    try:
        for _ in range(10**9):
            if ctx.stop.is_set():
                break
            if last is None:
                last = await _last_seq(js)
                if last is None:
                    await _pace(ctx, rng)
                    continue
            value = str(last + 1)
            op = ctx.hist.invoke(proc, "append", value=value, expect=last)
            try:
                ack = await js.publish(
                    "chain", value.encode(), headers={"Nats-Expected-Last-Sequence": str(last)}
                )
                ctx.hist.complete(op, "ok", seq=ack.seq)
                last = ack.seq
            except APIError as exc:
                kind = "fail" if exc.err_code == WRONG_LAST_SEQ else "info"
                ctx.hist.complete(op, kind, error=str(exc.err_code))
                last = None
            except NoRespondersError:
                ctx.hist.complete(op, "fail", error="no responders")
                last = None
            except Exception as exc:
                ctx.hist.complete(op, "info", error=repr(exc)[:120])
                last = None
            await _pace(ctx, rng)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def w3_consumer(
    ctx: Ctx, i: int, rng: random.Random, drained: asyncio.Event, wq: bool = False
) -> None:
    """Fetch/ack until ``drained`` is set (the runner sets it once the drain is done).

    ``wq``: W4's worker on WQ/wq1 (acks recorded as ``wq-ack``)."""
    stream, durable, filt = (WQ, WQ_CONSUMER, "wq.>") if wq else (LOG, CONSUMER, "log.>")
    proc = f"{'w4c' if wq else 'w3'}-{i}"
    f_ack = "wq-ack" if wq else "ack"
    nc = await connect(ctx.urls, i % len(ctx.urls), proc)
    js = nc.jetstream(timeout=OP_TIMEOUT_S)
    psub = None
    arrived: dict[str, float] = {}
    try:
        for _ in range(10**9):
            if drained.is_set():
                break
            if psub is None:
                try:
                    psub = await js.pull_subscribe(filt, durable=durable, stream=stream)
                except Exception:
                    await asyncio.sleep(0.3)
                    continue
                arrived = _stamp_arrivals(psub, ctx.hist)
            try:
                msgs = await psub.fetch(20, timeout=1.0)
            except (NatsTimeout, TimeoutError):
                continue
            except Exception:
                await asyncio.sleep(0.2)
                continue
            if not ctx.stop.is_set() and rng.random() < DISCONNECT_P:
                # a worker vanishes with a batch in hand: unacked, so redelivered after AckWait
                ctx.hist.event("note", what="consumer disconnects", proc=proc, dropped=len(msgs))
                with contextlib.suppress(Exception):
                    await nc.close()
                nc = await connect(ctx.urls, i % len(ctx.urls), proc)
                js = nc.jetstream(timeout=OP_TIMEOUT_S)
                psub = None
                continue
            # each message was decided before it reached the client -- possibly
            # long before this fetch: nats-py hands out first what reached its
            # queue for an earlier pull request -- and is recorded only now, one
            # by one, each after the AckSync of the one before
            fetched = ctx.hist.now()
            for m in msgs:
                md = m.metadata
                ctx.hist.event(
                    "deliver",
                    proc=proc,
                    stream=stream,
                    seq=md.sequence.stream,
                    cseq=md.sequence.consumer,
                    n=md.num_delivered,
                    value=m.data.decode(errors="replace"),
                    fetched=fetched,
                    arrived=arrived.pop(m.reply, fetched),
                )
                op = ctx.hist.invoke(proc, f_ack, seq=md.sequence.stream)
                try:
                    await m.ack_sync(timeout=OP_TIMEOUT_S)
                    ctx.hist.complete(op, "ok")
                except Exception as exc:
                    ctx.hist.complete(op, "info", error=repr(exc)[:120])
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


def _stamp_arrivals(psub: Any, hist: History) -> dict[str, float]:
    """When each message of ``psub`` reached the client, by its ack subject
    (unique per delivery): nats-py's subscription queue, stamped on the way in."""
    arrived: dict[str, float] = {}
    queue = psub._sub._pending_queue
    put = queue.put_nowait

    def stamped(msg: Any) -> None:
        if msg.reply:
            if len(arrived) >= ARRIVALS_MAX:  # stale ones (a dropped batch): oldest out
                arrived.pop(next(iter(arrived)))
            arrived[msg.reply] = hist.now()
        put(msg)

    queue.put_nowait = stamped
    return arrived


async def kv_worker(ctx: Ctx, i: int, rng: random.Random) -> None:
    nc = await connect(ctx.urls, i % len(ctx.urls), f"kv-{i}")
    js = nc.jetstream(timeout=OP_TIMEOUT_S)
    proc = f"kv-{i}"
    kv = None
    try:
        for _ in range(10**9):
            if ctx.stop.is_set():
                break
            if kv is None:
                try:
                    kv = await js.key_value(KV_BUCKET)
                except Exception:
                    await _pace(ctx, rng, KV_SLOWER)
                    continue
            key = rng.choice(KV_KEYS)
            op = ctx.hist.invoke(proc, "read", key=key)
            try:
                entry = await kv.get(key)
                value, rev = int(entry.value.decode()), entry.revision
                ctx.hist.complete(op, "ok", value=value, rev=rev)
            except KeyNotFoundError:
                ctx.hist.complete(op, "fail", error="not found")
                continue
            except Exception as exc:
                ctx.hist.complete(op, "info", error=repr(exc)[:120])
                await _pace(ctx, rng, KV_SLOWER)
                continue
            op = ctx.hist.invoke(proc, "cas", key=key, old=value, new=value + 1, rev=rev)
            try:
                new_rev = await kv.update(key, str(value + 1).encode(), last=rev)
                ctx.hist.complete(op, "ok", new_rev=new_rev)
            except APIError as exc:
                kind = "fail" if exc.err_code == WRONG_LAST_SEQ else "info"
                ctx.hist.complete(op, kind, error=str(exc.err_code))
            except Exception as exc:
                ctx.hist.complete(op, "info", error=repr(exc)[:120])
            await _pace(ctx, rng, KV_SLOWER)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
