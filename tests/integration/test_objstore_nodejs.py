"""Object stores through nats.js (npm ``nats`` v2 under node), on nats-server and on trijet.

Each test runs one scenario of ``tests/js/objstore.mjs`` against a server of
each kind with the same assertions; the reference nats-server defines what is
right.  Object contents are ``pattern(n)`` (byte i = (31*i + 7) mod 256), so
sizes and digests are recomputed here.  Covered: store options, multi-chunk
put and its meta message, info, replacement, delete, meta update and rename,
links, seal and destroy, and what goes through ordered push consumers: reading
objects back (digest checked by the client, also through links), list, watch.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ServerProcess, start_server
from tests.support.node_js import error_message, error_of, requires_node, run_scenario

pytestmark = requires_node

CHUNK = 128 * 1024


@pytest.fixture(scope="module", params=("reference", "trijet"))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server of each kind for the whole module (every scenario uses its own store)."""
    tmp = tmp_path_factory.mktemp(f"obj-js-{request.param}")
    srv = start_server(request.param, ["-js", "-sd", str(tmp / "store")], workdir=tmp / "srv")
    yield srv
    srv.stop()


def scenario(server: ServerProcess, name: str) -> dict[str, Any]:
    return run_scenario("objstore.mjs", server.url, name)


def pattern(n: int) -> bytes:
    """The scenario's object contents: byte i = (31*i + 7) mod 256."""
    return bytes((31 * i + 7) & 0xFF for i in range(n))


def digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def info(
    name: str, bucket: str, data: bytes, revision: int, chunk: int | None = CHUNK, **extra: Any
) -> dict[str, Any]:
    """The ObjectInfo fields the scenarios record, for a live object holding ``data``."""
    size = len(data)
    chunks = 0 if chunk is None else -(-size // chunk)
    return {
        "name": name,
        "bucket": bucket,
        "size": size,
        "chunks": chunks,
        "digest": digest(data),
        "deleted": False,
        "revision": revision,
        "description": extra.pop("description", ""),
        "options": extra.pop("options", {"max_chunk_size": chunk} if chunk else None),
        **extra,
    }


def test_store_options_become_the_stream_config(server: ServerProcess) -> None:
    r = scenario(server, "store")
    assert r["create"] == "<ObjectStoreImpl>"
    assert r["config"] == {
        "name": "OBJ_js_opts",
        "description": "blobs",
        "subjects": ["$O.js_opts.C.>", "$O.js_opts.M.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": 1 << 24,
        "max_age": 3_600_000_000_000,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "new",
        "storage": "memory",
        "num_replicas": 1,
        "duplicate_window": 120_000_000_000,
        "compression": "none",
        "allow_direct": True,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": True,
        "consumer_limits": {},
        "allow_msg_ttl": False,
        "metadata": {"owner": "tests"},
    }
    assert r["status"] == {
        "bucket": "js_opts",
        "description": "blobs",
        "ttl": 3_600_000_000_000,
        "storage": "memory",
        "replicas": 1,
        "sealed": False,
        "size": 0,
        "backingStore": "JetStream",
        "metadata": {"owner": "tests"},
    }
    defaults = r["defaults"]
    assert (
        defaults["storage"],
        defaults["max_age"],
        defaults["max_bytes"],
        defaults["allow_direct"],
    ) == (
        "file",
        0,
        -1,
        True,
    )
    assert error_message(r["bad_name"]) == "invalid bucket name: bad.name"


def test_put_multi_chunk_object_meta_and_info(server: ServerProcess) -> None:
    r = scenario(server, "put_info")
    data = pattern(2 * CHUNK + 1000)
    assert r["sha256"] == hashlib.sha256(data).hexdigest()
    expected = info(
        "reports/q1.bin",
        "js_put",
        data,
        4,
        description="first quarter",
        metadata={"year": "2024"},
        headers={"Kind": ["report"]},
    )
    assert r["put"] == expected
    assert r["info"] == expected
    assert r["meta"] == {
        "subject": "$O.js_put.M.cmVwb3J0cy9xMS5iaW4=",
        "headers": {"Nats-Rollup": "sub"},
        "body": {
            "bucket": "js_put",
            "nuid": "string",
            "size": len(data),
            "chunks": 3,
            "name": "reports/q1.bin",
            "description": "first quarter",
            "options": {"max_chunk_size": CHUNK},
            "metadata": {"year": "2024"},
            "headers": {"Kind": ["report"]},
            "mtime": "string",
            "digest": digest(data),
            "deleted": False,
        },
    }
    assert r["counts"] == [4, 3]
    assert r["first_chunk"] == {"subject_prefix": "$O.js_put.C.", "size": CHUNK}
    assert r["missing"] is None
    assert r["empty"] == info("empty", "js_put", b"", 5)
    assert r["streamed"] == info("streamed", "js_put", pattern(2500), 9, chunk=1000)
    assert r["counts_after"] == [9, 6]


def test_put_replaces_an_object_and_purges_its_old_chunks(server: ServerProcess) -> None:
    r = scenario(server, "replace")
    assert r["new_nuid"] is True
    assert r["info"] == info("doc", "js_repl", pattern(10), 5)
    assert r["counts"] == [2, 1]


def test_delete_object(server: ServerProcess) -> None:
    r = scenario(server, "delete")
    assert r["counts_before"] == [5, 3]
    assert r["delete"] == {
        "type": "io.nats.jetstream.api.v1.stream_purge_response",
        "success": True,
        "purged": 2,
    }
    assert r["info"] == {
        "name": "doomed",
        "bucket": "js_del",
        "size": 0,
        "chunks": 0,
        "digest": "",
        "deleted": True,
        "revision": 6,
        "description": "",
        "options": {"max_chunk_size": CHUNK},
    }
    assert r["counts_after"] == [3, 1]
    assert r["keep"] == 1
    assert r["delete_missing"] == {"purged": 0, "success": False}
    assert r["put_again"] == 4
    assert r["info_again"] == info("doomed", "js_del", b"back", 8)


def test_update_meta_and_rename(server: ServerProcess) -> None:
    r = scenario(server, "update")
    assert r["update"] == 5
    assert r["info_a"] == info(
        "a", "js_meta", b"alpha", 5, description="first letter", options=None
    )
    assert error_message(r["rename_taken"]) == "an object already exists with that name"
    assert r["rename"] == 6
    assert r["info_old"] is None
    assert r["info_new"] == info("c", "js_meta", b"alpha", 6, options=None)
    assert error_message(r["update_missing"]) == "object not found"


def test_links(server: ServerProcess) -> None:
    r = scenario(server, "links")
    to_target = {"bucket": "js_lsrc", "name": "target"}
    assert r["link"] == {
        "name": "to_target",
        "bucket": "js_lsrc",
        "deleted": False,
        "revision": 3,
        "description": "",
        "options": {"link": to_target},
    }
    assert r["link_info"] == {"isLink": True, "link": to_target}
    assert r["link_same_store"] == {**r["link"], "name": "alias", "revision": 3}
    assert r["link_store"] == {
        "name": "whole",
        "bucket": "js_ldst",
        "size": 0,
        "chunks": 0,
        "digest": digest(b""),
        "deleted": False,
        "revision": 4,
        "description": "",
        "options": {"link": {"bucket": "js_lsrc"}, "max_chunk_size": CHUNK},
    }
    assert error_message(r["link_taken"]) == "an object already exists with that name"
    assert error_message(r["link_to_link"]) == "src object is a link"
    assert error_message(r["link_to_deleted"]) == "src object is deleted"


def test_seal_and_destroy(server: ServerProcess) -> None:
    r = scenario(server, "seal_destroy")
    assert (r["seal"], r["status_sealed"]) == (True, True)
    err = error_of(r["put_sealed"])
    assert err is not None
    assert (err["status"], err["err_code"], err["description"]) == (
        400,
        10109,
        "invalid operation on sealed stream",
    )
    assert r["destroy"] is True
    assert error_message(r["status_gone"]) == "object store not found"
    err = error_of(r["info_gone"])
    assert err is not None
    assert (err["status"], err["err_code"]) == (404, 10059)


def test_get_multi_chunk_objects_with_digest(server: ServerProcess) -> None:
    r = scenario(server, "get")
    data = pattern(3 * CHUNK + 7)
    assert r["sha256"] == hashlib.sha256(data).hexdigest()
    assert r["big"] == {"size": len(data), "sha256": r["sha256"]}
    assert r["get_stream"] == {
        "size": len(data),
        "error": None,
        "info": info("big", "js_get", data, 5),
    }
    assert r["tiny"] == "abc"
    assert r["empty"] == 0
    assert r["missing"] is None
    assert r["deleted"] is None


def test_get_through_links(server: ServerProcess) -> None:
    r = scenario(server, "link_get")
    assert r["via_link"] == r["sha256"] == hashlib.sha256(pattern(CHUNK + 5)).hexdigest()
    assert error_message(r["bucket_link"]) == "link is a bucket"


def test_list(server: ServerProcess) -> None:
    r = scenario(server, "list")
    assert r["empty"] == []
    assert r["listed"] == [["one", 3], ["three", 5]]


def test_watch(server: ServerProcess) -> None:
    r = scenario(server, "watch")
    assert r["initial"] == [["old", 1], None]
    assert r["changes"] == [["new", False, CHUNK + 1], ["old", True, 0]]
    assert r["fresh"] == [["new", False], ["old", True]]
    assert r["nothing_else"] == 0
