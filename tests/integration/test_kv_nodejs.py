"""KV buckets through nats.js (npm ``nats`` v2 under node), on nats-server and on trijet.

Each test runs one scenario of ``tests/js/kv.mjs`` against a server of each kind
and makes the same assertions on both: the reference nats-server defines what is
right: bucket options, put/create/update with CAS, get by key and revision,
delete and purge markers, limits, TTL, bucket deletion, and the scenarios that
go through ordered push consumers (keys, history, watch).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ServerProcess, start_server
from tests.support.node_js import error_message, error_of, requires_node, run_scenario

pytestmark = requires_node


@pytest.fixture(scope="module", params=("reference", "trijet"))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server of each kind for the whole module (every scenario uses its own bucket)."""
    tmp = tmp_path_factory.mktemp(f"kv-js-{request.param}")
    srv = start_server(request.param, ["-js", "-sd", str(tmp / "store")], workdir=tmp / "srv")
    yield srv
    srv.stop()


def scenario(server: ServerProcess, name: str) -> dict[str, Any]:
    return run_scenario("kv.mjs", server.url, name)


def api_error(observed: Any) -> tuple[Any, ...]:
    """(status, err_code, description) of a recorded JetStream error."""
    err = error_of(observed)
    assert err is not None, f"expected an error, got {observed!r}"
    return (err.get("status"), err.get("err_code"), err.get("description"))


def entry(key: str, value: str, revision: int, operation: str = "PUT") -> dict[str, Any]:
    return {"key": key, "value": value, "revision": revision, "operation": operation}


