"""Stream SNAPSHOT and RESTORE end to end, with nats-py driving the protocol the
way the ``nats`` CLI (jsm.go) does: request a snapshot, subscribe to the
deliver subject after the answer, ack every chunk that has a reply subject,
stop at the empty message; restore by sending ``{config, state}``, then the
archive in 64 KiB requests, then an empty request for the final answer.

Where the reference nats-server's behaviour is observable and deterministic
(error answers, the chunk protocol, garbage archives) the same scenario runs
against it and trijet and the answers are compared.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cbor2
import nats
import pytest

from cluster.stream_archive import ArchiveDecoder
from store.snapshot import iter_snapshot, read_header
from tests.support import reference_binary, start_server
from tests.support.aio import noop_cb, run, with_client

API = "$JS.API.STREAM."
UPLOAD_CHUNK = 64 * 1024
ACK_RE = re.compile(
    r"^\$JS\.SNAPSHOT\.ACK\.(?P<stream>[^.]+)\.(?P<id>[^.]+)\.(?P<len>\d+)\.(?P<n>\d+)$"
)

needs_reference = pytest.mark.skipif(reference_binary() is None, reason="no reference nats-server")


def _trijet(tmp_path: Path, name: str, store: Path | None = None) -> Any:
    store = store or tmp_path / f"{name}-store"
    return start_server("trijet", ["-js", "-sd", str(store)], workdir=tmp_path / name)


def _reference(tmp_path: Path) -> Any:
    store = tmp_path / "ref-store"
    return start_server("reference", ["-js", "-sd", str(store)], workdir=tmp_path / "ref")


# --------------------------------------------------------------------------- client side


@dataclass
class Snapshot:
    """What a client received for one snapshot."""

    response: dict[str, Any]
    chunks: list[Any] = field(default_factory=list)
    end_headers: dict[str, str] | None = None

    @property
    def data(self) -> bytes:
        return b"".join(m.data for m in self.chunks)

    @property
    def meta(self) -> dict[str, Any]:
        """``backup.json`` as jsm.go writes it: the answer's config and state."""
        return {"config": self.response["config"], "state": self.response["state"]}


async def _api(nc: Any, subject: str, body: bytes | dict[str, Any]) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    msg = await nc.request(subject, raw, timeout=5)
    return json.loads(msg.data)


async def take_snapshot(
    nc: Any, stream: str, *, ack: bool = True, end_within_s: float = 20, **opts: Any
) -> Snapshot:
    inbox = nc.new_inbox()
    response = await _api(nc, API + "SNAPSHOT." + stream, {"deliver_subject": inbox, **opts})
    snap = Snapshot(response)
    if "error" in response:
        return snap
    ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_chunk(m: Any) -> None:
        if not m.data:
            if not ended.done():
                ended.set_result(m.headers)
            return
        snap.chunks.append(m)
        if ack and m.reply:
            await nc.publish(m.reply, b"")

    sub = await nc.subscribe(inbox, cb=on_chunk)  # after the answer, as jsm.go does
    try:
        snap.end_headers = await asyncio.wait_for(ended, end_within_s)
    finally:
        await sub.unsubscribe()
    return snap


async def restore(
    nc: Any, stream: str, meta: dict[str, Any] | bytes, data: bytes, chunk: int = UPLOAD_CHUNK
) -> dict[str, Any]:
    response = await _api(nc, API + "RESTORE." + stream, meta)
    if "error" in response:
        return response
    target = response["deliver_subject"]
    for i in range(0, len(data), chunk):
        reply = await nc.request(target, data[i : i + chunk], timeout=5)
        if reply.data:  # an error ends the upload
            return json.loads(reply.data)
    final = await nc.request(target, b"", timeout=30)
    return json.loads(final.data)


def archive_messages(data: bytes) -> list[tuple[int, str, bytes, bytes, int]]:
    """Every message an archive carries: ``(seq, subject, headers, payload, ts)``."""
    dec = ArchiveDecoder()
    dec.feed(data)
    doc = cbor2.loads(dec.finish().document)
    src = io.BytesIO(doc["store"])
    return [
        (m.seq, m.subject, m.headers, m.payload, m.ts_ns)
        for m in iter_snapshot(src, read_header(src))
    ]


