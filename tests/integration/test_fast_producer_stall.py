"""A fast producer and a consumer that stops reading, on trijet and the reference (nats-py).

nats-server stalls a client producer whose messages go to a connection with more than
3/4 of ``max_pending`` queued, until that connection's writer catches up (at most 10 ms
a read); so a consumer that pauses is not cut as a slow consumer.  With
``no_fast_producer_stall: true`` it drops those messages instead: the consumer is not
cut either, but misses messages (counted in its ``out_msgs`` all the same).  Both
servers run the same scenario; the consumer's pause ends on an event (its ``/connz``
``stalls`` appear, or the publisher's flush returns), never on a timer.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import nats
import pytest

from tests.support import ServerProcess
from tests.support.aio import ErrorLog, run

MAX_PENDING = 16 * 1024 * 1024
PAYLOAD = b"p" * 16384
#: 3x max_pending: more than the gate's threshold plus both ends' socket buffers
N_MSGS = 3 * MAX_PENDING // len(PAYLOAD)
WAIT_S_MAX = 30.0


def _conf(no_stall: bool) -> str:
    return (
        f"max_pending: {MAX_PENDING}\nhttp_port: -1\n"
        f"no_fast_producer_stall: {'true' if no_stall else 'false'}\n"
    )


def _get(sp: ServerProcess, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{sp.monitoring_url}{path}", timeout=5) as r:
        doc: dict[str, Any] = json.loads(r.read())
        return doc


async def _conn_info(sp: ServerProcess, cid: int) -> dict[str, Any]:
    doc = await asyncio.to_thread(_get, sp, f"/connz?cid={cid}&state=all")
    conns: list[dict[str, Any]] = doc["connections"]
    assert len(conns) == 1
    return conns[0]


async def _until_stalled(sp: ServerProcess, cid: int) -> dict[str, Any]:
    """The consumer's /connz entry once a producer was stalled on it (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S_MAX
    while True:
        info = await _conn_info(sp, cid)
        if info.get("stalls") or info.get("reason") or loop.time() > deadline:
            return info
        await asyncio.sleep(0.01)


async def _scenario(sp: ServerProcess, no_stall: bool) -> tuple[int, dict[str, Any]]:
    """Pause the consumer, flood it, resume; the messages it got and its /connz entry."""
    errors = ErrorLog()
    kw: dict[str, Any] = {"allow_reconnect": False, "error_cb": errors.cb}
    sub_nc = await nats.connect(sp.url, **kw)
    pub_nc = await nats.connect(sp.url, **kw)
    try:
        sub = await sub_nc.subscribe(
            "stall.>", pending_msgs_limit=10 * N_MSGS, pending_bytes_limit=4 * 2**30
        )
        await sub_nc.flush()
        cid = sub_nc.client_id
        assert cid is not None
        transport = sub_nc._transport._io_writer.transport  # type: ignore[union-attr]
        transport.pause_reading()  # the consumer stops reading

        async def flood() -> None:
            for _ in range(N_MSGS):
                await pub_nc.publish("stall.data", PAYLOAD)
            await pub_nc.flush(timeout=WAIT_S_MAX)

        flooding = asyncio.ensure_future(flood())
        if no_stall:
            await flooding  # never stalled: the server read all of it
        else:
            info = await _until_stalled(sp, cid)
            assert info.get("stalls"), info  # a producer was stalled on the consumer
        transport.resume_reading()
        await flooding
        # everything queued for the consumer is written once its PONG arrives:
        # the gate is open, the end marker is delivered
        await sub_nc.flush(timeout=WAIT_S_MAX)
        await pub_nc.publish("stall.end", b"")
        await pub_nc.flush(timeout=WAIT_S_MAX)
        got = 0
        while True:
            msg = await sub.next_msg(timeout=WAIT_S_MAX)
            if msg.subject == "stall.end":
                break
            got += 1
        assert not sub_nc.is_closed
        return got, await _conn_info(sp, cid)
    finally:
        await pub_nc.close()
        await sub_nc.close()


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_stalled_producer_spares_a_pausing_consumer(start_server: Any, kind: str) -> None:
    sp = start_server(kind, config=_conf(no_stall=False))
    got, info = run(lambda: _scenario(sp, no_stall=False))
    assert got == N_MSGS  # nothing dropped
    assert "reason" not in info  # not cut
    assert info["stalls"] > 0
    # the field's place in ConnInfo: after out_bytes, before subscriptions (both kinds)
    keys = list(info)
    assert keys[keys.index("out_bytes") + 1 : keys.index("subscriptions")] == ["stalls"]
    varz = _get(sp, "/varz")
    assert varz["slow_consumers"] == 0
    assert varz["stalled_clients"] >= info["stalls"]


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_no_fast_producer_stall_drops_for_a_pausing_consumer(start_server: Any, kind: str) -> None:
    sp = start_server(kind, config=_conf(no_stall=True))
    got, info = run(lambda: _scenario(sp, no_stall=True))
    assert 0 < got < N_MSGS  # dropped while it was behind, not cut
    assert "reason" not in info and "stalls" not in info
    assert info["out_msgs"] == N_MSGS + 1  # counted all the same, as the reference counts
    varz = _get(sp, "/varz")
    assert (varz["slow_consumers"], varz["stalled_clients"]) == (0, 0)


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_a_route_is_not_stalled(start_server: Any, kind: str, tmp_path: Any) -> None:
    """Producer on n1, pausing consumer on n2: n2's deliveries come from the route,
    which nats-server never stalls -- nothing on n2 counts a stall, however far
    behind the consumer is."""
    from node.launcher import plan_cluster
    from tests.integration.test_cluster_core import wait_interest

    plans = plan_cluster(
        2, tmp_path / "data", jetstream=False, extra=f"max_pending: {MAX_PENDING}\n"
    )
    n1, n2 = (
        start_server(kind, config=p.config, workdir=tmp_path / p.name, host=None, port=None)
        for p in plans
    )

    async def scenario() -> dict[str, Any]:
        kw: dict[str, Any] = {"allow_reconnect": False, "error_cb": ErrorLog().cb}
        sub_nc = await nats.connect(n2.url, **kw)
        mark_nc = await nats.connect(n2.url, **kw)
        pub_nc = await nats.connect(n1.url, **kw)
        try:
            await sub_nc.subscribe(
                "stall.>", pending_msgs_limit=10 * N_MSGS, pending_bytes_limit=4 * 2**30
            )
            marks = await mark_nc.subscribe("mark")
            await wait_interest(pub_nc, sub_nc, "stall")
            await wait_interest(pub_nc, mark_nc, "mark")
            cid = sub_nc.client_id
            assert cid is not None
            sub_nc._transport._io_writer.transport.pause_reading()  # type: ignore[union-attr]
            for _ in range(N_MSGS):
                await pub_nc.publish("stall.data", PAYLOAD)
            # the route keeps order: once n2 delivers the mark, it has routed the rest
            await pub_nc.publish("mark", b"")
            await marks.next_msg(timeout=WAIT_S_MAX)
            return await _conn_info(n2, cid)
        finally:
            await pub_nc.close()
            await mark_nc.close()
            await sub_nc.close()

    info = run(scenario)
    # more than max_pending went its way, unread (then it may have been cut: the
    # route's deliveries are not held back)
    assert info["out_msgs"] * len(PAYLOAD) > MAX_PENDING
    assert "stalls" not in info
    assert _get(n2, "/varz")["stalled_clients"] == 0
