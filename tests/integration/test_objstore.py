"""Object stores through nats-py, on nats-server and on trijet with the same assertions.

Every scenario runs against one server of each kind (shared per module, one
store per scenario); the reference nats-server defines what is right: store
options and their stream config, multi-chunk put and the meta message it
leaves, info, replacement, delete (meta tombstone plus chunk purge), meta
update, sealing, status, store deletion, and reading an object back, listing
and watching (these go through ordered push consumers).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import nats
import pytest
from nats.js.api import ObjectMeta, ObjectMetaOptions, ObjectStoreConfig, StorageType
from nats.js.errors import (
    BadRequestError,
    BucketNotFoundError,
    InvalidBucketNameError,
    NotFoundError,
    ObjectAlreadyExists,
    ObjectNotFoundError,
)

from tests.support import ServerProcess, start_server
from tests.support.aio import noop_cb, run

JS_TIMEOUT_S = 2.0
CHUNK = 128 * 1024  # nats-py's default chunk size
SEED = 8  # object contents are seeded pseudo-random bytes

Scenario = Callable[[Any], Awaitable[None]]


@pytest.fixture(scope="module", params=("reference", "trijet"))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server of each kind for the whole module (every scenario uses its own store)."""
    tmp = tmp_path_factory.mktemp(f"obj-py-{request.param}")
    srv = start_server(request.param, ["-js", "-sd", str(tmp / "store")], workdir=tmp / "srv")
    yield srv
    srv.stop()


def play(server: ServerProcess, scenario: Scenario) -> None:
    """Connect nats-py to ``server`` and run ``scenario(js)``."""

    async def main() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb, allow_reconnect=False)
        try:
            await scenario(nc.jetstream(timeout=JS_TIMEOUT_S))
        finally:
            await nc.close()

    run(main, timeout=30)


def blob(size: int) -> bytes:
    return random.Random(SEED + size).randbytes(size)


def digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def user_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stream config without the ``_nats.*`` metadata nats-server adds (trijet does not)."""
    out = dict(config)
    meta = {
        k: v for k, v in (out.pop("metadata", None) or {}).items() if not k.startswith("_nats.")
    }
    if meta:
        out["metadata"] = meta
    return out


async def stream_counts(js: Any, bucket: str) -> tuple[int, int]:
    """(messages, messages on chunk subjects) of the store's stream."""
    si = await js.stream_info(f"OBJ_{bucket}", subjects_filter=f"$O.{bucket}.C.>")
    return si.state.messages, sum((si.state.subjects or {}).values())


