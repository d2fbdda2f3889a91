"""Differential: STREAM.CREATE / STREAM.UPDATE against the reference nats-server.

One reference server (``-js``, temp store dir) runs for the module; every
case's request goes to it with nats-py raw requests, streams are deleted
after each case.  For each case trijet's pure path (``parse_create`` +
``check_overlap`` / ``parse_update`` + ``check_update``) must produce:

* on success: the same ``config`` object, compared as Go-encoded text (so key
  order and ``\\u003e`` escaping count) as stored: the reference's dynamic
  ``_nats.ver``/``_nats.level`` removed, ``_nats.req.level`` compared.
* on failure: the same ``error`` object (``code``, ``err_code``,
  ``description``).

Deliberate differences (documented, not compared):
* the values of ``_nats.ver``/``_nats.level`` (trijet is 2.11.17, level 1;
  the reference 2.15.1, level 5).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from cluster.model import StreamConfig
from node.jsapi.errors import STREAM_NOT_FOUND, JSApiError, go_json
from node.jsapi.streamconfig import (
    check_overlap,
    check_recreate,
    check_update,
    parse_create,
    parse_update,
)
from tests.support.aio import run
from tests.support.servers import ServerProcess, reference_binary, start_server

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

REQUEST_TIMEOUT_S = 2.0

# (id, stream name in subject, body, [existing stream bodies])
CREATE_CASES: list[tuple[str, str, str, list[str]]] = [
    ("defaults", "S", '{"name":"S"}', []),
    ("subjects", "S", '{"name":"S","subjects":["orders.>","x.*.y"]}', []),
    (
        "all_limits",
        "S",
        '{"name":"S","max_consumers":5,"max_msgs":10,"max_bytes":1000,"max_age":3600000000000,'
        '"max_msgs_per_subject":3,"max_msg_size":512,"discard":"new","storage":"memory"}',
        [],
    ),
    (
        "zero_limits",
        "S",
        '{"name":"S","max_consumers":0,"max_msgs":0,"max_bytes":0,"max_msg_size":0}',
        [],
    ),
    ("neg_limits", "S", '{"name":"S","max_msgs":-7,"max_bytes":-2,"max_msgs_per_subject":-9}', []),
    ("max_age_60s", "S", '{"name":"S","max_age":60000000000}', []),
    ("max_age_50ms", "S", '{"name":"S","max_age":50000000}', []),
    ("max_age_negative", "S", '{"name":"S","max_age":-1}', []),
    ("dup_gt_max_age", "S", '{"name":"S","max_age":1000000000,"duplicate_window":2000000000}', []),
    ("dup_window_50ms", "S", '{"name":"S","duplicate_window":50000000}', []),
    ("dup_window_5s", "S", '{"name":"S","duplicate_window":5000000000}', []),
    ("bad_name_gt", "a>", '{"name":"a>"}', []),
    ("bad_name_slash", "a/b", '{"name":"a/b"}', []),
    ("bad_name_in_body_only", "S", '{"name":"a.b"}', []),
    ("bad_name_star", "a*", '{"name":"a*"}', []),
    ("name_mismatch", "S", '{"name":"T"}', []),
    ("empty_body", "S", "", []),
    ("bad_json_truncated", "S", '{"name":"S",', []),
    ("bad_json_key", "S", "{nam", []),
    ("bad_json_trailing", "S", '{"name":"S"} x', []),
    ("two_values", "S", '{"name":"T"} {"name":"S"}', []),
    ("unknown_field", "S", '{"name":"S","foo":1}', []),
    ("wrong_type_int", "S", '{"name":"S","max_msgs":"x"}', []),
    ("wrong_type_float", "S", '{"name":"S","max_msgs":1.5}', []),
    ("wrong_type_subjects", "S", '{"name":"S","subjects":"x"}', []),
    ("wrong_type_subject_elem", "S", '{"name":"S","subjects":[1]}', []),
    ("wrong_type_nested", "S", '{"name":"S","placement":{"cluster":5}}', []),
    ("wrong_type_source_seq", "S", '{"name":"S","sources":[{"name":"B","opt_start_seq":-1}]}', []),
    ("bad_retention", "S", '{"name":"S","retention":"bogus"}', []),
    ("null_retention", "S", '{"name":"S","retention":null}', []),
    ("bad_compression", "S", '{"name":"S","compression":"lz4"}', []),
    ("case_folded_keys", "S", '{"NAME":"S","Subjects":["q"]}', []),
    ("discard_case", "S", '{"name":"S","discard":"NEW"}', []),
    ("bad_subject", "S", '{"name":"S","subjects":["a..b"]}', []),
    ("dup_subjects", "S", '{"name":"S","subjects":["a","a"]}', []),
    ("overlap_self", "S", '{"name":"S","subjects":["a.*","a.b"]}', []),
    ("js_api_subject", "S", '{"name":"S","subjects":["$JS.API.>"]}', []),
    ("js_event_ok", "S", '{"name":"S","subjects":["$JS.EVENT.>"]}', []),
    ("capture_all", "S", '{"name":"S","subjects":[">"]}', []),
    ("capture_all_noack", "S", '{"name":"S","subjects":[">"],"no_ack":true}', []),
    (
        "overlap_other",
        "S",
        '{"name":"S","subjects":["ov.a"]}',
        ['{"name":"O","subjects":["ov.>"]}'],
    ),
    ("sealed_create", "S", '{"name":"S","sealed":true}', []),
    ("r3_single", "S", '{"name":"S","num_replicas":3}', []),
    ("r3_and_bad_age", "S", '{"name":"S","num_replicas":3,"max_age":1}', []),
    ("replicas_negative", "S", '{"name":"S","num_replicas":-1}', []),
    ("replicas_6", "S", '{"name":"S","num_replicas":6}', []),
    ("mirror", "S", '{"name":"S","mirror":{"name":"B"}}', []),
    ("mirror_subjects", "S", '{"name":"S","mirror":{"name":"B"},"subjects":["x"]}', []),
    ("mirror_sources", "S", '{"name":"S","mirror":{"name":"B"},"sources":[{"name":"C"}]}', []),
    ("mirror_first_seq", "S", '{"name":"S","mirror":{"name":"B"},"first_seq":5}', []),
    ("mirror_direct_no_mirror", "S", '{"name":"S","mirror_direct":true}', []),
    (
        "mirror_of_existing",
        "S",
        '{"name":"S","mirror":{"name":"B"}}',
        ['{"name":"B","allow_direct":true}'],
    ),
    (
        "sources",
        "S",
        '{"name":"S","sources":[{"name":"B","filter_subject":"b.>"},{"name":"C","opt_start_seq":4}]}',
        [],
    ),
    ("sources_dup", "S", '{"name":"S","sources":[{"name":"B"},{"name":"B"}]}', []),
    ("source_bad_name", "S", '{"name":"S","sources":[{"name":"a.b"}]}', []),
    (
        "source_time",
        "S",
        '{"name":"S","sources":[{"name":"B","opt_start_time":"2024-01-02T03:04:05.120Z"}]}',
        [],
    ),
    ("first_seq", "S", '{"name":"S","first_seq":42}', []),
    ("compression_s2", "S", '{"name":"S","compression":"s2"}', []),
    (
        "subject_transform",
        "S",
        '{"name":"S","subjects":["in.*"],"subject_transform":{"src":"in.*","dest":"out.$1"}}',
        [],
    ),
    ("republish", "S", '{"name":"S","subjects":["a.>"],"republish":{"dest":"r.>"}}', []),
    (
        "republish_headers",
        "S",
        '{"name":"S","subjects":["a.>"],"republish":{"src":"a.>","dest":"r.>","headers_only":true}}',
        [],
    ),
    (
        "republish_cycle",
        "S",
        '{"name":"S","subjects":["a.>"],"republish":{"src":"a.>","dest":"a.b"}}',
        [],
    ),
    (
        "consumer_limits",
        "S",
        '{"name":"S","consumer_limits":{"inactive_threshold":5000000000,"max_ack_pending":10}}',
        [],
    ),
    ("metadata", "S", '{"name":"S","metadata":{"b":"2","a":"<1>"},"description":"d & <e>"}', []),
    ("placement", "S", '{"name":"S","placement":{"cluster":"C1","tags":["a","b"]}}', []),
    ("placement_empty", "S", '{"name":"S","placement":{}}', []),
    ("placement_preferred", "S", '{"name":"S","placement":{"preferred":"n1"}}', []),
    ("discard_new_per_subject_bad", "S", '{"name":"S","discard_new_per_subject":true}', []),
    (
        "discard_new_per_subject_no_max",
        "S",
        '{"name":"S","discard":"new","discard_new_per_subject":true}',
        [],
    ),
    (
        "discard_new_per_subject_ok",
        "S",
        '{"name":"S","discard":"new","discard_new_per_subject":true,"max_msgs_per_subject":1}',
        [],
    ),
    ("rollup_deny_purge", "S", '{"name":"S","allow_rollup_hdrs":true,"deny_purge":true}', []),
    (
        "kv_like",
        "KV_b",
        '{"name":"KV_b","subjects":["$KV.b.>"],"max_msgs_per_subject":5,"allow_rollup_hdrs":true,'
        '"deny_delete":true,"allow_direct":true,"max_consumers":0,"duplicate_window":0,"allow_msg_ttl":true}',
        [],
    ),
    ("marker_ttl", "S", '{"name":"S","subject_delete_marker_ttl":2000000000}', []),
    ("marker_ttl_small", "S", '{"name":"S","subject_delete_marker_ttl":500000000}', []),
    ("pedantic_neg", "S", '{"name":"S","pedantic":true,"max_msgs":-5}', []),
    ("retention_wq", "S", '{"name":"S","retention":"workqueue"}', []),
    ("recreate_same", "S", '{"name":"S","subjects":["r"]}', ['{"name":"S","subjects":["r"]}']),
    (
        "recreate_different",
        "S",
        '{"name":"S","subjects":["r2"]}',
        ['{"name":"S","subjects":["r"]}'],
    ),
]

# (id, base body, update body)
UPDATE_CASES: list[tuple[str, str, str]] = [
    ("limits", '{"name":"U"}', '{"name":"U","max_msgs":5,"max_age":3600000000000}'),
    ("storage", '{"name":"U"}', '{"name":"U","storage":"memory"}'),
    ("to_workqueue", '{"name":"U"}', '{"name":"U","retention":"workqueue"}'),
    ("to_interest", '{"name":"U"}', '{"name":"U","retention":"interest"}'),
    (
        "seal",
        '{"name":"U","allow_rollup_hdrs":true,"max_age":3600000000000}',
        '{"name":"U","sealed":true,"allow_rollup_hdrs":true}',
    ),
    ("unseal", '{"name":"U"}', "__SEAL__"),
    ("cancel_deny_delete", '{"name":"U","deny_delete":true}', '{"name":"U"}'),
    ("cancel_deny_purge", '{"name":"U","deny_purge":true}', '{"name":"U"}'),
    ("mirror_change", '{"name":"U","mirror":{"name":"B"}}', '{"name":"U","mirror":{"name":"C"}}'),
    ("r3", '{"name":"U"}', '{"name":"U","num_replicas":3}'),
    ("name_mismatch", '{"name":"U"}', '{"name":"V"}'),
    ("not_found", "", '{"name":"U"}'),
    ("bad_json", '{"name":"U"}', '{"name":'),
    ("ttl_disable", '{"name":"U","allow_msg_ttl":true}', '{"name":"U"}'),
    ("subjects", '{"name":"U"}', '{"name":"U","subjects":["u.>"]}'),
]


STORE_RACE_RETRIES = 20


def _name_of(body: str) -> str:
    return str(json.loads(body)["name"])


async def _collect(url: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    out: dict[str, Any] = {}

    async def req(subject: str, body: str) -> dict[str, Any]:
        # nats-server removes a deleted stream's files asynchronously; creating
        # the same name right after can hit 10049 "error creating store for
        # stream".  That is the reference racing itself: retry a few times.
        for _attempt in range(STORE_RACE_RETRIES):
            try:
                msg = await nc.request(subject, body.encode(), timeout=REQUEST_TIMEOUT_S)
            except nats.errors.TimeoutError:
                return {"timeout": subject}
            resp = dict(json.loads(msg.data))
            if resp.get("error", {}).get("err_code") != 10049:
                return resp
            await asyncio.sleep(0.05)
        return resp

    async def delete_all() -> None:
        names = await req("$JS.API.STREAM.NAMES", "")
        for name in names.get("streams") or []:
            await req(f"$JS.API.STREAM.DELETE.{name}", "")

    try:
        for cid, name, body, existing in CREATE_CASES:
            for ebody in existing:
                r = await req(f"$JS.API.STREAM.CREATE.{_name_of(ebody)}", ebody)
                assert "error" not in r, r
            out[f"create:{cid}"] = await req(f"$JS.API.STREAM.CREATE.{name}", body)
            await delete_all()
        for cid, base, upd in UPDATE_CASES:
            if base:
                r = await req("$JS.API.STREAM.CREATE.U", base)
                assert "error" not in r, r
                if upd == "__SEAL__":
                    sealed = dict(r["config"], sealed=True)
                    r = await req("$JS.API.STREAM.UPDATE.U", json.dumps(sealed))
                    assert "error" not in r, r
                    upd = json.dumps(dict(sealed, sealed=False))
            out[f"update:{cid}"] = await req("$JS.API.STREAM.UPDATE.U", upd)
            await delete_all()
    finally:
        await nc.close()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    wd: Path = tmp_path_factory.mktemp("ref-js")
    server: ServerProcess = start_server("reference", ["-js", "-sd", str(wd / "store")], workdir=wd)
    try:
        yield run(lambda: _collect(server.url))
    finally:
        server.stop()


def _ref_config(resp: dict[str, Any]) -> str:
    cfg = dict(resp["config"])
    # the stored config: the answer's dynamic _nats.ver/_nats.level (the servers'
    # own version and level) dropped; _nats.req.level is compared
    dynamic = ("_nats.ver", "_nats.level")
    meta = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in dynamic}
    if meta:
        cfg["metadata"] = dict(sorted(meta.items()))
    else:
        cfg.pop("metadata", None)
    return go_json(cfg)


def _existing(bodies: list[str]) -> list[StreamConfig]:
    return [parse_create(_name_of(b), b.encode()) for b in bodies]


def _ours_create(name: str, body: str, existing: list[str]) -> StreamConfig:
    others = _existing(existing)
    by_name = {c.name: c for c in others}
    cfg = parse_create(name, body.encode(), lookup=by_name.get)
    if cfg.name in by_name:
        check_recreate(cfg, by_name[cfg.name])
        return by_name[cfg.name]
    check_overlap(cfg, others)
    return cfg


def _compare(ref: dict[str, Any], ours: StreamConfig | JSApiError) -> None:
    if "error" in ref:
        assert isinstance(ours, JSApiError), (
            f"reference failed with {ref['error']}, trijet accepted {ours}"
        )
        assert ours.to_dict() == ref["error"]
    else:
        assert not isinstance(ours, JSApiError), f"reference accepted, trijet failed: {ours!r}"
        assert go_json(ours.to_dict()) == _ref_config(ref)


@pytest.mark.parametrize(
    ("cid", "name", "body", "existing"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES]
)
def test_create(
    reference: dict[str, Any], cid: str, name: str, body: str, existing: list[str]
) -> None:
    ref = reference[f"create:{cid}"]
    assert ref["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    try:
        ours: StreamConfig | JSApiError = _ours_create(name, body, existing)
    except JSApiError as exc:
        ours = exc
    _compare(ref, ours)


def _ours_update(base: str, upd: str) -> StreamConfig:
    if upd == "__SEAL__":
        old = parse_create("U", base.encode())
        sealed = json.dumps(dict(old.to_dict(), sealed=True))
        new, _ = parse_update("U", sealed.encode())
        old = check_update(old, new)
        upd = json.dumps(dict(old.to_dict(), sealed=False))
    else:
        old = parse_create("U", base.encode()) if base else None
    new, _ = parse_update("U", upd.encode())
    if old is None:
        raise JSApiError(STREAM_NOT_FOUND)
    return check_update(old, new)


@pytest.mark.parametrize(("cid", "base", "upd"), UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update(reference: dict[str, Any], cid: str, base: str, upd: str) -> None:
    ref = reference[f"update:{cid}"]
    assert ref["type"] == "io.nats.jetstream.api.v1.stream_update_response"
    try:
        ours: StreamConfig | JSApiError = _ours_update(base, upd)
    except JSApiError as exc:
        ours = exc
    _compare(ref, ours)


def test_reference_ran_every_case(reference: dict[str, Any]) -> None:
    assert len(reference) == len(CREATE_CASES) + len(UPDATE_CASES)
    assert asyncio.iscoroutinefunction(_collect)
