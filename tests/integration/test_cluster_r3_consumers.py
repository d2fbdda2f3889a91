"""Consumers of R3 streams on three trijet-server processes, driven by nats-py.

A durable pull consumer's state rides in its stream's Raft group: after a
SIGKILL of the stream's leader in the middle of a fetch-and-ack loop, the
survivors go on from the replicated state -- no message whose AckSync was
answered is delivered again, none is skipped, the ack floor never moves back
-- and the killed node, once back, holds the same consumer state.  Consumer
INFO is answered once, whichever node it is asked of.  A KV bucket with
``replicas=3`` keeps working across a leader kill.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import KeyWrongLastSequenceError

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, get_json, start_cluster

REQUEST_TIMEOUT_S = 2.0
MSGS = 120
#: a bounded look for a second answer after the first one
SECOND_ANSWER_S = 0.5


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with start_cluster("trijet", workdir=tmp_path) as c:
        yield c


def _local_consumer(c: Cluster, i: int, stream: str, name: str) -> dict[str, Any] | None:
    """Consumer ``name``'s state as node ``i`` holds it (``/jsz?consumers=true``)."""
    doc = get_json(f"{c.monitoring_urls[i]}/jsz?consumers=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] != stream:
                continue
            for cd in s.get("consumer_detail") or []:
                if cd["name"] == name:
                    return {
                        "delivered": cd["delivered"]["stream_seq"],
                        "ack_floor": cd["ack_floor"]["stream_seq"],
                        "num_ack_pending": cd["num_ack_pending"],
                    }
    return None


async def _answers(nc: Any, subject: str) -> list[dict[str, Any]]:
    """Every answer to one request within the first answer + ``SECOND_ANSWER_S``."""
    inbox = nc.new_inbox()
    got: list[dict[str, Any]] = []
    first = asyncio.Event()

    async def on(msg: Any) -> None:
        got.append(json.loads(msg.data))
        first.set()

    sub = await nc.subscribe(inbox, cb=on)
    try:
        await nc.publish(subject, b"", reply=inbox)
        await asyncio.wait_for(first.wait(), REQUEST_TIMEOUT_S * 3)
        await asyncio.sleep(SECOND_ANSWER_S)  # an observation window, not a wait for a state
    finally:
        await sub.unsubscribe()
    return got


async def _retrying(fn: Any) -> Any:
    """``await fn()`` until it answers (bounded): across a leader election."""
    for _ in range(100):
        try:
            return await fn()
        except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
            await asyncio.sleep(0.1)
    raise AssertionError("no answer across the election")


async def _leader(js: Any, stream: str) -> str:
    for _ in range(100):
        try:
            info = await js.stream_info(stream)
            if info.cluster and info.cluster.leader:
                return str(info.cluster.leader)
        except (nats.errors.TimeoutError, nats.js.errors.APIError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} has no leader")


def test_r3_durable_pull_survives_leader_kill(cluster: Cluster) -> None:
    async def setup() -> tuple[str, dict[str, Any]]:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            await js.add_stream(name="RC", subjects=["rc.>"], num_replicas=3)
            for i in range(MSGS):
                await js.publish("rc.a", b"%d" % i)
            leader = await _leader(js, "RC")
            answers = await _answers(nc, "$JS.API.CONSUMER.INFO.RC.NOPE")
            assert len(answers) == 1 and answers[0]["error"]["err_code"] == 10014
            return leader, answers[0]
        finally:
            await nc.close()

    leader, _ = run(setup, timeout=60)
    li = cluster.index(leader)
    survivor = next(i for i in range(3) if i != li)
    state: dict[str, Any] = {"confirmed": {}, "seen": [], "floors": [], "killed": False}

    async def fetch_loop(nc: Any, js: Any, *, kill_after: int | None, stop_at: int) -> None:
        psub = None
        for _ in range(100):  # a new stream leader is elected within the bound
            try:
                psub = await js.pull_subscribe("rc.>", durable="D", stream="RC")
                break
            except (nats.errors.TimeoutError, nats.js.errors.APIError):
                await asyncio.sleep(0.1)
        assert psub is not None
        for _ in range(400):
            if len(state["confirmed"]) >= stop_at:
                return
            try:
                msgs = await psub.fetch(10, timeout=1.0)
            except (nats.errors.TimeoutError, nats.js.errors.APIError):
                msgs = []
            for m in msgs:
                seq = m.metadata.sequence.stream
                assert seq not in state["confirmed"], f"{seq} delivered again after its AckSync"
                state["seen"].append(seq)
                try:
                    await m.ack_sync(timeout=1.0)
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    continue  # not confirmed: may come again
                state["confirmed"][seq] = True
            try:
                ci = await js.consumer_info("RC", "D", timeout=1.0)
                state["floors"].append(ci.ack_floor.stream_seq)
            except (nats.errors.TimeoutError, nats.js.errors.APIError):
                pass
            if kill_after is not None and len(state["confirmed"]) >= kill_after:
                return

    async def before_kill() -> dict[str, Any]:
        nc = await nats.connect(cluster.urls[survivor], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            await js.add_consumer("RC", durable_name="D", ack_policy="explicit", ack_wait=3)
            ci = await js.consumer_info("RC", "D")
            await fetch_loop(nc, js, kill_after=MSGS // 3, stop_at=MSGS)
            return {"cluster": ci.cluster, "num_replicas": ci.config.num_replicas}
        finally:
            await nc.close()

    first = run(before_kill, timeout=60)
    cl = first["cluster"]
    assert first["num_replicas"] in (0, None)
    assert cl.leader == leader and cl.raft_group.startswith("C-R3F-"), cl
    assert len(cl.replicas) == 2
    cluster.kill(li)

    async def after_kill() -> dict[str, Any]:
        nc = await nats.connect(cluster.urls[survivor], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            await fetch_loop(nc, js, kill_after=None, stop_at=MSGS)
            ci = await js.consumer_info("RC", "D")
            answers = [await _answers(nc, "$JS.API.CONSUMER.INFO.RC.D")]
            return {"info": ci, "answers": answers}
        finally:
            await nc.close()

    second = run(after_kill, timeout=120)
    assert sorted(state["confirmed"]) == list(range(1, MSGS + 1))  # none skipped
    floors = state["floors"]
    assert floors == sorted(floors), floors  # the ack floor never moves back
    ci = second["info"]
    assert ci.ack_floor.stream_seq == MSGS and ci.num_ack_pending == 0
    assert ci.cluster.leader != leader
    assert all(len(a) == 1 for a in second["answers"])
    cluster.restart(li)

    def agree(c: Cluster) -> bool:
        states = [_local_consumer(c, i, "RC", "D") for i in range(3)]
        return all(
            s == {"delivered": MSGS, "ack_floor": MSGS, "num_ack_pending": 0} for s in states
        )

    cluster.wait_until(agree, timeout=30, what="every replica holds D's state")

    async def from_every_node() -> list[int]:
        counts = []
        for url in cluster.urls:
            nc = await nats.connect(url, error_cb=noop_cb)
            try:
                counts.append(len(await _answers(nc, "$JS.API.CONSUMER.INFO.RC.D")))
            finally:
                await nc.close()
        return counts

    assert run(from_every_node, timeout=60) == [1, 1, 1]


def test_r3_consumer_replicas_and_r1_ephemeral(cluster: Cluster) -> None:
    async def body() -> None:
        nc = await nats.connect(cluster.urls[1], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            await js.add_stream(name="R2S", subjects=["r2s.>"], num_replicas=2)
            resp = await nc.request(
                "$JS.API.CONSUMER.CREATE.R2S.TOO",
                json.dumps(
                    {"stream_name": "R2S", "config": {"durable_name": "TOO", "num_replicas": 3}}
                ).encode(),
                timeout=REQUEST_TIMEOUT_S,
            )
            err = json.loads(resp.data)["error"]
            assert (err["code"], err["err_code"]) == (400, 10126)
            assert err["description"] == "consumer config replica count exceeds parent stream"
            resp = await nc.request(
                "$JS.API.CONSUMER.CREATE.R2S",
                json.dumps({"stream_name": "R2S", "config": {"ack_policy": "explicit"}}).encode(),
                timeout=REQUEST_TIMEOUT_S,
            )
            eph = json.loads(resp.data)
            assert eph["config"]["num_replicas"] == 0
            assert set(eph["cluster"]) == {"name", "leader"}, eph["cluster"]
            d = await js.add_consumer("R2S", durable_name="DUR", ack_policy="explicit")
            assert d.cluster.raft_group.startswith("C-R2F-") and d.config.num_replicas in (0, None)
            for name, moves in (("DUR", True), (eph["name"], False), ("NOPE", None)):
                before = await _leader(js, "R2S")
                resp = await nc.request(
                    f"$JS.API.CONSUMER.LEADER.STEPDOWN.R2S.{name}", b"", timeout=REQUEST_TIMEOUT_S
                )
                doc = json.loads(resp.data)
                assert doc["type"] == "io.nats.jetstream.api.v1.consumer_leader_stepdown_response"
                if moves is None:
                    assert doc["error"]["err_code"] == 10014
                    continue
                assert doc["success"] is True
                if moves:  # the consumer's leader is its stream's: the stream's lead moves
                    after = before
                    for _ in range(100):
                        after = await _leader(js, "R2S")
                        if after != before:
                            break
                        await asyncio.sleep(0.05)
                    assert after != before
                    ci = await _retrying(lambda: js.consumer_info("R2S", "DUR"))
                    assert ci.cluster.leader == after
            await js.delete_consumer("R2S", "DUR")
            names = await js.consumers_info("R2S")
            assert [c.name for c in names] == [eph["name"]]
        finally:
            await nc.close()

    run(body, timeout=60)


def test_r3_kv_across_leader_kill(cluster: Cluster) -> None:
    async def before() -> str:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            kv = await js.create_key_value(bucket="CFG", replicas=3, history=5)
            r1 = await kv.put("a", b"1")
            await kv.update("a", b"2", last=r1)
            with pytest.raises(KeyWrongLastSequenceError):
                await kv.update("a", b"x", last=r1)
            await kv.put("b", b"1")
            await kv.delete("b")
            assert (await kv.get("a")).value == b"2"
            return await _leader(js, "KV_CFG")
        finally:
            await nc.close()

    leader = run(before, timeout=60)
    li = cluster.index(leader)
    survivor = next(i for i in range(3) if i != li)
    cluster.kill(li)

    async def after() -> None:
        nc = await nats.connect(cluster.urls[survivor], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            kv = await _retrying(lambda: js.key_value("CFG"))
            entry = await _retrying(lambda: kv.get("a"))
            assert entry.value == b"2"
            rev = await kv.update("a", b"3", last=entry.revision)
            with pytest.raises(KeyWrongLastSequenceError):
                await kv.update("a", b"y", last=entry.revision)
            assert (await kv.get("a")).revision == rev
            await kv.put("c", b"1")
            assert sorted(await kv.keys()) == ["a", "c"]
            hist = [e.value for e in await kv.history("a")]
            assert hist == [b"1", b"2", b"3"]
        finally:
            await nc.close()

    run(after, timeout=60)
    cluster.restart(li)
