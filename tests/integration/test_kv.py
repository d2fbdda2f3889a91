"""KV buckets through nats-py, on nats-server and on trijet with the same assertions.

Every scenario runs against one server of each kind (shared per module, one
bucket per scenario); the reference nats-server defines what is right:
bucket options and their stream config, put/create/update with CAS, get by
key and revision, delete and purge markers, limits, bucket and per-message
TTL, status, bucket deletion, and the scenarios that go through ordered push
consumers (keys, history, watch, purge_deletes).  TTL scenarios wait (bounded) for the value to
disappear instead of sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import nats
import pytest
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import (
    BadRequestError,
    BucketNotFoundError,
    InvalidBucketNameError,
    InvalidKeyError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats.js.kv import KeyValue

from tests.support import ServerProcess, start_server
from tests.support.aio import noop_cb, run

JS_TIMEOUT_S = 2.0

Scenario = Callable[[nats.js.JetStreamContext], Awaitable[None]]


@pytest.fixture(scope="module", params=("reference", "trijet"))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server of each kind for the whole module (every scenario uses its own bucket)."""
    tmp = tmp_path_factory.mktemp(f"kv-py-{request.param}")
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


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float) -> bool:
    """True once ``check()`` holds; polls every 25 ms for at most ``within_s`` (a bounded wait)."""
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.025)
    return True


async def gone(kv: KeyValue, key: str) -> bool:
    """True when ``key`` has no value (absent, or its last entry is a delete/purge marker)."""
    try:
        await kv.get(key)
    except KeyNotFoundError:
        return True
    return False


async def absent(kv: KeyValue, key: str) -> bool:
    """True when the bucket holds no entry at all for ``key`` (not even a marker)."""
    try:
        await kv.get(key)
    except KeyNotFoundError as exc:
        return exc.op is None
    return False