def _archive_body(data: bytes) -> tuple[Any, ...]:
    """An archive's config, document and consumers (not its creation time)."""
    dec = ArchiveDecoder()
    dec.feed(data)
    a = dec.finish()
    return (a.config, a.document, a.consumers)


def _hdrs(i: int) -> dict[str, str]:
    return {"Nats-Msg-Id": f"id-{i}", "X-Order": str(i)}


async def _fill(js: Any, n: int) -> None:
    for i in range(n):
        await js.publish(f"ord.{'abc'[i % 3]}", b"payload-%d" % i, headers=_hdrs(i))


# --------------------------------------------------------------------------- round trips


def _stored(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as stored: snapshot and restore answers show the stored
    metadata; INFO adds the dynamic ``_nats.ver``/``_nats.level`` keys (as
    nats-server does)."""
    out = json.loads(json.dumps(config))
    for k in ("_nats.ver", "_nats.level"):
        out.get("metadata", {}).pop(k, None)
    return out


def test_file_stream_round_trip_onto_another_server_and_a_restart(tmp_path: Path) -> None:
    first = _trijet(tmp_path, "one")
    second_store = tmp_path / "two-store"
    second = _trijet(tmp_path, "two", second_store)
    saved: dict[str, Any] = {}

    async def backup() -> None:
        nc = await nats.connect(first.url, error_cb=noop_cb)
        js = nc.jetstream()
        try:
            await js.add_stream(name="ORD", subjects=["ord.>"], duplicate_window=600)
            await _fill(js, 30)
            purged = await _api(nc, API + "PURGE.ORD", {"filter": "ord.b"})
            assert purged["purged"] == 10  # interior deletes: every third sequence
            info = await _api(nc, API + "INFO.ORD", b"")
            # publishing goes on while the snapshot is taken and delivered
            publisher = asyncio.create_task(_fill(js, 5))
            snap = await take_snapshot(nc, "ORD", chunk_size=1024, window_size=4096)
            await publisher
            assert snap.end_headers == {"Status": "204"}
            acks = [ACK_RE.match(m.reply) for m in snap.chunks[:-1]]
            assert all(a and a["stream"] == "ORD" for a in acks)
            assert [int(a["n"]) for a in acks if a] == list(range(1, len(acks) + 1))
            assert all(len(m.data) == 1024 for m in snap.chunks[:-1])
            assert not snap.chunks[-1].reply and len(snap.chunks[-1].data) < 1024
            state = snap.response["state"]
            assert snap.response["config"] == _stored(info["config"])
            assert state["num_deleted"] == 10 and state["messages"] >= 20
            saved.update(snap=snap, info=info)
            assert (await _api(nc, API + "DELETE.ORD", b""))["success"]
        finally:
            await nc.close()

    async def restore_elsewhere() -> None:
        nc = await nats.connect(second.url, error_cb=noop_cb)
        js = nc.jetstream()
        snap, info = saved["snap"], saved["info"]
        try:
            final = await restore(nc, "ORD", snap.meta, snap.data)
            assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response"
            assert "cluster" not in final and "did_create" not in final
            assert final["config"] == _stored(info["config"])
            # created: the restore's time, as nats-server shows it
            assert final["created"] != info["created"]
            saved["restored created"] = final["created"]
            assert final["state"] == snap.response["state"]
            again = await take_snapshot(nc, "ORD")
            # same config, messages and dedupe table: the same archive but its creation time
            assert _archive_body(again.data) == _archive_body(snap.data)
            messages = archive_messages(snap.data)
            assert [m[0] for m in messages][:20] == [s for s in range(1, 31) if s % 3 != 2]
            for seq, subject, headers, payload, ts in messages[:20]:
                i = seq - 1
                assert subject == f"ord.{'abc'[i % 3]}" and payload == b"payload-%d" % i
                assert b"X-Order: %d\r\n" % i in headers and ts > 0
            # the dedupe table came along: an old id is still a duplicate
            ack = await js.publish("ord.a", b"again", headers={"Nats-Msg-Id": "id-0"})
            assert (ack.seq, ack.duplicate) == (1, True)
        finally:
            await nc.close()

    try:
        run(backup)
        first.stop()
        run(restore_elsewhere)
    finally:
        first.stop()
        second.stop()
    restarted = _trijet(tmp_path, "two-again", second_store)

    async def after_restart(nc: Any) -> None:
        info = await _api(nc, API + "INFO.ORD", b"")
        assert info["state"] == saved["snap"].response["state"]
        assert info["created"] == saved["restored created"]
        again = await take_snapshot(nc, "ORD")
        assert archive_messages(again.data) == archive_messages(saved["snap"].data)

    with_client(restarted, after_restart)


def test_memory_stream_round_trip_and_a_changed_config(tmp_path: Path) -> None:
    server = _trijet(tmp_path, "mem")

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="MEM", subjects=["mem.*"], storage="memory")
        for i in range(12):
            await js.publish(f"mem.{i % 2}", b"v%d" % i, headers={"Nats-Msg-Id": f"m{i}"})
        info = await _api(nc, API + "INFO.MEM", b"")
        snap = await take_snapshot(nc, "MEM")
        assert len(snap.chunks) == 1 and snap.end_headers is None  # one short chunk
        assert (await _api(nc, API + "DELETE.MEM", b""))["success"]
        final = await restore(nc, "MEM", snap.meta, snap.data, chunk=100)
        assert final["state"] == info["state"] and final["config"]["storage"] == "memory"
        assert _archive_body((await take_snapshot(nc, "MEM")).data) == _archive_body(snap.data)
        # the request's config is the restored stream's identity: limits apply
        assert (await _api(nc, API + "DELETE.MEM", b""))["success"]
        meta = {**snap.meta, "config": {**snap.meta["config"], "max_msgs": 5}}
        final = await restore(nc, "MEM", meta, snap.data)
        st = final["state"]
        assert (final["config"]["max_msgs"], st["messages"], st["first_seq"]) == (5, 5, 8)
        ack = await js.publish("mem.1", b"x", headers={"Nats-Msg-Id": "m11"})
        assert (ack.seq, ack.duplicate) == (12, True)

    with_client(server, main)


# --------------------------------------------------------------------------- refusals


def test_bad_archives_create_nothing(tmp_path: Path) -> None:
    server = _trijet(tmp_path, "bad")

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="B", subjects=["b.>"])
        for i in range(200):
            await js.publish("b.x", b"%03d" % i * 120)  # two frames of archive
        snap = await take_snapshot(nc, "B")
        assert (await _api(nc, API + "DELETE.B", b""))["success"]
        data = snap.data
        boundary = 10 + 4 + 65536  # stream identifier, first frame (see stream_archive)
        assert data[boundary] == 0x80
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x01
        cases = {
            b"garbage garbage garbage": "restore failed: s2: corrupt input",
            data[: len(data) // 2 + 1]: "restore failed: s2: corrupt input",
            data[:boundary]: "restore failed: unexpected EOF",
            bytes(flipped): "restore failed: archive checksum mismatch",
        }
        for bad, description in cases.items():
            final = await restore(nc, "B", snap.meta, bad)
            assert final == {
                "type": "io.nats.jetstream.api.v1.stream_create_response",
                "error": {"code": 500, "err_code": 10062, "description": description},
            }
            names = await _api(nc, API.replace("STREAM.", "STREAM.NAMES"), b"")
            assert names["streams"] is None
        # the name is still free, and a sound archive restores
        final = await restore(nc, "B", snap.meta, data)
        assert final["state"] == snap.response["state"]
        # an archive of another stream
        await js.add_stream(name="C", subjects=["c.>"])
        other = await take_snapshot(nc, "C")
        assert (await _api(nc, API + "DELETE.C", b""))["success"]
        final = await restore(nc, "C", other.meta, data)
        assert final["error"]["description"] == "restore failed: stream names do not match"
        # the name was taken while the upload ran
        resp = await _api(nc, API + "RESTORE.C", other.meta)
        await js.add_stream(name="C", subjects=["c.>"])
        await nc.request(resp["deliver_subject"], other.data, timeout=5)
        final = json.loads((await nc.request(resp["deliver_subject"], b"", timeout=5)).data)
        assert final["error"]["err_code"] == 10130

    with_client(server, main)


def _restore_request_cases(valid_meta: dict[str, Any]) -> list[tuple[str, bytes]]:
    cfg = valid_meta["config"]
    return [
        ("RESTORE.R", b""),
        ("RESTORE.R", b"{}"),
        ("RESTORE.R", b" { } "),
        ("RESTORE.R", b"{x"),
        ("RESTORE.R", b"[]"),
        ("RESTORE.R", json.dumps({"config": cfg, "zzz": 1}).encode()),
        ("RESTORE.R", json.dumps({"config": {"name": "R", "max_msgs": "x"}}).encode()),
        ("RESTORE.R", json.dumps({"config": {"name": "R"}, "state": {"messages": "x"}}).encode()),
        ("RESTORE.R", json.dumps({"config": {"name": "R"}, "state": {"deleted": [-1]}}).encode()),
        ("RESTORE.R", json.dumps({"config": {"name": "R", "pedantic": True}}).encode()),
        ("RESTORE.R", json.dumps({"config": 5}).encode()),
        ("RESTORE.OTHER", json.dumps({"config": {"name": "R"}}).encode()),
        ("RESTORE.R", json.dumps({"config": {"name": "R", "max_age": 5}}).encode()),
        ("RESTORE.S", json.dumps({"config": {"name": "S"}}).encode()),  # exists
    ]


SNAPSHOT_REQUEST_CASES = [
    ("SNAPSHOT.S", b""),
    ("SNAPSHOT.S", b"{}"),
    ("SNAPSHOT.NOPE", b""),
    ("SNAPSHOT.NOPE", b'{"deliver_subject":"x"}'),
    ("SNAPSHOT.S", b"{bad"),
    ("SNAPSHOT.S", b'{"no_consumers":true}'),
    ("SNAPSHOT.S", b"null"),
    ("SNAPSHOT.S", b'{"deliver_subject":"a.*"}'),
    ("SNAPSHOT.S", b'{"deliver_subject":"a b"}'),
    ("SNAPSHOT.S", b'{"deliver_subject":1}'),
    ("SNAPSHOT.S", b'{"deliver_subject":"q","chunk_size":"1"}'),
    ("SNAPSHOT.S", b'{"deliver_subject":"q","bogus":1}'),
    ("SNAPSHOT.S", b"[]"),
]


def _normalise(resp: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(resp))
    if "config" in out:
        out["config"].pop("metadata", None)
    for state in [out.get("state")]:
        if state:
            state.pop("first_ts", None)
            state.pop("last_ts", None)
    if out.get("deliver_subject"):
        out["deliver_subject"] = re.sub(r"\.[^.]+$", ".<id>", out["deliver_subject"])
    return out


@needs_reference
def test_requests_errors_and_chunk_protocol_match_the_reference(tmp_path: Path) -> None:
    servers = {"trijet": _trijet(tmp_path, "tj"), "reference": _reference(tmp_path)}

    async def scenario(url: str) -> dict[str, Any]:
        nc = await nats.connect(url, error_cb=noop_cb)
        js = nc.jetstream()
        seen: dict[str, Any] = {}
        try:
            await js.add_stream(name="S", subjects=["s.>"])
            for i in range(3):
                await js.publish("s.a", b"small-%d" % i, headers={"Nats-Msg-Id": f"i{i}"})
            small = await take_snapshot(nc, "S")
            seen["small"] = (
                _normalise(small.response),
                [bool(m.reply) for m in small.chunks],
                small.end_headers,
            )
            rng = random.Random(4)  # incompressible, so the reference's S2 archive is big too
            for _ in range(40):
                await js.publish("s.b", rng.randbytes(2048))
            big = await take_snapshot(nc, "S", chunk_size=2048, window_size=4096)
            replies = [ACK_RE.match(m.reply) if m.reply else None for m in big.chunks]
            seen["big"] = (
                _normalise(big.response),
                all(r and r["len"] == "2048" for r in replies[:-1]),
                [int(r["n"]) for r in replies if r] == list(range(1, len(replies))),
                replies[-1] is None and 0 < len(big.chunks[-1].data) <= 2048,
                big.end_headers,
            )
            for i, (subject, body) in enumerate(SNAPSHOT_REQUEST_CASES):
                seen[f"{subject} #{i}"] = await _api(nc, API + subject, body)
            for i, (subject, body) in enumerate(_restore_request_cases(small.meta)):
                seen[f"{subject} #{i}"] = await _api(nc, API + subject, body)
            ok = await _api(nc, API + "RESTORE.R", {"config": {"name": "R", "subjects": ["r"]}})
            seen["restore ok"] = _normalise(ok)
            await nc.request(ok["deliver_subject"], b"garbage garbage", timeout=5)
            final = await nc.request(ok["deliver_subject"], b"", timeout=5)
            seen["garbage final"] = json.loads(final.data)
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request(ok["deliver_subject"], b"more", timeout=5)
            names = await _api(nc, API + "NAMES", b"")
            seen["names"] = names["streams"]
        finally:
            await nc.close()
        return seen

    try:
        got = {kind: run(lambda s=s: scenario(s.url)) for kind, s in servers.items()}
    finally:
        for s in servers.values():
            s.stop()
    ours, theirs = got["trijet"], got["reference"]
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key] == theirs[key], key


# --------------------------------------------------------------------------- flow control


def test_small_window_flow_control_no_flow_response_and_a_stalled_restore(tmp_path: Path) -> None:
    server = _trijet(tmp_path, "flow")

    async def windowed(nc: Any) -> None:
        inbox = nc.new_inbox()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def on_chunk(m: Any) -> None:
            await queue.put(m)

        sub = await nc.subscribe(inbox, cb=on_chunk)
        body = {"deliver_subject": inbox, "chunk_size": 1024, "window_size": 2048}
        resp = await _api(nc, API + "SNAPSHOT.F", body)
        assert resp["state"]["messages"] == 20
        first = [await asyncio.wait_for(queue.get(), 5) for _ in range(2)]
        # the window is full: nothing more until an ack
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(queue.get(), 0.5)
        for expected in (3, 4):
            await nc.publish(first[0].reply if expected == 3 else first[1].reply, b"")
            m = await asyncio.wait_for(queue.get(), 5)
            assert ACK_RE.match(m.reply)["n"] == str(expected)  # type: ignore[index]
        # stop acking: after five quiet seconds the transfer ends
        end = None
        while end is None:
            m = await asyncio.wait_for(queue.get(), 10)
            if not m.data:
                end = m
        assert end.headers == {"Status": "408", "Description": "No Flow Response"}
        await sub.unsubscribe()

    async def stalled(nc: Any) -> None:
        resp = await _api(nc, API + "RESTORE.STALL", {"config": {"name": "STALL"}})
        target = resp["deliver_subject"]
        assert (await nc.request(target, b"\xff\x06\x00\x00sNaPpY", timeout=5)).data == b""
        # let the restore's 5 s idle limit pass: a deadline inside the server,
        # with nothing a client could wait on (any chunk would reset it)
        await asyncio.sleep(6)
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request(target, b"", timeout=5)
        assert "error" in await _api(nc, API + "INFO.STALL", b"")

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="F", subjects=["f"])
        for i in range(20):
            await js.publish("f", bytes([i]) * 300)
        await asyncio.gather(windowed(nc), stalled(nc))
        # a chunk without a reply subject ends a restore at once
        resp = await _api(nc, API + "RESTORE.NOREPLY", {"config": {"name": "NOREPLY"}})
        await nc.publish(resp["deliver_subject"], b"chunk")
        await nc.flush()
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request(resp["deliver_subject"], b"", timeout=5)

    with_client(server, main)
