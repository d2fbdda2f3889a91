"""Push and ordered consumers on one trijet node, end to end with nats-py (issue #5).

Each test starts its own server; waits are on messages and replies with
bounded timeouts.  Where a behaviour is about time (replay ``original``,
``rate_limit_bps``) only lower bounds are asserted: the server must not be
faster than the stored gaps or the rate allow.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ReplayPolicy, StorageType
from nats.js.errors import NotFoundError

from tests.support import start_server
from tests.support.aio import noop_cb, with_client

WAIT_S = 3.0


def _start(tmp_path: Path) -> Any:
    return start_server("trijet", ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path / "srv")


def _play(tmp_path: Path, scenario: Any) -> None:
    server = _start(tmp_path)

    async def main(nc: Any) -> None:
        await scenario(nc, nc.jetstream())

    with_client(server, main)


def test_push_acks_nak_redelivery_and_push_bound(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="P", subjects=["p.>"])
        for i in range(3):
            await js.publish(f"p.{i}", b"m%d" % i)
        sub = await js.subscribe("p.>", durable="d", stream="P", manual_ack=True)
        msgs = [await sub.next_msg(WAIT_S) for _ in range(3)]
        assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
        assert [m.subject for m in msgs] == ["p.0", "p.1", "p.2"]
        assert [m.metadata.num_pending for m in msgs] == [2, 1, 0]
        await msgs[0].ack_sync()
        await msgs[2].ack()
        await msgs[1].nak()
        again = await sub.next_msg(WAIT_S)
        assert (again.data, again.metadata.num_delivered) == (b"m1", 2)
        assert again.metadata.sequence.consumer == 4
        info = await js.consumer_info("P", "d")
        assert info.push_bound and info.num_ack_pending == 1 and info.num_redelivered == 1
        # a second plain subscription to a bound durable is refused by the client
        with pytest.raises(nats.js.errors.Error, match="already bound"):
            await js.subscribe("p.>", durable="d", stream="P")
        await again.ack_sync()
        await sub.unsubscribe()
        await nc.flush()
        info = await js.consumer_info("P", "d")
        assert not info.push_bound and info.num_ack_pending == 0
        assert info.ack_floor.stream_seq == 3
        # unbound: nothing is delivered; binding again resumes at the next message
        await js.publish("p.9", b"late")
        sub = await js.subscribe("p.>", durable="d", stream="P", manual_ack=True)
        late = await sub.next_msg(WAIT_S)
        assert (late.data, late.metadata.sequence.stream) == (b"late", 4)

    _play(tmp_path, scenario)


def test_deliver_group_queue_subscribers_share_the_messages(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="Q", subjects=["q"])
        got: dict[str, list[int]] = {"a": [], "b": []}
        done = asyncio.Event()
        total = 40

        def collector(name: str) -> Any:
            async def cb(msg: Any) -> None:
                got[name].append(msg.metadata.sequence.stream)
                if len(got["a"]) + len(got["b"]) >= total:
                    done.set()

            return cb

        nc2 = await nats.connect(nc.connected_url.geturl(), error_cb=noop_cb)
        try:
            await js.subscribe("q", queue="workers", stream="Q", cb=collector("a"))
            await nc2.jetstream().subscribe("q", queue="workers", stream="Q", cb=collector("b"))
            info = await js.consumer_info("Q", "workers")
            assert info.config.deliver_group == "workers" and info.push_bound
            for i in range(total):
                await js.publish("q", b"%d" % i)
            await asyncio.wait_for(done.wait(), WAIT_S)
            seqs = sorted(got["a"] + got["b"])
            assert seqs == list(range(1, total + 1))  # each message once, to one member
            info = await js.consumer_info("Q", "workers")
            assert info.delivered.consumer_seq == total
        finally:
            await nc2.close()

    _play(tmp_path, scenario)


def test_flow_control_pauses_for_a_slow_reader(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="F", subjects=["f"], storage=StorageType.MEMORY)
        total, size = 40, 200_000
        for i in range(total):
            await js.publish("f", bytes([i]) * size)
        # no callback: nats-py answers a flow-control request once the reader
        # has taken every message delivered before it
        sub = await js.subscribe("f", stream="F", flow_control=True, idle_heartbeat=5.0)
        first = await sub.next_msg(WAIT_S)
        assert first.data[:1] == b"\x00"
        info = await js.consumer_info("F", sub._consumer)
        # the first window is 2 MiB: the server stopped long before the end
        assert info.delivered.consumer_seq <= 12
        assert info.push_bound and info.config.flow_control
        rest = [await sub.next_msg(WAIT_S) for _ in range(total - 1)]
        assert [m.data[0] for m in rest] == list(range(1, total))
        info = await js.consumer_info("F", sub._consumer)
        assert info.delivered.consumer_seq == total and info.num_pending == 0

    _play(tmp_path, scenario)


def test_idle_heartbeats_carry_the_last_sequences(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="H", subjects=["h.>"])
        await js.publish("h.a", b"1")
        await js.publish("h.b", b"2")
        inbox = nc.new_inbox()
        got: asyncio.Queue[Any] = asyncio.Queue()
        await nc.subscribe(inbox, cb=got.put)
        await js.add_consumer(
            "H",
            ConsumerConfig(
                name="hb",
                deliver_subject=inbox,
                ack_policy=AckPolicy.EXPLICIT,
                idle_heartbeat=0.1,
                filter_subject="h.b",
            ),
        )
        data = await asyncio.wait_for(got.get(), WAIT_S)
        assert (data.subject, data.data) == ("h.b", b"2")
        beat = await asyncio.wait_for(got.get(), WAIT_S)
        assert beat.subject == inbox and beat.data == b""
        assert beat.headers == {
            "Status": "100",
            "Description": "Idle Heartbeat",
            "Nats-Last-Consumer": "1",
            "Nats-Last-Stream": "2",
        }
        again = await asyncio.wait_for(got.get(), WAIT_S)  # still idle: again
        assert again.headers and again.headers["Nats-Last-Consumer"] == "1"

    _play(tmp_path, scenario)


def test_headers_only(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="O", subjects=["o"])
        await js.publish("o", b"12345", headers={"X-Keep": "yes"})
        await js.publish("o", b"")
        sub = await js.subscribe("o", stream="O", headers_only=True)
        a = await sub.next_msg(WAIT_S)
        b = await sub.next_msg(WAIT_S)
        assert a.data == b"" and a.headers == {"X-Keep": "yes", "Nats-Msg-Size": "5"}
        assert b.data == b"" and b.headers == {"Nats-Msg-Size": "0"}

    _play(tmp_path, scenario)


def test_replay_original_keeps_the_stored_gaps(tmp_path: Path) -> None:
    gap_s = 0.3

    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="R", subjects=["r"])
        for i in range(3):
            if i:
                await asyncio.sleep(gap_s)  # makes the stored gaps, waits for nothing
            await js.publish("r", b"%d" % i)
        stamps: list[float] = []
        replayed, done = asyncio.Event(), asyncio.Event()

        async def cb(msg: Any) -> None:
            stamps.append(time.monotonic())
            if len(stamps) == 3:
                replayed.set()
            if len(stamps) == 4:
                done.set()

        await js.subscribe(
            "r",
            stream="R",
            cb=cb,
            config=ConsumerConfig(replay_policy=ReplayPolicy.ORIGINAL),
        )
        await asyncio.wait_for(replayed.wait(), WAIT_S)
        assert stamps[1] - stamps[0] >= gap_s * 0.8
        assert stamps[2] - stamps[1] >= gap_s * 0.8
        # caught up: a new message comes at once
        t0 = time.monotonic()
        await js.publish("r", b"new")
        await asyncio.wait_for(done.wait(), WAIT_S)
        assert stamps[3] >= t0

    _play(tmp_path, scenario)


def test_rate_limit_spaces_deliveries(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        # burst = the stream's max_msg_size (10 kB); 80 kB/s afterwards
        await js.add_stream(name="L", subjects=["l"], max_msg_size=10_000)
        for _ in range(5):
            await js.publish("l", b"x" * 9_000)
        t0 = time.monotonic()
        sub = await js.subscribe("l", stream="L", config=ConsumerConfig(rate_limit_bps=8 * 80_000))
        for _ in range(5):
            await sub.next_msg(WAIT_S)
        # 45 kB minus the 10 kB burst at 80 kB/s: at least ~0.43 s
        assert time.monotonic() - t0 >= 0.35

    _play(tmp_path, scenario)


def test_max_ack_pending_and_ack_wait_redelivery(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="M", subjects=["m"])
        for i in range(3):
            await js.publish("m", b"%d" % i)
        sub = await js.subscribe(
            "m",
            durable="mp",
            stream="M",
            manual_ack=True,
            config=ConsumerConfig(max_ack_pending=2, ack_wait=0.5),
        )
        a, b = await sub.next_msg(WAIT_S), await sub.next_msg(WAIT_S)
        assert (a.data, b.data) == (b"0", b"1")
        info = await js.consumer_info("M", "mp")
        assert (info.num_ack_pending, info.delivered.stream_seq) == (2, 2)
        await a.ack_sync()  # room for the third
        c = await sub.next_msg(WAIT_S)
        assert c.data == b"2"
        # b is never acked: redelivered after ack_wait with a new consumer seq
        b2 = await sub.next_msg(WAIT_S)
        assert (b2.data, b2.metadata.num_delivered, b2.metadata.sequence.consumer) == (b"1", 2, 4)

    _play(tmp_path, scenario)


def test_ephemeral_push_deleted_after_losing_interest(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="I", subjects=["i"])
        deleted = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.I.*")
        inbox = nc.new_inbox()
        s = await nc.subscribe(inbox)
        ci = await js.add_consumer(
            "I", ConsumerConfig(deliver_subject=inbox, inactive_threshold=0.3)
        )
        assert ci.push_bound
        await s.unsubscribe()
        msg = await deleted.next_msg(WAIT_S)
        assert msg.subject == f"$JS.EVENT.ADVISORY.CONSUMER.DELETED.I.{ci.name}"
        with pytest.raises(NotFoundError):
            await js.consumer_info("I", ci.name)

    _play(tmp_path, scenario)


def test_ordered_consumer_recovers_from_a_deleted_consumer(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="OC", subjects=["oc.>"])
        for i in range(5):
            await js.publish(f"oc.{i}", b"%d" % i)
        sub = await js.subscribe("oc.>", stream="OC", ordered_consumer=True, idle_heartbeat=0.2)
        first = [await sub.next_msg(WAIT_S) for _ in range(5)]
        assert [m.metadata.sequence.stream for m in first] == [1, 2, 3, 4, 5]
        assert [m.metadata.sequence.consumer for m in first] == [1, 2, 3, 4, 5]
        info = await js.consumer_info("OC", sub._consumer)
        assert info.config.flow_control and info.config.mem_storage
        assert info.config.ack_policy == AckPolicy.NONE
        old = sub._consumer
        # the server loses the consumer: heartbeats stop, the client notices
        # and re-creates it from the next stream sequence
        assert await js.delete_consumer("OC", old)
        for i in range(5, 10):
            await js.publish(f"oc.{i}", b"%d" % i)
        rest = [await sub.next_msg(WAIT_S) for _ in range(5)]
        assert [m.data for m in rest] == [b"5", b"6", b"7", b"8", b"9"]
        assert [m.metadata.sequence.consumer for m in rest] == [1, 2, 3, 4, 5]
        assert sub._consumer != old
        info = await js.consumer_info("OC", sub._consumer)
        assert info.config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
        assert info.config.opt_start_seq == 6

    _play(tmp_path, scenario)


def test_ordered_consumer_recovers_from_a_sequence_gap(tmp_path: Path) -> None:
    async def scenario(nc: Any, js: Any) -> None:
        await js.add_stream(name="OG", subjects=["og"])
        for i in range(6):
            await js.publish("og", b"%d" % i)
        sub = await js.subscribe("og", stream="OG", ordered_consumer=True, idle_heartbeat=0.5)
        first = [await sub.next_msg(WAIT_S) for _ in range(3)]
        assert [m.data for m in first] == [b"0", b"1", b"2"]
        old = sub._consumer
        # simulate a lost delivery: the client now expects a later consumer
        # sequence, sees a gap, drops the message and re-creates the consumer
        # from the stream sequence after the last one it handed out
        sub._sub._jsi._dseq += 1
        for i in range(6, 8):
            await js.publish("og", b"%d" % i)
        rest = [await sub.next_msg(WAIT_S) for _ in range(5)]
        assert [m.data for m in rest] == [b"3", b"4", b"5", b"6", b"7"]
        assert sub._consumer != old
        # the abandoned consumer lost its subscriber
        info = await js.consumer_info("OG", old)
        assert not info.push_bound

    _play(tmp_path, scenario)
