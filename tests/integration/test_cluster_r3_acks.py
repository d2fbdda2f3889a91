"""Acks then the next fetch on an R3 pull consumer, from a follower's client.

Plain acks are proposed alongside the next delivery (they change nothing it
picks); a NAK, TERM or in-progress is applied before it.  So: after a NAK the
very next fetch gets the message again (``num_delivered`` 2), after plain
acks the next fetch never gets an acked message, and once an AckSync is
answered the ack floor has passed every ack sent before it.  ``TRIJET_REFERENCE=1`` runs it on nats-server too.
"""

from __future__ import annotations

from typing import Any

import nats

from tests.integration.test_cluster_r3_push import (
    REQUEST_TIMEOUT_S,
    LeaderMoves,
    cluster,  # noqa: F401  (fixture)
)
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster

ROUNDS = 10
BATCH = 10


def test_nak_then_fetch_and_plain_acks_then_fetch(cluster: Cluster) -> None:  # noqa: F811
    moves = LeaderMoves(cluster, "PA", ["pa.>"])

    async def body() -> dict[str, Any]:
        nc0 = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        _, home, _ = await moves.setup(nc0)
        await nc0.close()
        nc = await nats.connect(cluster.urls[cluster.index(home)], error_cb=noop_cb)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        for i in range(ROUNDS * BATCH + 1):
            await js.publish("pa.a", b"%d" % i)
        psub = await js.pull_subscribe("pa.>", durable="D", stream="PA")
        seen: list[int] = []
        for _ in range(ROUNDS):  # plain acks (no reply) then at once the next fetch
            msgs = await psub.fetch(BATCH, timeout=5.0)
            for m in msgs:
                seen.append(m.metadata.sequence.stream)
                await m.ack()
        msgs = await psub.fetch(1, timeout=5.0)
        last = msgs[0]
        await last.nak()
        again = await psub.fetch(1, timeout=5.0)
        out = {
            "seen": seen,
            "last": last.metadata.sequence.stream,
            "again": again[0].metadata.sequence.stream,
            "again_delivered": again[0].metadata.num_delivered,
        }
        await again[0].ack_sync()
        info = await js.consumer_info("PA", "D")
        out["final"] = (info.ack_floor.stream_seq, info.num_ack_pending, info.num_redelivered)
        await nc.close()
        return out

    out = run(body, timeout=120)
    n = ROUNDS * BATCH
    assert out["seen"] == list(range(1, n + 1))
    assert out["last"] == out["again"] == n + 1
    assert out["again_delivered"] == 2
    assert out["final"] == (n + 1, 0, 0)