def user_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stream config without the server-owned ``_nats.*`` metadata (the
    servers' versions differ; ``test_limit_marker_ttl_needs_api_level_1`` checks it)."""
    out = dict(config)
    meta = {
        k: v for k, v in (out.pop("metadata", None) or {}).items() if not k.startswith("_nats.")
    }
    if meta:
        out["metadata"] = meta
    return out


def entry(e: KeyValue.Entry) -> tuple[str, bytes | None, int | None, str | None]:
    return (e.key, e.value, e.revision, e.operation)


def test_bucket_options_become_the_stream_config(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(
            KeyValueConfig(
                bucket="py_cfg",
                description="settings",
                history=5,
                ttl=60,
                max_value_size=1024,
                max_bytes=1 << 20,
                storage=StorageType.MEMORY,
            )
        )
        si = await js.stream_info("KV_py_cfg")
        assert user_config(si.config.as_dict()) == {
            "name": "KV_py_cfg",
            "description": "settings",
            "subjects": ["$KV.py_cfg.>"],
            "retention": "limits",
            "max_consumers": -1,
            "max_msgs": -1,
            "max_bytes": 1 << 20,
            "discard": "new",
            "discard_new_per_subject": False,
            "max_age": 60_000_000_000,
            "max_msgs_per_subject": 5,
            "max_msg_size": 1024,
            "storage": "memory",
            "num_replicas": 1,
            "no_ack": False,
            "duplicate_window": 60_000_000_000,  # min(2 min, ttl)
            "sealed": False,
            "deny_delete": True,
            "deny_purge": False,
            "allow_rollup_hdrs": True,
            "allow_direct": False,
            "mirror_direct": False,
            "compression": "none",
            "allow_msg_ttl": True,
            "consumer_limits": {},
        }
        assert await kv.put("a", b"1") == 1
        status = await kv.status()
        assert (status.bucket, status.values, status.history, status.ttl) == ("py_cfg", 1, 5, 60.0)
        assert status.stream_info.config.storage == StorageType.MEMORY
        # binding to the bucket by name finds the stream and its direct setting
        bound = await js.key_value("py_cfg")
        assert (await bound.get("a")).value == b"1"

        await js.create_key_value(bucket="py_file", direct=True)
        cfg = (await js.stream_info("KV_py_file")).config
        assert (cfg.storage, cfg.max_msgs_per_subject, cfg.max_age, cfg.duplicate_window) == (
            StorageType.FILE,
            1,
            0.0,
            120.0,
        )
        assert (cfg.allow_direct, cfg.max_msg_size, cfg.max_bytes) == (True, -1, -1)
        assert not user_config(cfg.as_dict()).get("metadata")
        with pytest.raises(InvalidBucketNameError):
            await js.create_key_value(bucket="no.dots")
        with pytest.raises(KeyHistoryTooLargeError):
            await js.create_key_value(bucket="deep", history=65)
        with pytest.raises(BucketNotFoundError):
            await js.key_value("never_made")

    play(server, scenario)


def test_put_create_update_and_get(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_crud", history=10)
        assert [await kv.put("k", b"v1"), await kv.put("k", b"v2")] == [1, 2]
        with pytest.raises(KeyWrongLastSequenceError) as exc:
            await kv.create("k", b"x")
        assert exc.value.description == "wrong last sequence: 2"
        assert await kv.create("n", b"fresh") == 3
        with pytest.raises(KeyWrongLastSequenceError):
            await kv.update("k", b"x", last=1)
        assert await kv.update("k", b"v3", last=2) == 4
        assert entry(await kv.get("k")) == ("k", b"v3", 4, None)
        assert entry(await kv.get("k", revision=1)) == ("k", b"v1", 1, None)
        with pytest.raises(KeyNotFoundError):
            await kv.get("k", revision=3)  # revision 3 is key "n"
        with pytest.raises(KeyNotFoundError):
            await kv.get("nope")
        with pytest.raises(KeyNotFoundError):
            await kv.get("k", revision=99)
        with pytest.raises(InvalidKeyError):
            await kv.put("bad key", b"x")
        with pytest.raises(InvalidKeyError):
            await kv.get(".lead")

    play(server, scenario)


def test_direct_get_bucket(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_direct", history=3, direct=True)
        await kv.put("k", b"one")
        await kv.put("k", b"two")
        await kv.delete("k")
        with pytest.raises(KeyNotFoundError) as exc:
            await kv.get("k")
        assert (exc.value.op, exc.value.entry.revision) == ("DEL", 3)
        assert entry(await kv.get("k", revision=2)) == ("k", b"two", 2, None)
        with pytest.raises(KeyNotFoundError):
            await kv.get("absent")
        assert await kv.create("k", b"back") == 4

    play(server, scenario)


def test_delete_and_purge_markers(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_mark", history=10)
        await kv.put("a", b"1")
        await kv.put("a", b"2")
        await kv.put("b", b"1")
        with pytest.raises(BadRequestError) as exc:
            await kv.delete("a", last=1)
        assert (exc.value.err_code, exc.value.description) == (10071, "wrong last sequence: 2")
        assert await kv.delete("a", last=2)
        with pytest.raises(KeyNotFoundError) as nf:
            await kv.get("a")
        assert (nf.value.op, nf.value.entry.revision) == ("DEL", 4)
        assert entry(await kv.get("a", revision=2)) == ("a", b"2", 2, None)
        assert await kv.purge("b")
        with pytest.raises(KeyNotFoundError) as nf:
            await kv.get("b")
        assert (nf.value.op, nf.value.entry.revision) == ("PURGE", 5)
        # the purge rolled key b up to its marker; a keeps its history and marker
        status = await kv.status()
        assert (
            status.values,
            status.stream_info.state.first_seq,
            status.stream_info.state.last_seq,
        ) == (4, 1, 5)
        # create over a deleted key finds the marker and updates from it
        assert await kv.create("a", b"again") == 6
        assert entry(await kv.get("a")) == ("a", b"again", 6, None)
        # a purge of a key with history drops every earlier revision
        await kv.purge("a")
        with pytest.raises(KeyNotFoundError):
            await kv.get("a", revision=2)
        assert (await kv.status()).values == 2

    play(server, scenario)


def test_history_and_value_size_limits(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_lim", history=2, max_value_size=16)
        assert [await kv.put("k", b"v%d" % i) for i in range(1, 4)] == [1, 2, 3]
        with pytest.raises(KeyNotFoundError):
            await kv.get("k", revision=1)
        assert entry(await kv.get("k", revision=2)) == ("k", b"v2", 2, None)
        with pytest.raises(BadRequestError) as exc:
            await kv.put("k", b"x" * 17)
        assert (exc.value.err_code, exc.value.description) == (
            10054,
            "message size exceeds maximum allowed",
        )
        assert await kv.put("k", b"x" * 16) == 4
        status = await kv.status()
        assert (status.values, status.history) == (2, 2)

    play(server, scenario)


def test_bucket_ttl_expires_values(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_ttl", ttl=0.5)
        assert (await js.stream_info("KV_py_ttl")).config.duplicate_window == 0.5
        await kv.put("k", b"short")
        assert (await kv.get("k")).value == b"short"
        assert await eventually(lambda: gone(kv, "k"), within_s=5.0)
        assert (await kv.status()).values == 0

    play(server, scenario)


def test_per_message_ttl_on_create_and_purge_marker(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_msgttl", history=2)
        assert await kv.create("brief", b"v", msg_ttl=1) == 1
        assert await kv.put("stays", b"v") == 2
        assert await kv.put("marked", b"v") == 3
        assert await kv.purge("marked", msg_ttl=1)  # the purge marker itself expires
        assert (await kv.get("brief")).value == b"v"
        with pytest.raises(KeyNotFoundError) as exc:
            await kv.get("marked")
        assert (exc.value.op, exc.value.entry.revision) == ("PURGE", 4)

        async def both_expired() -> bool:
            return await absent(kv, "brief") and await absent(kv, "marked")

        assert await eventually(both_expired, within_s=5.0)
        assert (await kv.get("stays")).value == b"v"
        assert (await kv.status()).values == 1
        # the key can be created again once its entry expired
        assert await kv.create("brief", b"again") == 5

    play(server, scenario)


def test_limit_marker_ttl_needs_api_level_1(server: ServerProcess) -> None:
    """nats-py refuses ``limit_marker_ttl`` below JetStream API level 1; both
    servers accept it, store ``_nats.req.level`` 1 and age the value out."""

    async def scenario(js: Any) -> None:
        assert (await js.account_info()).api.level >= 1
        kv = await js.create_key_value(bucket="py_marker", ttl=0.5, limit_marker_ttl=5)
        si = await js.stream_info("KV_py_marker")
        assert (si.config.subject_delete_marker_ttl, si.config.allow_msg_ttl) == (5, True)
        assert si.config.metadata is not None
        assert si.config.metadata["_nats.req.level"] == "1"
        assert set(si.config.metadata) == {"_nats.req.level", "_nats.ver", "_nats.level"}
        await kv.put("k", b"short")
        assert await eventually(lambda: gone(kv, "k"), within_s=5.0)

    play(server, scenario)


def test_delete_bucket(server: ServerProcess) -> None:
    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_gone")
        await kv.put("k", b"v")
        assert await js.delete_key_value("py_gone")
        with pytest.raises(BucketNotFoundError):
            await js.key_value("py_gone")
        with pytest.raises(InvalidBucketNameError):
            await js.delete_key_value("bad.name")

    play(server, scenario)


def test_keys(server: ServerProcess) -> None:

    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_keys")
        with pytest.raises(NoKeysError):
            await kv.keys()
        for k in ("a", "b.c", "b.d", "e"):
            await kv.put(k, k.encode())
        await kv.put("a", b"again")
        await kv.delete("e")
        assert sorted(await kv.keys()) == ["a", "b.c", "b.d"]
        assert sorted(await kv.keys(filters=["b."])) == ["b.c", "b.d"]

    play(server, scenario)


def test_history(server: ServerProcess) -> None:

    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_hist", history=3)
        for i in range(1, 5):
            await kv.put("k", b"v%d" % i)
        await kv.delete("k")
        await kv.put("other", b"o")
        assert [entry(e) for e in await kv.history("k")] == [
            ("k", b"v3", 3, None),
            ("k", b"v4", 4, None),
            ("k", b"", 5, "DEL"),
        ]
        with pytest.raises(NoKeysError):
            await kv.history("never")

    play(server, scenario)


def test_watch_last_values_then_updates(server: ServerProcess) -> None:

    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_watch", history=5)
        await kv.put("a", b"a1")
        await kv.put("a", b"a2")
        await kv.put("b", b"b1")
        w = await kv.watchall()
        initial = [await w.updates(JS_TIMEOUT_S) for _ in range(3)]
        assert [entry(e) if e else None for e in initial] == [
            ("a", b"a2", 2, None),
            ("b", b"b1", 3, None),
            None,  # end of the initial values
        ]
        await kv.put("c", b"c1")
        await kv.delete("a")
        await kv.purge("b")
        updates = [await w.updates(JS_TIMEOUT_S) for _ in range(3)]
        assert [entry(e) for e in updates] == [
            ("c", b"c1", 4, None),
            ("a", b"", 5, "DEL"),
            ("b", b"", 6, "PURGE"),
        ]
        await w.stop()

    play(server, scenario)


def test_watch_key_with_history_and_empty_watch(server: ServerProcess) -> None:

    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_watchh", history=5)
        empty = await kv.watch("a")
        assert await empty.updates(JS_TIMEOUT_S) is None  # nothing there yet
        await kv.put("a", b"a1")
        await kv.put("a", b"a2")
        await kv.put("z", b"z1")
        assert entry(await empty.updates(JS_TIMEOUT_S)) == ("a", b"a1", 1, None)
        await empty.stop()
        w = await kv.watch("a", include_history=True)
        initial = [await w.updates(JS_TIMEOUT_S) for _ in range(3)]
        assert [entry(e) if e else None for e in initial] == [
            ("a", b"a1", 1, None),
            ("a", b"a2", 2, None),
            None,
        ]
        await kv.put("z", b"not watched")
        await kv.put("a", b"a3")
        assert entry(await w.updates(JS_TIMEOUT_S)) == ("a", b"a3", 5, None)
        await w.stop()

    play(server, scenario)


def test_purge_deletes(server: ServerProcess) -> None:

    async def scenario(js: Any) -> None:
        kv = await js.create_key_value(bucket="py_pdel", history=5)
        await kv.put("a", b"1")
        await kv.put("b", b"1")
        await kv.delete("a")
        await kv.purge("b")
        await kv.put("c", b"1")
        assert (await kv.status()).values == 4
        assert await kv.purge_deletes(olderthan=-1)
        status = await kv.status()
        assert (status.values, status.stream_info.state.last_seq) == (1, 5)

    play(server, scenario)
