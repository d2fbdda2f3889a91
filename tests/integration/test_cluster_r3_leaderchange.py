"""A pull request waiting on a consumer's leader when the lead moves (#14).

nats-server 2.15.1, three nodes, an empty R3 stream, a durable pull consumer
and a waiting ``MSG.NEXT`` (batch 10, expires 5 s): on
``$JS.API.CONSUMER.LEADER.STEPDOWN`` the request is answered once with a
header-only ``409 Leadership Change`` -- no ``Nats-Pending-*`` headers --
and is no longer waiting; nats-py's ``fetch`` does not return early on it
(it raises its timeout).  trijet answers the same, from the old leader as it
steps down (it alone holds the request; ``DeliveryManager.detach``).  A
message published afterwards goes to a new request, once, and never to the
ended one.

On ``STREAM.LEADER.STEPDOWN`` nats-server's consumer keeps its own leader and
the pull keeps waiting; a trijet consumer's leader is its stream's, so there
the lead moves and the pull hears ``409 Leadership Change`` too -- told, not
lost.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import run
from tests.support.cluster import start_cluster

REQUEST_TIMEOUT_S = 5.0
EXPIRES_NS = 5_000_000_000
#: a bounded look for a further answer on an ended request
AFTER_S = 0.5
POLLS = 100


async def _num_waiting(js: Any, stream: str, name: str, want: int) -> None:
    """Wait (bounded) until the consumer's leader reports ``want`` waiting pulls."""
    n = -1
    for _ in range(POLLS):
        try:
            n = (await js.consumer_info(stream, name)).num_waiting
        except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
            n = -1
        if n == want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"num_waiting {n}, want {want}")


async def _scenario(url: str, stepdown: str) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="LC", subjects=["lc.>"], num_replicas=3)
        await js.add_consumer("LC", durable_name="D", ack_policy="explicit")
        await _num_waiting(js, "LC", "D", 0)  # the consumer has a leader

        inbox = nc.new_inbox()
        got: list[Any] = []
        first = asyncio.Event()

        async def on(msg: Any) -> None:
            got.append(msg)
            first.set()

        sub = await nc.subscribe(inbox, cb=on)
        body = json.dumps({"batch": 10, "expires": EXPIRES_NS}).encode()
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.LC.D", body, reply=inbox)
        await _num_waiting(js, "LC", "D", 1)

        subject = (
            "$JS.API.CONSUMER.LEADER.STEPDOWN.LC.D"
            if stepdown == "consumer"
            else "$JS.API.STREAM.LEADER.STEPDOWN.LC"
        )
        resp = json.loads((await nc.request(subject, b"", timeout=REQUEST_TIMEOUT_S)).data)
        assert resp.get("success") is True, resp
        await asyncio.wait_for(first.wait(), REQUEST_TIMEOUT_S)
        await _num_waiting(js, "LC", "D", 0)

        # a message after the 409 goes to a new request, once, not the old one
        await js.publish("lc.x", b"one", timeout=REQUEST_TIMEOUT_S)
        psub = await js.pull_subscribe_bind("D", stream="LC")
        msgs: list[Any] = []
        for _ in range(POLLS):
            try:
                msgs = await psub.fetch(10, timeout=1)
                break
            except nats.errors.TimeoutError:
                continue
        assert [m.data for m in msgs] == [b"one"]
        await asyncio.sleep(AFTER_S)  # an observation window, not a wait for a state
        await sub.unsubscribe()

        assert len(got) == 1, [(m.headers, m.data) for m in got]
        hdrs = dict(got[0].headers or {})
        assert hdrs.get("Status") == "409"
        assert hdrs.get("Description") == "Leadership Change"
        assert got[0].data == b""
        assert not any(k.startswith("Nats-Pending") for k in hdrs)
    finally:
        await nc.close()


@pytest.mark.parametrize("kind", ["reference", "trijet"])
def test_waiting_pull_hears_consumer_leader_stepdown(kind: str, tmp_path: Path) -> None:
    with start_cluster(kind, workdir=tmp_path) as c:  # type: ignore[arg-type]
        run(lambda: _scenario(c.urls[0], "consumer"), timeout=30)


def test_waiting_pull_hears_stream_leader_stepdown(tmp_path: Path) -> None:
    """trijet only: its consumer's lead moves with its stream's (module doc)."""
    with start_cluster("trijet", workdir=tmp_path) as c:
        run(lambda: _scenario(c.urls[0], "stream"), timeout=30)
