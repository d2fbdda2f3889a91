"""A pull waiting on a consumer's leader that is SIGKILLed, and onlookers of pulls (#14).

Observed on three nats-server 2.15.1 processes (an R3 stream, a durable pull
consumer): a waiting ``MSG.NEXT`` sent by a client on a follower is answered,
when the consumer's new leader is elected (3-6 s after the SIGKILL: the
election timeout), with exactly ``HMSG <inbox> <sid> 34 34`` /
``NATS/1.0 409 Leadership Change`` and no body, sent by the server the
client is connected to (a queue group member on another server does not get
it), whether or not that server becomes the leader.  A client connected to
the killed server just loses its connection.  nats-py's ``fetch`` does not
end on it: in its first (``no_wait``) request it sends a new one, in its
waiting request it breaks out and waits out its timeout.  Un-acked messages
come back after ``ack_wait`` from the new leader.  trijet answers from the
same server when its route to the leader closes (``node.nextroute``), at once.

A pull is an ordinary message in a nats-server cluster: a client subscribed
to ``$JS.API.>`` on any server sees every pull, wherever it was published,
once.  trijet the same (``$TRIJET.SEEN`` copies), while only the consumer's
leader acts on it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, get_json, start_cluster

NEXT = "$JS.API.CONSUMER.MSG.NEXT.PK.D"
ID = "Nats-Msg-Id"  # a publish retried after a timeout is stored once
#: an answer within an election (nats-server's takes up to ~9 s) on a loaded machine
ANSWER_S = 15.0
ACK_WAIT_S = 2.0
POLLS = 200
POLL_S = 0.05
IN_FLIGHT = 3
AFTER_KILL = 2
#: a bounded look for any further delivery once every message is acked
QUIET_S = 0.5


async def _retry(fn: Any) -> Any:
    """``fn()`` until it succeeds (an election, bounded)."""
    for _ in range(POLLS):
        try:
            return await fn()
        except (nats.errors.TimeoutError, nats.js.errors.Error):  # 503, no responders
            await asyncio.sleep(POLL_S)
    return await fn()


async def _consumer_leader(js: Any) -> str:
    for _ in range(POLLS):
        try:
            ci = await js.consumer_info("PK", "D")
            if ci.cluster is not None and ci.cluster.leader:
                return str(ci.cluster.leader)
        except (nats.errors.TimeoutError, nats.js.errors.APIError):
            pass
        await asyncio.sleep(POLL_S)
    raise AssertionError("the consumer has no leader")


async def _num_waiting(js: Any, want: int) -> None:
    n = -1
    for _ in range(POLLS):
        n = (await _retry(lambda: js.consumer_info("PK", "D"))).num_waiting
        if n == want:
            return
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"num_waiting {n}, want {want}")


async def interest_everywhere(c: Cluster, subject: str, source: str | None = None) -> None:
    """Wait (bounded) until every server's routes carry ``subject``'s interest
    from every other server -- or from server ``source`` only -- (``/routez?subs=1``):
    a subscription's interest reaches the other servers some time after its
    ``PING``/``PONG``."""
    for _ in range(POLLS):
        ok = True
        for name, url in zip(c.names, c.monitoring_urls, strict=True):
            if name == source:
                continue
            routes = (get_json(f"{url}/routez?subs=1") or {}).get("routes") or []
            heard = {
                r.get("remote_name")
                for r in routes
                if subject in (r.get("subscriptions_list") or [])
            }
            want = {source} if source else set(c.names) - {name}
            ok = ok and want <= heard
        if ok:
            return
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"{subject}: interest not on every route")


async def _onlookers(c: Cluster, ncs: dict[int, Any], leader: int, follower: int) -> None:
    """A client on each server subscribed to ``$JS.API.>`` sees each pull once;
    the pulls (one from a follower, one from the leader) are answered once."""
    seen: dict[int, list[str]] = {i: [] for i in ncs}
    for i, nc in ncs.items():

        async def spy(msg: Any, i: int = i) -> None:
            if msg.subject == NEXT:
                seen[i].append(msg.subject)

        await nc.subscribe("$JS.API.>", cb=spy)
        await nc.flush()
    # what carries a pull to the onlookers: their own interest on nats-server; on
    # trijet, the copies' subject, subscribed once a server has such onlookers
    await interest_everywhere(c, "$TRIJET.SEEN.>" if c.kind == "trijet" else "$JS.API.>")
    answers: list[bytes] = []
    for src in (follower, leader):
        nc = ncs[src]
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        body = json.dumps({"batch": 1, "expires": int(ANSWER_S * 1e9)}).encode()
        await nc.publish(NEXT, body, reply=inbox)
        msg = await sub.next_msg(timeout=ANSWER_S)
        assert not (msg.headers or {}).get("Status"), msg.headers
        await msg.ack_sync()
        answers.append(bytes(msg.data))
        await sub.unsubscribe()
    assert answers == [b"m0", b"m1"]
    for _ in range(POLLS):  # the copies travel beside the answers (bounded)
        for nc in ncs.values():
            await nc.flush()
        if all(len(v) >= 2 for v in seen.values()):
            break
        await asyncio.sleep(POLL_S)
    assert {c.names[i]: n for i, n in seen.items()} == {c.names[i]: [NEXT] * 2 for i in ncs}


async def _scenario(c: Cluster) -> None:
    nc0 = await nats.connect(c.urls[0], error_cb=noop_cb)
    js0 = nc0.jetstream(timeout=10.0)
    # a cluster just formed on a loaded machine may time out the first requests
    await _retry(lambda: js0.add_stream(name="PK", subjects=["pk.>"], num_replicas=3))
    await _retry(
        lambda: js0.add_consumer(
            "PK",
            durable_name="D",
            ack_policy="explicit",
            ack_wait=ACK_WAIT_S,
            filter_subject="pk.>",
        )
    )
    total = 2 + IN_FLIGHT
    for i in range(total):
        await _retry(lambda i=i: js0.publish(f"pk.{i}", b"m%d" % i, headers={ID: f"m{i}"}))
    leader = c.index(await _consumer_leader(js0))
    await nc0.close()
    followers = [i for i in range(3) if i != leader]
    ncs = {i: await nats.connect(c.urls[i], error_cb=noop_cb) for i in range(3)}
    try:
        await _onlookers(c, ncs, leader, followers[0])

        # in flight: delivered, never acked
        js = ncs[followers[0]].jetstream(timeout=5.0)
        psub = await js.pull_subscribe_bind("D", stream="PK")
        in_flight = await psub.fetch(IN_FLIGHT, timeout=5)
        assert [m.data for m in in_flight] == [b"m%d" % i for i in range(2, total)]

        # a waiting pull sent through the other follower, then the leader's SIGKILL
        nc = ncs[followers[1]]
        inbox = nc.new_inbox()
        got: list[Any] = []
        first = asyncio.Event()

        async def on(msg: Any) -> None:
            got.append(msg)
            if (msg.headers or {}).get("Status"):
                first.set()

        await nc.subscribe(inbox, cb=on)
        body = json.dumps({"batch": 10, "expires": int(3 * ANSWER_S * 1e9)}).encode()
        await nc.publish(NEXT, body, reply=inbox)
        await _num_waiting(js, 1)
        c.kill(leader)
        await asyncio.wait_for(first.wait(), ANSWER_S)
        status = [m for m in got if (m.headers or {}).get("Status")]
        assert len(status) == 1
        assert dict(status[0].headers) == {"Status": "409", "Description": "Leadership Change"}
        assert status[0].data == b""

        # every un-acked message once to new fetches, and those published since
        for i in range(total, total + AFTER_KILL):
            await _retry(
                lambda i=i: js.publish(f"pk.{i}", b"m%d" % i, timeout=2.0, headers={ID: f"m{i}"})
            )
        want = {b"m%d" % i for i in range(2, total + AFTER_KILL)}
        fetched: list[bytes] = []
        for _ in range(POLLS):
            if set(fetched) >= want:
                break
            try:
                msgs = await psub.fetch(10, timeout=1)
            except nats.errors.TimeoutError:
                continue
            for m in msgs:
                fetched.append(bytes(m.data))
                await _retry(lambda m=m: m.ack_sync(timeout=2.0))
        await asyncio.sleep(QUIET_S)  # an observation window, not a wait for a state
        try:
            fetched += [bytes(m.data) for m in await psub.fetch(10, timeout=1)]
        except nats.errors.TimeoutError:
            pass
        assert sorted(fetched) == sorted(want), fetched
        ci = await _retry(lambda: js.consumer_info("PK", "D"))
        assert ci.num_ack_pending == 0
        assert ci.num_pending == 0
    finally:
        for n in ncs.values():
            await n.close()


@pytest.mark.parametrize("kind", ["reference", "trijet"])
def test_pull_on_a_killed_leader_hears_409_then_nothing_is_lost(kind: str, tmp_path: Path) -> None:
    with start_cluster(kind, workdir=tmp_path) as c:  # type: ignore[arg-type]
        run(lambda: _scenario(c), timeout=120)  # the loops inside are bounded
