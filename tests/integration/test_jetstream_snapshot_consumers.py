"""Consumers in stream snapshots: SNAPSHOT carries every consumer of the
stream (config and state) unless asked ``no_consumers``; RESTORE recreates
them, and they go on where they were.  nats-py drives trijet end to end, and
the same scenario runs against the reference nats-server to compare what
CONSUMER.INFO shows after the restore and what the consumers deliver then.

Observed on nats-server 2.15.1 (and checked here): durable, named and
ephemeral consumers are all archived; a restored consumer's ``created`` is
the restore's time; its delivered/ack floor sequences, pending acks and
redelivery counts are kept; it goes on from its delivered sequence (a
``deliver_policy: new`` consumer that never delivered starts at 1); a pending
message is redelivered once its ack wait, counted from its delivery, has
passed -- at once for a message already redelivered before the snapshot
(the archive keeps its first delivery's time).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import nats

from cluster.stream_archive import ArchivedConsumer, ArchiveDecoder
from tests.integration.test_jetstream_snapshot import (
    API,
    _api,
    _reference,
    _trijet,
    needs_reference,
    restore,
    take_snapshot,
)
from tests.support.aio import noop_cb, run, with_client

CAPI = "$JS.API.CONSUMER."
SECOND_NS = 1_000_000_000


async def _create(nc: Any, stream: str, cfg: dict[str, Any]) -> str:
    """Create a consumer; returns its name (generated for an ephemeral)."""
    name = cfg.get("durable_name") or cfg.get("name")
    subject = f"{CAPI}CREATE.{stream}" + (f".{name}" if name else "")
    resp = await _api(nc, subject, {"stream_name": stream, "config": cfg})
    assert "error" not in resp, resp
    return str(resp["name"])


async def _info(nc: Any, stream: str, name: str) -> dict[str, Any]:
    resp = await _api(nc, f"{CAPI}INFO.{stream}.{name}", b"")
    assert "error" not in resp, resp
    return dict(resp)


def _view(info: dict[str, Any]) -> dict[str, Any]:
    """The ConsumerInfo fields a restore keeps (not times, not server metadata)."""
    out = {k: info[k] for k in ("num_pending", "num_ack_pending", "num_redelivered")}
    for k in ("delivered", "ack_floor"):
        out[k] = {f: v for f, v in info[k].items() if f != "last_active"}
    cfg = dict(info["config"])
    cfg.pop("metadata", None)
    out["config"] = cfg
    return out


def _consumers(data: bytes) -> dict[str, ArchivedConsumer]:
    dec = ArchiveDecoder()
    dec.feed(data)
    return {c.name: c for c in dec.finish().consumers}


def _seen(msgs: list[Any]) -> list[tuple[int, int, int]]:
    return [
        (m.metadata.sequence.stream, m.metadata.sequence.consumer, m.metadata.num_delivered)
        for m in msgs
    ]


async def _fetch_until(sub: Any, n: int, within_s: float) -> list[Any]:
    """Fetch until ``n`` messages came or ``within_s`` passed."""
    got: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while len(got) < n and loop.time() < deadline:
        try:
            got += await sub.fetch(n - len(got), timeout=min(1.0, deadline - loop.time()))
        except nats.errors.TimeoutError:
            continue
    return got


# --------------------------------------------------------------------------- end to end


def test_consumers_travel_in_snapshots_and_go_on_after_restore(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = _trijet(tmp_path, "e2e", store)
    saved: dict[str, Any] = {}

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(5):
            await js.publish(f"s.{i % 2}", b"m%d" % i)
        await _create(
            nc, "S", {"durable_name": "D", "ack_policy": "explicit", "ack_wait": SECOND_NS}
        )
        await _create(nc, "S", {"durable_name": "L", "ack_policy": "explicit"})
        eph = await _create(
            nc, "S", {"ack_policy": "explicit", "inactive_threshold": 300 * SECOND_NS}
        )
        await _create(nc, "S", {"durable_name": "P", "deliver_subject": "push.p"})
        d = await js.pull_subscribe_bind("D", "S")
        first = await d.fetch(5, timeout=2)
        for m in (first[0], first[1], first[3]):
            await m.ack_sync()
        again = await _fetch_until(d, 2, 10)  # 3 and 5 once their ack wait ran out
        assert [(s, dc) for s, _, dc in _seen(again)] == [(3, 2), (5, 2)]
        for i in range(5, 10):
            await js.publish(f"s.{i % 2}", b"m%d" % i)
        lsub = await js.pull_subscribe_bind("L", "S")
        wall_before = time.time_ns()
        taken = await lsub.fetch(2, timeout=2)
        wall_after = time.time_ns()
        await taken[0].ack_sync()
        names = ["D", "L", eph, "P"]
        before = {n: await _info(nc, "S", n) for n in names}

        snap = await take_snapshot(nc, "S")
        bare = await take_snapshot(nc, "S", no_consumers=True)
        # the answer counts the live stream's consumers either way
        assert snap.response["state"]["consumer_count"] == 4
        assert bare.response["state"]["consumer_count"] == 4
        archived = _consumers(snap.data)
        assert set(archived) == set(names) and _consumers(bare.data) == {}
        # L's pending message keeps its delivery time; D's redelivered
        # ones are archived as already due (nats-server keeps their
        # first delivery's time)
        lstate, dstate = archived["L"].state, archived["D"].state
        assert list(lstate.pending) == [2]
        assert wall_before <= lstate.pending[2].ts_ns <= wall_after
        assert sorted(dstate.pending) == [3, 5] and dstate.redelivered == {3: 1, 5: 1}
        assert all(p.ts_ns + SECOND_NS <= wall_after for p in dstate.pending.values())

        # without its consumers
        assert (await _api(nc, API + "DELETE.S", b""))["success"]
        final = await restore(nc, "S", bare.meta, bare.data)
        assert final["state"]["consumer_count"] == 0
        assert (await _api(nc, CAPI + "NAMES.S", b""))["consumers"] in (None, [])

        # with them
        assert (await _api(nc, API + "DELETE.S", b""))["success"]
        final = await restore(nc, "S", snap.meta, snap.data)
        assert final["state"]["consumer_count"] == 4
        after = {n: await _info(nc, "S", n) for n in names}
        for n in names:
            expected = _view(before[n])
            if n == eph:  # the restored config names the ephemeral, as nats-server's
                expected["config"]["name"] = eph
            assert _view(after[n]) == expected, n
            assert after[n]["created"] != before[n]["created"]
        assert after["D"]["delivered"] == {"consumer_seq": 7, "stream_seq": 5}
        assert (after["D"]["num_ack_pending"], after["D"]["num_redelivered"]) == (2, 2)

        # D: 3 and 5 at once, then 6..10
        d = await js.pull_subscribe_bind("D", "S")
        got = await _fetch_until(d, 7, 10)
        assert _seen(got) == [(3, 8, 3), (5, 9, 3)] + [(s, s + 4, 1) for s in range(6, 11)]
        for m in got:
            await m.ack_sync()
        # L: its pending 2 is not due for 30 s; it goes on with 3
        lsub = await js.pull_subscribe_bind("L", "S")
        assert _seen(await lsub.fetch(2, timeout=2)) == [(3, 3, 1), (4, 4, 1)]
        # the push consumer starts delivering once someone listens
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        psub = await nc.subscribe("push.p", cb=inbox.put)
        pushed = [await asyncio.wait_for(inbox.get(), 5) for _ in range(10)]
        assert [m.metadata.sequence.stream for m in pushed] == list(range(1, 11))
        await psub.unsubscribe()
        saved["D"] = _view(await _info(nc, "S", "D"))
        saved["L"] = _view(await _info(nc, "S", "L"))
        assert saved["D"]["ack_floor"] == {"consumer_seq": 14, "stream_seq": 10}

    with_client(server, main)
    restarted = _trijet(tmp_path, "e2e-again", store)

    async def after_restart(nc: Any) -> None:
        for n in ("D", "L"):
            assert _view(await _info(nc, "S", n)) == saved[n], n

    with_client(restarted, after_restart)


def test_memory_stream_consumers_round_trip(tmp_path: Path) -> None:
    server = _trijet(tmp_path, "mem")

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="M", subjects=["m"], storage="memory")
        await _create(nc, "M", {"durable_name": "NEW", "deliver_policy": "new"})
        for i in range(6):
            await js.publish("m", b"%d" % i)
        await _create(nc, "M", {"durable_name": "C", "ack_policy": "explicit"})
        c = await js.pull_subscribe_bind("C", "M")
        for m in await c.fetch(3, timeout=2):
            await m.ack_sync()
        before = {n: _view(await _info(nc, "M", n)) for n in ("NEW", "C")}
        snap = await take_snapshot(nc, "M")
        assert (await _api(nc, API + "DELETE.M", b""))["success"]
        final = await restore(nc, "M", snap.meta, snap.data)
        assert final["state"]["consumer_count"] == 2
        assert {n: _view(await _info(nc, "M", n)) for n in ("NEW", "C")} == before
        c = await js.pull_subscribe_bind("C", "M")
        assert _seen(await c.fetch(3, timeout=2)) == [(4, 4, 1), (5, 5, 1), (6, 6, 1)]
        # created before any message: nothing delivered yet, it starts at 1
        new = await js.pull_subscribe_bind("NEW", "M")
        assert [s for s, _, _ in _seen(await _fetch_until(new, 6, 5))] == [1, 2, 3, 4, 5, 6]

    with_client(server, main)


def test_bad_archives_with_consumers_create_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = _trijet(tmp_path, "bad", store)

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="B", subjects=["b"])
        for i in range(200):
            await js.publish("b", b"%03d" % i * 120)  # two frames of archive
        await _create(nc, "B", {"durable_name": "C1", "ack_policy": "explicit"})
        await _create(nc, "B", {"durable_name": "C2", "ack_policy": "all"})
        c1 = await js.pull_subscribe_bind("C1", "B")
        await c1.fetch(4, timeout=2)
        before = _view(await _info(nc, "B", "C1"))
        snap = await take_snapshot(nc, "B")
        assert set(_consumers(snap.data)) == {"C1", "C2"}
        assert (await _api(nc, API + "DELETE.B", b""))["success"]
        data = snap.data
        boundary = 10 + 4 + 65536  # stream identifier, first frame (see stream_archive)
        assert data[boundary] == 0x80 and data.index(b'"durable_name":"C1"') > boundary
        flipped = bytearray(data)
        flipped[data.index(b'"durable_name":"C1"') + 5] ^= 0x01  # the consumer's config
        cases = {
            data[:boundary]: "restore failed: unexpected EOF",
            data[:-50]: "restore failed: s2: corrupt input",
            bytes(flipped): "restore failed: archive checksum mismatch",
        }
        for bad, description in cases.items():
            final = await restore(nc, "B", snap.meta, bad)
            assert final["error"]["description"] == description
            assert (await _api(nc, API + "NAMES", b""))["streams"] is None
            assert not list(store.glob("**/streams/B"))
        final = await restore(nc, "B", snap.meta, data)
        assert final["state"]["consumer_count"] == 2
        assert _view(await _info(nc, "B", "C1")) == before

    with_client(server, main)


# --------------------------------------------------------------------------- differential


async def _scenario(url: str) -> dict[str, Any]:
    """Consumers in several states, a snapshot, a restore; what INFO shows
    and what each consumer delivers afterwards."""
    nc = await nats.connect(url, error_cb=noop_cb)
    js = nc.jetstream()
    seen: dict[str, Any] = {}
    try:
        await js.add_stream(name="S", subjects=["s.>"])
        await _create(nc, "S", {"durable_name": "NEW", "deliver_policy": "new"})
        for i in range(10):
            await js.publish(f"s.{i % 2}", b"m%d" % i)
        # max_ack_pending 2: its next fetch waits for the redeliveries
        await _create(
            nc,
            "S",
            {
                "durable_name": "A",
                "ack_policy": "explicit",
                "ack_wait": SECOND_NS,
                "max_ack_pending": 2,
            },
        )
        await _create(
            nc, "S", {"durable_name": "B", "ack_policy": "explicit", "ack_wait": 4 * SECOND_NS}
        )
        await _create(nc, "S", {"durable_name": "D", "ack_policy": "explicit"})
        await _create(
            nc,
            "S",
            {
                "durable_name": "F",
                "deliver_policy": "by_start_sequence",
                "opt_start_seq": 4,
                "filter_subject": "s.1",
            },
        )
        await _create(nc, "S", {"name": "N", "ack_policy": "none", "deliver_policy": "new"})
        await _create(nc, "S", {"durable_name": "P", "ack_policy": "all", "deliver_subject": "p"})
        eph = await _create(nc, "S", {"inactive_threshold": 300 * SECOND_NS})
        b = await js.pull_subscribe_bind("B", "S")
        seen["b first"] = _seen(await b.fetch(1, timeout=2))
        a = await js.pull_subscribe_bind("A", "S")
        seen["a first"] = _seen(await a.fetch(2, timeout=2))
        # after 1 s both are redelivered; nats-server picks expired messages in
        # no fixed order, so compare (stream seq, count) pairs and the consumer seqs
        # (one long-waiting request: short ones retried could leave a request
        # behind that takes a later redelivery on one server and not the other)
        again = _seen(await a.fetch(2, timeout=5))
        seen["a again"] = [sorted((s, dc) for s, _, dc in again), sorted(c for _, c, _ in again)]
        d = await js.pull_subscribe_bind("D", "S")
        dm = await d.fetch(4, timeout=2)
        await dm[1].ack_sync()
        await dm[2].ack_sync()
        e = await js.pull_subscribe_bind(eph, "S")
        await e.fetch(3, timeout=2)
        names = {"A": "A", "B": "B", "D": "D", "F": "F", "N": "N", "NEW": "NEW", "P": "P", "E": eph}
        before = {k: await _info(nc, "S", n) for k, n in names.items()}

        snap = await take_snapshot(nc, "S")
        bare = await take_snapshot(nc, "S", no_consumers=True)
        seen["snapshot counts"] = [
            snap.response["state"]["consumer_count"],
            bare.response["state"]["consumer_count"],
        ]
        assert (await _api(nc, API + "DELETE.S", b""))["success"]
        final = await restore(nc, "S", snap.meta, snap.data)
        assert "error" not in final, final
        seen["restore count"] = final["state"]["consumer_count"]
        listed = await _api(nc, CAPI + "NAMES.S", b"")
        seen["names"] = sorted("<eph>" if n == eph else n for n in listed["consumers"])
        for k, n in names.items():
            info = await _info(nc, "S", n)
            view = _view(info)
            if k == "E":
                assert view["config"].pop("name") == eph
            seen[f"info {k}"] = view
            seen[f"created {k} renewed"] = info["created"] != before[k]["created"]

        # what each pull consumer delivers now (B's pending 1 is not due yet)
        for k in ("A", "B", "D", "F", "N", "NEW", "E"):
            sub = await js.pull_subscribe_bind(names[k], "S")
            try:
                got = await sub.fetch(20, timeout=1)
            except nats.errors.TimeoutError:
                got = []
            if k == "B":
                # its pending 1 comes back once 4 s from its delivery passed: in this
                # fetch when the steps since took longer than that (a loaded machine),
                # else in the next
                again = [m for m in got if m.metadata.num_delivered > 1]
                got = [m for m in got if m.metadata.num_delivered == 1]
                if not again:
                    again = await sub.fetch(1, timeout=8)
                # (consumer seqs then depend on the order: stream seqs and counts only)
                seen["B redelivered"] = [(s, n) for s, _, n in _seen(again)]
                seen["after B"] = [s for s, _, _ in _seen(got)]
                continue
            seen[f"after {k}"] = _seen(got)
        assert (await _api(nc, API + "DELETE.S", b""))["success"]
        final = await restore(nc, "S", bare.meta, bare.data)
        assert "error" not in final, final
        seen["bare restore count"] = final["state"]["consumer_count"]
    finally:
        await nc.close()
    return seen


@needs_reference
def test_consumers_after_restore_match_the_reference(tmp_path: Path) -> None:
    servers = {"trijet": _trijet(tmp_path, "tj"), "reference": _reference(tmp_path)}
    try:
        got = {kind: run(lambda s=s: _scenario(s.url)) for kind, s in servers.items()}
    finally:
        for s in servers.values():
            s.stop()
    ours, theirs = got["trijet"], got["reference"]
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key] == theirs[key], f"{key}: {json.dumps(ours[key])} != {theirs[key]}"
    assert ours["snapshot counts"] == [8, 8] and ours["restore count"] == 8
    assert ours["B redelivered"] == [(1, 2)]