def test_bucket_options_become_the_stream_config(server: ServerProcess) -> None:
    r = scenario(server, "bucket")
    assert r["create"] == "<Bucket>"
    assert r["config"] == {
        "name": "KV_js_cfg",
        "description": "settings",
        "subjects": ["$KV.js_cfg.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": 1048576,
        "max_age": 60_000_000_000,
        "max_msgs_per_subject": 5,
        "max_msg_size": 1024,
        "discard": "new",
        "storage": "memory",
        "num_replicas": 1,
        "duplicate_window": 60_000_000_000,
        "compression": "s2",
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
    assert r["put"] == 1
    status = {
        "bucket": "js_cfg",
        "values": 1,
        "history": 5,
        "ttl": 60_000,
        "backingStore": "memory",
        "storage": "memory",
        "replicas": 1,
        "description": "settings",
        "maxValueSize": 1024,
        "max_bytes": 1048576,
        "compression": True,
        "streamName": "KV_js_cfg",
    }
    assert r["status"] == status
    assert r["again"] == status
    defaults = r["defaults"]
    assert (defaults["max_msgs_per_subject"], defaults["storage"], defaults["max_age"]) == (
        1,
        "file",
        0,
    )
    assert (defaults["duplicate_window"], defaults["max_msg_size"], defaults["allow_direct"]) == (
        120_000_000_000,
        -1,
        True,
    )
    assert "metadata" not in defaults
    assert error_message(r["bad_bucket"]) == "invalid bucket name: no.dots"


def test_put_create_update_and_get(server: ServerProcess) -> None:
    r = scenario(server, "crud")
    assert (r["put1"], r["put2"], r["create_new"], r["update_ok"]) == (1, 2, 3, 4)
    assert api_error(r["create_exists"]) == (400, 10071, "wrong last sequence: 2")
    assert api_error(r["update_stale"]) == (400, 10071, "wrong last sequence: 2")
    assert api_error(r["put_prev_stale"]) == (400, 10071, "wrong last sequence: 4")
    assert r["get"] == entry("k", "v3", 4)
    assert r["get_rev1"] == entry("k", "v1", 1)
    assert r["get_rev_other_key"] is None  # revision 3 belongs to key "n"
    assert r["get_missing"] is None
    assert r["get_rev_missing"] is None
    assert error_message(r["bad_key"]) == "invalid key: bad key"


def test_delete_and_purge_markers(server: ServerProcess) -> None:
    r = scenario(server, "markers")
    assert (r["put_a"], r["put_a2"], r["put_b"]) == (1, 2, 3)
    assert api_error(r["delete_a_stale"]) == (400, 10071, "wrong last sequence: 2")
    assert r["get_a"] == entry("a", "", 4, "DEL")
    assert r["get_a_rev2"] == entry("a", "2", 2)
    assert r["get_b"] == entry("b", "", 5, "PURGE")
    # the purge rolled key b up to its marker: a1, a2, the delete marker, b's purge marker
    assert r["status_values"] == 4
    assert r["recreate_a"] == 6
    assert r["get_a_again"] == entry("a", "again", 6)


def test_history_and_value_size_limits(server: ServerProcess) -> None:
    r = scenario(server, "limits")
    assert (r["put1"], r["put2"], r["put3"]) == (1, 2, 3)
    assert r["get_rev1"] is None
    assert r["get_rev2"] == entry("k", "v2", 2)
    assert api_error(r["too_big"]) == (400, 10054, "message size exceeds maximum allowed")
    assert r["values"] == 2
    assert r["fill"] == 1
    assert api_error(r["over_max_bytes"]) == (503, 10077, "maximum bytes exceeded")  # discard new


def test_bucket_sourcing_and_mirroring_another(server: ServerProcess) -> None:
    r = scenario(server, "replicated")
    assert r["agg_sources"] == [
        {
            "name": "KV_js_src",
            "subject_transforms": [{"src": "$KV.js_src.>", "dest": "$KV.js_agg.>"}],
        }
    ]
    assert r["agg_synced"] is True
    assert r["agg_get"] == entry("a", "3", 3)
    assert r["agg_get_b"] == entry("b", "2", 2)
    assert r["mir_config"] == {
        "mirror": {"name": "KV_js_src"},
        "mirror_direct": True,
        "subjects": None,
    }
    assert r["mir_synced"] == {"ok": True, "messages": 2, "last_seq": 3}
    # a mirror captures no subjects: a put finds no stream
    assert (error_of(r["mir_put"]) or {}).get("code") == "503"


def test_bucket_ttl_expires_values(server: ServerProcess) -> None:
    r = scenario(server, "ttl")
    assert r["put"] == 1
    assert r["get_now"] == entry("k", "short", 1)
    assert r["expired"] is True
    assert r["values"] == 0


def test_destroy_bucket(server: ServerProcess) -> None:
    r = scenario(server, "destroy")
    assert (r["put"], r["destroy"]) == (1, True)
    assert api_error(r["info_after"]) == (404, 10059, "stream not found")


def test_keys(server: ServerProcess) -> None:
    r = scenario(server, "keys")
    assert r["empty"] == []
    assert r["all"] == ["a", "b.c", "b.d"]
    assert r["filtered"] == ["b.c", "b.d"]


def test_history(server: ServerProcess) -> None:
    r = scenario(server, "history")
    k = [entry("k", "v3", 3), entry("k", "v4", 4), entry("k", "", 5, "DEL")]
    assert r["k"] == k
    assert r["all"] == [*k, entry("other", "o", 6)]


def test_watch_last_values_then_updates(server: ServerProcess) -> None:
    r = scenario(server, "watch")
    assert r["initial"] == [entry("a", "a2", 2), entry("b", "b1", 3)]
    assert r["initialized"] is True
    assert r["updates"] == [
        entry("c", "c1", 4),
        entry("a", "", 5, "DEL"),
        entry("b", "", 6, "PURGE"),
    ]


def test_watch_key_with_history(server: ServerProcess) -> None:
    r = scenario(server, "watch_history")
    assert r["initial"] == [entry("a", "a1", 1), entry("a", "a2", 2)]
    assert r["updates"] == [entry("a", "a3", 5)]
    assert r["nothing_else"] == []


def test_watch_updates_only(server: ServerProcess) -> None:
    r = scenario(server, "watch_updates")
    assert r["initialized"] is True
    assert r["updates"] == [entry("a", "new", 2), entry("b", "b", 3)]
