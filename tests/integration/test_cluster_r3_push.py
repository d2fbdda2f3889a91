"""Push and ordered consumers of R3 streams across nodes, through leader changes.

Three server processes; the client sits on a node that does not lead the
stream, so every delivery, flow-control request and reply, idle heartbeat
and ack crosses a route.  The stream's lead moves twice: a
``STREAM.LEADER.STEPDOWN`` to the third node, then a SIGKILL of that node.
Properties (the same for nats-server, ``TRIJET_REFERENCE=1`` runs them there
too):

* a durable push consumer with flow control and idle heartbeats delivers
  every message (none skipped), answers flow control from across the route,
  sends heartbeats after each phase, and its ack floor reaches the end;
* a nats-py ordered consumer (``ordered_consumer=True``) hands the
  application every message exactly once, in order, with no gap.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, start_cluster

REQUEST_TIMEOUT_S = 2.0
PHASE_MSGS = 150
PAYLOAD = b"x" * 16 * 1024  # 150 x 16 KiB > half the 2 MiB window: flow control
#: an R3 create waits for the group's first leader (slow on a loaded machine)
CREATE_TIMEOUT_S = 15.0
#: bound on each wait for a condition below (elections on a loaded machine)
WAIT_S = 40.0

KINDS = ["trijet", "reference"] if os.environ.get("TRIJET_REFERENCE") else ["trijet"]


@pytest.fixture(params=KINDS)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    with start_cluster(request.param, workdir=tmp_path) as c:
        yield c


async def until(pred: Callable[[], bool], cond: asyncio.Condition, what: str) -> None:
    """Wait (bounded) until ``pred()`` holds; ``cond`` is notified on change."""
    async with cond:
        try:
            await asyncio.wait_for(cond.wait_for(pred), WAIT_S)
        except TimeoutError:
            raise AssertionError(f"not reached in {WAIT_S}s: {what}") from None


async def retrying(fn: Callable[[], Awaitable[Any]]) -> Any:
    """``await fn()`` until it answers, across an election (bounded)."""
    last: Exception | None = None
    for _ in range(200):
        try:
            return await fn()
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
            last = exc
        except nats.js.errors.APIError as exc:
            if exc.code not in (503, None):
                raise
            last = exc
        await asyncio.sleep(0.1)
    raise AssertionError(f"no answer across the election: {last!r}")


async def stream_leader(js: Any, stream: str, *, not_: str | None = None) -> str:
    """The stream's leader once one (other than ``not_``) is known."""
    for _ in range(300):
        try:
            info = await js.stream_info(stream)
            leader = info.cluster.leader if info.cluster else None
            if leader and leader != not_:
                return str(leader)
        except (nats.errors.TimeoutError, nats.js.errors.APIError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream}: no leader other than {not_}")


class LeaderMoves:
    """Setup and the two lead changes shared by the tests (client on ``home``)."""

    def __init__(self, cluster: Cluster, stream: str, subjects: list[str]) -> None:
        self.cluster = cluster
        self.stream = stream
        self.subjects = subjects

    async def setup(self, nc0: Any) -> tuple[str, str, str]:
        """Stream created; returns (leader, home, third) server names."""
        js = nc0.jetstream(timeout=CREATE_TIMEOUT_S)
        await js.add_stream(name=self.stream, subjects=self.subjects, num_replicas=3)
        leader = await stream_leader(js, self.stream)
        others = [n for n in self.cluster.names if n != leader]
        return leader, others[0], others[1]

    async def publish(self, js: Any, subject: str, n: int) -> None:
        for _ in range(n):
            await retrying(lambda: js.publish(subject, PAYLOAD, timeout=REQUEST_TIMEOUT_S))

    async def step_down_to(self, nc: Any, js: Any, target: str) -> None:
        """Move the stream's lead to ``target`` (preferred placement)."""
        body = json.dumps({"placement": {"preferred": target}}).encode()
        resp = await nc.request(
            f"$JS.API.STREAM.LEADER.STEPDOWN.{self.stream}", body, timeout=REQUEST_TIMEOUT_S
        )
        assert json.loads(resp.data).get("success") is True, resp.data
        for _ in range(300):
            if await stream_leader(js, self.stream) == target:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{target} did not take the lead")


