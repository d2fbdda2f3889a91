"""Failover phases of ``bench.r3_bench``: stepdown gap, quorum loss, and a timeline PNG.

Theory of operation: each phase gets the running three-node cluster and the stream
``BENCH`` (R3) that ``bench.r3_bench`` created, and records its figures in the server's
``Run``; the same code drives trijet and nats-server.  Publishers are nats-py clients on a
node that is not killed, publishing one message at a time with a ``Nats-Msg-Id`` and a
short per-try timeout, so a timeout costs at most ``--try-timeout``.

* **stepdown** -- ``--rounds`` times: while a publisher publishes, the stream leader is
  asked to step down (``$JS.API.STREAM.LEADER.STEPDOWN``).  Figure: the longest interval
  between two consecutive PubAcks that spans the request, until the new leader has served
  for ``STEPDOWN_TAIL_S``; median over the rounds.  A round whose leader did not change is
  noted; each failed try is printed as (kind, sent after the request s, answered after s).
* **quorum** -- acknowledged publishes first; then the stream leader and one follower are
  SIGKILLed, leaving one replica.  For ``--quorum-s`` seconds the publisher (on the
  survivor) keeps publishing with a ``QUORUM_TRY_S`` timeout; every answer is classified
  (ok, 503 no responders, timeout, other error) with its latency.  Nothing may be acknowledged
  without a quorum.  Both are restarted; figure: seconds from the restart until a publish is
  acknowledged again.  Then every acknowledged message (before, during, after) is read back by
  sequence (``STREAM.MSG.GET``) and must carry its payload: ``quorum_lost`` counts those that do
  not.
* **timeline** -- ``TIMELINE_PUBLISHERS`` publishers on a follower and a sampler of the
  stream leader (``STREAM.INFO`` every ``TIMELINE_SAMPLE_S``); the leader is SIGKILLed at
  ``TIMELINE_KILL_S`` and restarted ``TIMELINE_DOWN_S`` later; the run ends at
  ``TIMELINE_S``.  ``plot_timeline`` draws every server's publish rate (PubAcks per
  ``TIMELINE_BIN_S``) and the leader over time, the kill and the restart marked, into one PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS

from tests.support.cluster import Cluster

STEPDOWN_TAIL_S = 0.5
STEPDOWN_WAIT_S = 10.0
QUORUM_BEFORE = 200
QUORUM_TRY_S = 2.0
RECOVER_S_MAX = 60.0
TIMELINE_S = 10.0
TIMELINE_KILL_S = 2.0
TIMELINE_DOWN_S = 4.0
TIMELINE_PUBLISHERS = 4
TIMELINE_SAMPLE_S = 0.1
TIMELINE_BIN_S = 0.1
LOOP_MAX = 10**7


async def _quiet(*_: Any) -> None:
    return None


def _r3() -> Any:
    from bench import r3_bench  # the driver; imported late (it imports this module lazily)

    return r3_bench


async def _leader(nc: NATS, wait_s: float = 0.5) -> str | None:
    r3 = _r3()
    try:
        msg = await nc.request(f"$JS.API.STREAM.INFO.{r3.STREAM}", b"", timeout=wait_s)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
        return None
    doc = json.loads(msg.data)
    return ((doc.get("cluster") or {}).get("leader")) or None


class Publisher:
    """One-at-a-time publishes with ids; every answer kept as (sent, done, kind, seq, id)."""

    def __init__(self, nc: NATS, tag: str, try_s: float) -> None:
        self.js = nc.jetstream(timeout=try_s)
        self.tag = tag
        self.answers: list[tuple[float, float, str, int, str]] = []
        self.stop = asyncio.Event()
        self.n = 0

    async def one(self) -> str:
        r3 = _r3()
        self.n += 1
        mid = f"{self.tag}-{self.n}"
        sent = time.monotonic()
        seq, kind = 0, "ok"
        try:
            ack = await self.js.publish(r3.SUBJECT, mid.encode(), headers={"Nats-Msg-Id": mid})
            seq = ack.seq
        except nats.errors.TimeoutError:
            kind = "timeout"
        except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
            kind = "503"
        except Exception as exc:  # any other answer is counted by its kind
            kind = type(exc).__name__
        self.answers.append((sent, time.monotonic(), kind, seq, mid))
        return kind

    async def run(self) -> None:
        for _ in range(LOOP_MAX):
            if self.stop.is_set():
                return
            if await self.one() != "ok":
                await asyncio.sleep(0.01)  # an error answer comes back at once: do not spin

    def acks(self) -> list[float]:
        return [done for _, done, kind, _, _ in self.answers if kind == "ok"]


# -- stepdown ------------------------------------------------------------------------


async def one_stepdown(c: Cluster, rnd: int, args: argparse.Namespace) -> dict[str, Any]:
    r3 = _r3()
    admin = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        old = (await r3.wait_healthy(admin))["cluster"]["leader"]
        pi = (c.index(old) + 1) % len(c.names)
        nc = await nats.connect(c.urls[pi], error_cb=_quiet)
        pub = Publisher(nc, f"s{rnd}", args.try_timeout)
        task = asyncio.ensure_future(pub.run())
        try:
            await asyncio.sleep(args.failover_lead_s)  # publishing before (load, not a wait)
            t_req = time.monotonic()
            doc = await r3.api(admin, f"$JS.API.STREAM.LEADER.STEPDOWN.{r3.STREAM}")
            new = None
            deadline = t_req + STEPDOWN_WAIT_S
            while time.monotonic() < deadline:
                new = await _leader(admin)
                if new and new != old:
                    break
                await asyncio.sleep(r3.POLL_S)
            t_new = time.monotonic()
            # the new leader serves: STEPDOWN_TAIL_S of PubAcks after it is named
            while time.monotonic() < deadline:
                if [a for a in pub.acks() if a > t_new + STEPDOWN_TAIL_S]:
                    break
                await asyncio.sleep(r3.POLL_S)
        finally:
            pub.stop.set()
            await asyncio.wait_for(task, r3.API_TIMEOUT_S)
            await nc.close()
    finally:
        await admin.close()
    acks = pub.acks()
    spans = [b - a for a, b in itertools.pairwise(acks) if b > t_req]
    return {
        "s": max(spans) if spans else float("nan"),
        "old": old,
        "new": new,
        "api": doc.get("success", doc.get("error")),
        "errors": sum(1 for a in pub.answers if a[2] != "ok"),
        "failed": [
            (a[2], round(a[0] - t_req, 3), round(a[1] - a[0], 3))
            for a in pub.answers
            if a[2] != "ok"
        ],
    }


async def phase_stepdown(c: Cluster, run: Any, args: argparse.Namespace) -> None:
    r3 = _r3()
    rounds = []
    for rnd in range(args.rounds):
        r = await one_stepdown(c, rnd, args)
        rounds.append(r)
        moved = r["new"] is not None and r["new"] != r["old"]
        if not moved:
            run.notes.append(f"stepdown {rnd}: leader stayed {r['old']} (api: {r['api']})")
        print(
            f"  {run.server} stepdown {rnd}: gap {r['s']:.3f}s ({r['old']} -> {r['new']},"
            f" {r['errors']} failed tries {r['failed']}, load={r3.load1():.2f})",
            flush=True,
        )
    run.details["stepdown"] = rounds
    gaps = [r["s"] for r in rounds if r["new"] and r["new"] != r["old"]]
    if gaps:
        run.figures["stepdown_s"] = statistics.median(gaps)


# -- quorum loss ---------------------------------------------------------------------


async def phase_quorum(c: Cluster, run: Any, args: argparse.Namespace) -> None:
    r3 = _r3()
    admin = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        leader = (await r3.wait_healthy(admin))["cluster"]["leader"]
    finally:
        await admin.close()
    li = c.index(leader)
    si = (li + 1) % len(c.names)  # the survivor: a follower
    gone = [i for i in range(len(c.names)) if i != si]
    nc = await nats.connect(c.urls[si], allow_reconnect=False, error_cb=_quiet)
    try:
        pub = Publisher(nc, "q", QUORUM_TRY_S)
        for _ in range(QUORUM_BEFORE):
            await pub.one()
        before = len(pub.answers)
        t_kill = time.monotonic()
        for i in gone:
            c.kill(i)
        end = t_kill + args.quorum_s
        for _ in range(LOOP_MAX):
            if time.monotonic() >= end:
                break
            if await pub.one() != "ok":
                await asyncio.sleep(0.01)  # an answer at once: do not flood
        during = pub.answers[before:]
        t_restart = time.monotonic()
        for i in gone:
            await asyncio.to_thread(c.restart, i, wait=False)
        pub.js = nc.jetstream(timeout=args.try_timeout)
        back: float | None = None
        for _ in range(LOOP_MAX):
            if time.monotonic() - t_restart > RECOVER_S_MAX:
                break
            if await pub.one() == "ok":
                back = pub.answers[-1][1]
                break
            await asyncio.sleep(r3.POLL_S)
        for _ in range(QUORUM_BEFORE // 4):  # and it keeps serving
            await pub.one()
        lost = await _lost(nc, pub)
    finally:
        await nc.close()
    kinds: dict[str, int] = {}
    for a in during:
        kinds[a[2]] = kinds.get(a[2], 0) + 1
    lat = [a[1] - a[0] for a in during]
    acked_without_quorum = kinds.get("ok", 0)
    run.details["quorum"] = {
        "kinds": kinds,
        "lost": lost,
        "acked_without_quorum": acked_without_quorum,
    }
    if lat:
        run.figures["quorum_answer_s"] = statistics.median(lat)
    if back is not None:
        run.figures["quorum_recover_s"] = back - t_restart
    else:
        run.notes.append(f"quorum: no publish acknowledged within {RECOVER_S_MAX}s of the restart")
    run.figures["quorum_lost"] = float(lost)
    if acked_without_quorum:
        run.notes.append(f"quorum: {acked_without_quorum} publishes acknowledged by one replica")
    print(
        f"  {run.server} quorum loss ({c.names[si]} left): answers {kinds},"
        f" median answer {statistics.median(lat) if lat else float('nan'):.3f}s;"
        f" serving again {('%.2fs' % (back - t_restart)) if back else 'never'} after the restart;"
        f" acknowledged and lost: {lost} (load={r3.load1():.2f})",
        flush=True,
    )


async def _lost(nc: NATS, pub: Publisher) -> int:
    """Acknowledged publishes whose sequence does not hold their payload now."""
    r3 = _r3()
    lost = 0
    for _, _, kind, seq, mid in pub.answers:
        if kind != "ok":
            continue
        subj = f"$JS.API.STREAM.MSG.GET.{r3.STREAM}"
        try:
            msg = await nc.request(subj, json.dumps({"seq": seq}).encode(), timeout=5.0)
            doc = json.loads(msg.data)
        except Exception:  # unreadable counts as lost: the figure must not hide it
            lost += 1
            continue
        data = base64.b64decode(((doc.get("message") or {}).get("data")) or "")
        lost += data != mid.encode()
    return lost


# -- timeline ------------------------------------------------------------------------


async def phase_timeline(c: Cluster, run: Any, args: argparse.Namespace) -> None:
    r3 = _r3()
    admin = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        leader = (await r3.wait_healthy(admin))["cluster"]["leader"]
    finally:
        await admin.close()
    li = c.index(leader)
    pi = (li + 1) % len(c.names)
    watch = await nats.connect(c.urls[pi], error_cb=_quiet)
    ncs = [await nats.connect(c.urls[pi], error_cb=_quiet) for _ in range(TIMELINE_PUBLISHERS)]
    pubs = [Publisher(nc, f"t{k}", args.try_timeout) for k, nc in enumerate(ncs)]
    leaders: list[tuple[float, str | None]] = []
    stop = asyncio.Event()

    async def sampler() -> None:
        for _ in range(LOOP_MAX):
            if stop.is_set():
                return
            leaders.append((time.monotonic(), await _leader(watch, TIMELINE_SAMPLE_S * 3)))
            await asyncio.sleep(TIMELINE_SAMPLE_S)

    t0 = time.monotonic()
    tasks = [asyncio.ensure_future(p.run()) for p in pubs]
    tasks.append(asyncio.ensure_future(sampler()))
    try:
        await asyncio.sleep(TIMELINE_KILL_S)
        t_kill = time.monotonic()
        c.kill(li)
        await asyncio.sleep(TIMELINE_DOWN_S)
        t_restart = time.monotonic()
        await asyncio.to_thread(c.restart, li, wait=False)
        await asyncio.sleep(max(0.0, t0 + TIMELINE_S - time.monotonic()))
    finally:
        stop.set()
        for p in pubs:
            p.stop.set()
        await asyncio.wait(tasks, timeout=r3.API_TIMEOUT_S)
        for nc in [watch, *ncs]:
            await nc.close()
    acks = sorted(a - t0 for p in pubs for a in p.acks())
    errors = sorted((a[1] - t0, a[2]) for p in pubs for a in p.answers if a[2] != "ok")
    # the first PubAck of a publish sent after the kill (one in flight may still be answered)
    after = sorted(a[1] - t0 for p in pubs for a in p.answers if a[2] == "ok" and a[0] >= t_kill)
    run.details["timeline"] = {
        "names": c.names,
        "acks": acks,
        "errors": errors,
        "leaders": [(t - t0, n) for t, n in leaders],
        "kill": (t_kill - t0, leader),
        "restart": t_restart - t0,
    }
    if after:
        run.figures["timeline_gap_s"] = after[0] - (t_kill - t0)
    print(
        f"  {run.server} timeline: {len(acks)} PubAcks in {TIMELINE_S:g}s, killed {leader} at"
        f" {t_kill - t0:.2f}s, first PubAck after it at"
        f" +{(after[0] - (t_kill - t0)) if after else float('nan'):.3f}s (load={r3.load1():.2f})",
        flush=True,
    )


def plot_timeline(runs: list[Any], png: Path) -> Path | None:
    """One row per server run with a timeline: publish rate and the stream leader."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in runs if "timeline" in r.details]
    if not rows:
        return None
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 3.2 * len(rows)), squeeze=False)
    for ax, r in zip(axes[:, 0], rows, strict=True):
        tl = r.details["timeline"]
        names = tl["names"]
        nbins = int(TIMELINE_S / TIMELINE_BIN_S) + 1
        counts = [0] * nbins
        for t in tl["acks"]:
            counts[min(nbins - 1, int(t / TIMELINE_BIN_S))] += 1
        xs = [i * TIMELINE_BIN_S for i in range(nbins)]
        ax.step(xs, [n / TIMELINE_BIN_S for n in counts], where="post", color="tab:blue")
        ax.set_ylabel("PubAcks/s", color="tab:blue")
        ax.set_xlim(0, TIMELINE_S)
        kill_t, killed = tl["kill"]
        ax.axvline(kill_t, color="red", lw=2, label=f"SIGKILL {killed}")
        ax.axvline(tl["restart"], color="green", ls="--", label=f"restart {killed}")
        if tl["errors"]:
            ax.plot([t for t, _ in tl["errors"]], [0] * len(tl["errors"]), "x", color="grey",
                    ms=4, label="failed try")  # fmt: skip
        lx = ax.twinx()
        pts = [(t, names.index(n) + 1 if n in names else 0) for t, n in tl["leaders"]]
        lx.step([t for t, _ in pts], [y for _, y in pts], where="post", color="tab:orange")
        lx.set_yticks(range(len(names) + 1), ["none", *names])
        lx.set_ylim(-0.3, len(names) + 0.3)
        lx.set_ylabel("stream leader", color="tab:orange")
        label = "nats-server 2.15.1" if r.server == "ref" else r.server
        ax.set_title(f"{label} (sync {r.sync}): R3 publish rate and leader, one leader SIGKILL")
        ax.legend(loc="lower right", fontsize=8)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png
