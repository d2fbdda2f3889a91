"""The source's range reader and the sink's publisher on an R3 stream when its leader is killed.

Without Spark: a Spark task that fails is re-run from its partition, so "works through a leader
change" means a range read either completes or fails, and a re-run reads the range exactly;
and a re-published batch after the change is dropped by msg id.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from pipeline.natsio import JetStreamError, RangeReader
from pipeline.plan import ConnectOptions
from pipeline.publish import Publisher
from pipeline.wire import WireError
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, start_cluster
from tests.support.servers import KINDS, reference_binary

N = 600
REQUEST_TIMEOUT_S = 10.0


async def _read_all(conn: ConnectOptions, kill: Cluster | None) -> tuple[list[int], int]:
    """Read [1, N]; with ``kill``, kill the stream leader's node after the first chunk.

    Returns the sequences and how many attempts it took (a failed attempt is re-run whole).
    """
    for attempt in range(1, 4):
        r = RangeReader(conn, "RS", 1, N + 1, fetch_batch=50, fetch_timeout_s=2.0)
        seqs: list[int] = []
        try:
            await r.open()
            while (c := await r.next_chunk()) is not None:
                seqs += c.seq_list()
                if kill is not None and attempt == 1 and len(seqs) == 50:
                    await _kill_leader(kill)
            return seqs, attempt
        except (JetStreamError, nats.errors.Error, OSError, WireError):
            continue  # e.g. the reader's own server was the one killed
        finally:
            await r.close()
    raise AssertionError("range read failed three times")


async def _kill_leader(c: Cluster) -> None:
    """SIGKILL the stream leader's node and wait (bounded) until another node leads."""
    nc = await nats.connect(servers=c.urls, error_cb=noop_cb)
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        old = (await js.stream_info("RS")).cluster.leader
        c.kill(c.index(str(old)))
        deadline = asyncio.get_running_loop().time() + 45.0  # bounded; slow on a loaded box
        new = None
        while asyncio.get_running_loop().time() < deadline:
            try:
                new = (await js.stream_info("RS")).cluster.leader
            except (TimeoutError, nats.errors.Error):
                new = None
            if new and new != old:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"no new stream leader: {new!r}, killed {old!r}")
    finally:
        await nc.close()


@pytest.mark.parametrize("kind", KINDS)
def test_r3_read_and_sink_through_leader_loss(kind: str, tmp_path: Path) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    with start_cluster(kind, workdir=tmp_path) as c:  # type: ignore[arg-type]
        conn = ConnectOptions(servers=tuple(c.urls))

        async def body() -> None:
            nc = await nats.connect(servers=c.urls, error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
                await js.add_stream(name="RS", subjects=["rs.>"], num_replicas=3)
                pub = Publisher(nc, max_inflight=64, timeout_s=REQUEST_TIMEOUT_S)
                await pub.start()
                for i in range(N):
                    await pub.publish(f"rs.{i % 3}", b"%d" % i, {"Nats-Msg-Id": f"m{i}"})
                assert (await pub.flush()).published == N
                await pub.close()

                seqs, _ = await _read_all(conn, None)
                assert seqs == list(range(1, N + 1))
                seqs, attempts = await _read_all(conn, c)
                assert seqs == list(range(1, N + 1)), f"attempts={attempts}"
                print(f"{kind}: read through the leader's death in {attempts} attempt(s)")

                # a re-run of the whole write on the two nodes left: all duplicates
                pub = Publisher(nc, max_inflight=64, timeout_s=REQUEST_TIMEOUT_S)
                await pub.start()
                for i in range(N + 100):
                    await pub.publish(f"rs.{i % 3}", b"%d" % i, {"Nats-Msg-Id": f"m{i}"})
                res = await pub.flush()
                await pub.close()
                assert (res.published, res.duplicates) == (100, N)
                st = (await js.stream_info("RS")).state
                assert (st.messages, st.last_seq) == (N + 100, N + 100)
            finally:
                await nc.close()

        run(body, timeout=150)