def test_store_options_become_the_stream_config(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        config = ObjectStoreConfig(
            description="blobs", ttl=3600, max_bytes=1 << 24, storage=StorageType.MEMORY
        )
        obs = await js.create_object_store("py_opts", config=config)
        si = await js.stream_info("OBJ_py_opts")
        assert user_config(si.config.as_dict()) == {
            "name": "OBJ_py_opts",
            "description": "blobs",
            "subjects": ["$O.py_opts.C.>", "$O.py_opts.M.>"],
            "retention": "limits",
            "max_consumers": -1,
            "max_msgs": -1,
            "max_bytes": 1 << 24,
            "discard": "new",
            "discard_new_per_subject": False,
            "max_age": 3_600_000_000_000,
            "max_msgs_per_subject": -1,
            "max_msg_size": -1,
            "storage": "memory",
            "num_replicas": 1,
            "no_ack": False,
            "duplicate_window": 120_000_000_000,
            "sealed": False,
            "deny_delete": False,
            "deny_purge": False,
            "allow_rollup_hdrs": True,
            "allow_direct": True,
            "mirror_direct": False,
            "compression": "none",
            "allow_msg_ttl": False,
            "consumer_limits": {},
        }
        status = await obs.status()
        assert (status.bucket, status.description, status.ttl, status.storage_type) == (
            "py_opts",
            "blobs",
            3600.0,
            StorageType.MEMORY,
        )
        assert (status.replicas, status.sealed, status.size) == (1, False, 0)

        await js.create_object_store("py_dflt")
        cfg = (await js.stream_info("OBJ_py_dflt")).config
        assert (cfg.storage, cfg.max_age, cfg.max_bytes, cfg.max_consumers) == (
            StorageType.FILE,
            0.0,
            -1,
            -1,
        )
        assert (await js.object_store("py_dflt")).__class__.__name__ == "ObjectStore"
        with pytest.raises(BucketNotFoundError):
            await js.object_store("py_never")
        with pytest.raises(InvalidBucketNameError):
            await js.create_object_store("bad.name")

    play(server, scenario)


def test_put_multi_chunk_object_and_info(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_put")
        data = blob(2 * CHUNK + 1000)
        meta = ObjectMeta(
            name="reports/q1.bin", description="first quarter", headers={"Kind": ["report"]}
        )
        info = await obs.put("reports/q1.bin", data, meta=meta)
        assert (info.name, info.bucket, info.size, info.chunks, info.digest) == (
            "reports/q1.bin",
            "py_put",
            len(data),
            3,
            digest(data),
        )
        got = await obs.get_info("reports/q1.bin")
        assert (got.name, got.size, got.chunks, got.digest, got.nuid, got.deleted) == (
            "reports/q1.bin",
            len(data),
            3,
            digest(data),
            info.nuid,
            False,
        )
        assert (got.description, got.headers, got.options.max_chunk_size) == (
            "first quarter",
            {"Kind": ["report"]},
            CHUNK,
        )
        # the meta message is the JSON info, rolled up per subject
        msg = await js.get_last_msg("OBJ_py_put", meta_subject("py_put", "reports/q1.bin"))
        assert msg.headers == {"Nats-Rollup": "sub"}
        body = json.loads(msg.data)
        assert (body["name"], body["bucket"], body["nuid"], body["size"], body["chunks"]) == (
            "reports/q1.bin",
            "py_put",
            info.nuid,
            len(data),
            3,
        )
        assert await stream_counts(js, "py_put") == (4, 3)
        # chunks live on one subject per object instance
        chunk = await js.get_msg("OBJ_py_put", seq=1)
        assert (chunk.subject, chunk.data) == (f"$O.py_put.C.{info.nuid}", data[:CHUNK])
        with pytest.raises(ObjectNotFoundError):
            await obs.get_info("absent")

        empty = await obs.put("empty", b"")
        assert (empty.size, empty.chunks, empty.digest) == (0, 0, digest(b""))
        small = await obs.put("small", io.BytesIO(b"tiny"))
        assert (small.size, small.chunks) == (4, 1)
        assert await stream_counts(js, "py_put") == (7, 4)

    play(server, scenario)


def test_put_replaces_an_object_and_purges_its_old_chunks(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_repl")
        first = await obs.put("doc", blob(CHUNK + 1))
        second = await obs.put("doc", blob(10))
        assert first.nuid != second.nuid
        got = await obs.get_info("doc")
        assert (got.nuid, got.size, got.chunks, got.digest) == (
            second.nuid,
            10,
            1,
            digest(blob(10)),
        )
        # old chunks purged, old meta rolled up: one chunk and one meta remain
        assert await stream_counts(js, "py_repl") == (2, 1)

    play(server, scenario)


def test_delete_object(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_del")
        await obs.put("keep", b"k")
        await obs.put("doomed", blob(CHUNK * 2))
        assert await stream_counts(js, "py_del") == (5, 3)
        await obs.delete("doomed")
        with pytest.raises(ObjectNotFoundError):
            await obs.get_info("doomed")
        tomb = await obs.get_info("doomed", show_deleted=True)
        assert (tomb.deleted, tomb.size, tomb.chunks, tomb.digest) == (True, 0, 0, "")
        # the chunks are purged; the tombstone meta stays
        assert await stream_counts(js, "py_del") == (3, 1)
        assert (await obs.get_info("keep")).size == 1
        with pytest.raises(ObjectNotFoundError):
            await obs.delete("doomed")
        # a deleted name can be put again
        again = await obs.put("doomed", b"back")
        assert (await obs.get_info("doomed")).nuid == again.nuid

    play(server, scenario)


def test_update_meta_and_rename(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_meta")
        await obs.put("a", b"alpha")
        await obs.put("b", b"beta")
        await obs.update_meta("a", ObjectMeta(name="a", description="first letter"))
        info = await obs.get_info("a")
        assert (info.description, info.size, info.digest) == ("first letter", 5, digest(b"alpha"))
        with pytest.raises(ObjectAlreadyExists):
            await obs.update_meta("a", ObjectMeta(name="b"))

    play(server, scenario)


def test_seal_and_delete_store(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_seal")
        await obs.put("x", b"x")
        await obs.seal()
        status = await obs.status()
        assert status.sealed is True
        with pytest.raises(BadRequestError) as exc:
            await obs.delete("x")
        assert exc.value.err_code == 10109  # purge of a sealed stream is refused
        assert await js.delete_object_store("py_seal")
        with pytest.raises(BucketNotFoundError):
            await js.object_store("py_seal")
        with pytest.raises(NotFoundError):
            await js.stream_info("OBJ_py_seal")

    play(server, scenario)


def test_get_multi_chunk_object_with_digest(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_get")
        data = blob(3 * CHUNK + 7)
        await obs.put("big", data)
        res = await obs.get("big")
        assert (res.data, res.info.size, res.info.chunks) == (data, len(data), 4)
        sink = io.BytesIO()
        await obs.get("big", writeinto=sink)
        assert sink.getvalue() == data
        small = await obs.put(
            "small",
            b"x",
            meta=ObjectMeta(name="small", options=ObjectMetaOptions(max_chunk_size=1)),
        )
        assert small.chunks == 1
        assert (await obs.get("small")).data == b"x"
        await obs.delete("big")
        with pytest.raises(ObjectNotFoundError):
            await obs.get("big")

    play(server, scenario)


def test_list_objects(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_list")
        with pytest.raises(NotFoundError):
            await obs.list()
        for name in ("one", "two", "three"):
            await obs.put(name, name.encode())
        await obs.delete("two")
        listed = await obs.list()
        assert sorted((i.name, i.deleted) for i in listed) == [
            ("one", False),
            ("three", False),
            ("two", True),
        ]
        live = await obs.list(ignore_deletes=True)
        assert sorted(i.name for i in live) == ["one", "three"]

    play(server, scenario)


def test_watch_objects(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        obs = await js.create_object_store("py_watch")
        await obs.put("old", b"o")
        w = await obs.watch()
        first = await w.updates(JS_TIMEOUT_S)
        assert (first.name, first.size) == ("old", 1)
        assert await w.updates(JS_TIMEOUT_S) is None  # end of the initial values
        await obs.put("new", blob(CHUNK + 1))
        await obs.delete("old")
        changes = [await w.updates(JS_TIMEOUT_S) for _ in range(2)]
        assert [(i.name, i.deleted, i.size) for i in changes] == [
            ("new", False, CHUNK + 1),
            ("old", True, 0),
        ]
        await w.stop()
        updates = await obs.watch(updates_only=True)
        await obs.put("later", b"l")
        assert (await updates.updates(JS_TIMEOUT_S)).name == "later"
        await updates.stop()

    play(server, scenario)