def test_push_consumer_across_nodes_through_stepdown_and_kill(cluster: Cluster) -> None:
    moves = LeaderMoves(cluster, "PS", ["ps.>"])

    async def body() -> dict[str, Any]:
        nc0 = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        _, home, third = await moves.setup(nc0)
        await nc0.close()
        nc = await nats.connect(cluster.urls[cluster.index(home)], error_cb=noop_cb)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        cond = asyncio.Condition()
        got: dict[int, int] = {}  # stream seq -> times delivered
        counts = {"fc": 0, "hb": 0}

        async def on_msg(msg: Any) -> None:
            hdr = msg.headers or {}
            if hdr.get("Status") == "100":
                if msg.reply:
                    counts["fc"] += 1
                    await nc.publish(msg.reply, b"")
                else:
                    counts["hb"] += 1
            else:
                seq = int(msg.reply.split(".")[-4])
                got[seq] = got.get(seq, 0) + 1
                await nc.publish(msg.reply, b"+ACK")
            async with cond:
                cond.notify_all()

        await nc.subscribe("dlv.ps", cb=on_msg)
        await nc.flush()
        await js.add_consumer(
            "PS",
            durable_name="PD",
            deliver_subject="dlv.ps",
            flow_control=True,
            idle_heartbeat=0.5,
            ack_policy="explicit",
            ack_wait=2,
        )
        total = 0
        for phase in range(3):
            if phase == 1:
                await moves.step_down_to(nc, js, third)
            if phase == 2:
                cluster.kill(cluster.index(third))
                await stream_leader(js, "PS", not_=third)
            await moves.publish(js, "ps.a", PHASE_MSGS)
            total += PHASE_MSGS
            end = total
            await until(lambda end=end: all(s in got for s in range(1, end + 1)), cond, f"1..{end}")
            hb = counts["hb"]
            await until(lambda hb=hb: counts["hb"] > hb, cond, f"a heartbeat after phase {phase}")
        ci = None
        for _ in range(300):
            ci = await retrying(lambda: js.consumer_info("PS", "PD"))
            if ci.ack_floor.stream_seq == total:
                break
            await asyncio.sleep(0.1)
        await nc.close()
        return {"got": got, "counts": counts, "ci": ci, "total": total}

    out = run(body, timeout=240)
    assert sorted(out["got"]) == list(range(1, out["total"] + 1))
    assert out["counts"]["fc"] > 0
    ci = out["ci"]
    assert ci.ack_floor.stream_seq == out["total"] and ci.num_ack_pending == 0, ci


def test_ordered_consumer_across_nodes_through_stepdown_and_kill(cluster: Cluster) -> None:
    moves = LeaderMoves(cluster, "PO", ["po.>"])

    async def body() -> list[int]:
        nc0 = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        _, home, third = await moves.setup(nc0)
        await nc0.close()
        nc = await nats.connect(cluster.urls[cluster.index(home)], error_cb=noop_cb)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        cond = asyncio.Condition()
        seqs: list[int] = []

        async def on_msg(msg: Any) -> None:
            seqs.append(msg.metadata.sequence.stream)
            async with cond:
                cond.notify_all()

        await retrying(
            lambda: js.subscribe("po.>", cb=on_msg, ordered_consumer=True, idle_heartbeat=0.5)
        )
        total = 0
        for phase in range(3):
            if phase == 1:
                await moves.step_down_to(nc, js, third)
            if phase == 2:
                cluster.kill(cluster.index(third))
                await stream_leader(js, "PO", not_=third)
            await moves.publish(js, "po.a", PHASE_MSGS)
            total += PHASE_MSGS
            end = total
            await until(lambda end=end: len(seqs) >= end, cond, f"{end} messages")
        await nc.close()
        return seqs

    seqs = run(body, timeout=240)
    assert seqs == list(range(1, 3 * PHASE_MSGS + 1)), seqs
