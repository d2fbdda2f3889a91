"""node/jsapi: error catalogue, STREAM.CREATE/UPDATE parsing and validation, renderers.

The byte-for-byte comparison with the reference server is in
``tests/compat/test_js_streamconfig_compat.py``; these are the pure units.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.model import (
    Discard,
    Placement,
    RePublish,
    Retention,
    Storage,
    StreamConfig,
    StreamSource,
)
from node.jsapi import errors
from node.jsapi.errors import CATALOGUE, JSApiError, go_json
from node.jsapi.render import (
    error_response,
    pub_ack,
    pub_ack_error,
    rfc3339_ns,
    state_dict,
    stream_create_response,
    stream_info_dict,
)
from node.jsapi.streamconfig import (
    check_overlap,
    check_recreate,
    check_update,
    configs_overlap,
    decode_request,
    parse_create,
    parse_update,
    subjects_overlap,
    validate_mapping,
)
from store.api import StreamState


def err_of(name: str, body: str, **kw: bool) -> tuple[int, int, str]:
    with pytest.raises(JSApiError) as ei:
        parse_create(name, body.encode(), **kw)
    return ei.value.code, ei.value.err_code, ei.value.description


# ------------------------------------------------------------------ errors


def test_catalogue() -> None:
    assert len(CATALOGUE) == 226
    assert errors.STREAM_NOT_FOUND == 10059 and CATALOGUE[10059] == (
        404,
        "stream not found",
        "JSStreamNotFoundErr",
    )
    e = JSApiError(errors.STREAM_INVALID_CONFIG, err="max age needs to be >= 100ms")
    assert (e.code, e.err_code) == (500, 10052)
    assert (
        e.error_json()
        == '{"code":500,"err_code":10052,"description":"max age needs to be \\u003e= 100ms"}'
    )
    assert (
        JSApiError(errors.STREAM_WRONG_LAST_SEQUENCE, seq=7).description == "wrong last sequence: 7"
    )


# ------------------------------------------------------------------ defaults and normalisation


def test_defaults() -> None:
    cfg = parse_create("S", b'{"name":"S"}')
    assert cfg == StreamConfig(name="S", subjects=("S",), metadata=(("_nats.req.level", "0"),))
    assert (cfg.max_msgs, cfg.num_replicas, cfg.duplicate_window_ns, cfg.storage) == (
        -1,
        1,
        120 * 10**9,
        Storage.FILE,
    )


def test_zero_and_negative_limits_become_minus_one() -> None:
    cfg = parse_create(
        "S", b'{"name":"S","max_msgs":0,"max_bytes":-5,"max_consumers":0,"max_msg_size":-2}'
    )
    assert (cfg.max_msgs, cfg.max_bytes, cfg.max_consumers, cfg.max_msg_size) == (-1, -1, -1, -1)


def test_duplicate_window_capped_by_max_age() -> None:
    assert (
        parse_create("S", b'{"name":"S","max_age":60000000000}').duplicate_window_ns == 60 * 10**9
    )
    assert (
        parse_create("S", b'{"name":"S","max_age":600000000000}').duplicate_window_ns == 120 * 10**9
    )


def test_mirror_gets_no_subjects_and_no_window() -> None:
    cfg = parse_create("S", b'{"name":"S","mirror":{"name":"B"}}')
    assert (
        cfg.subjects == () and cfg.duplicate_window_ns == 0 and cfg.mirror == StreamSource(name="B")
    )


def test_mirror_direct_inherited_from_origin() -> None:
    origin = StreamConfig(name="B", subjects=("B",), allow_direct=True)
    cfg = parse_create("S", b'{"name":"S","mirror":{"name":"B"}}', lookup={"B": origin}.get)
    assert cfg.mirror_direct


def test_republish_source_defaults_to_all() -> None:
    cfg = parse_create("S", b'{"name":"S","subjects":["a.>"],"republish":{"dest":"r.>"}}')
    assert cfg.republish == RePublish(src=">", dest="r.>")


def test_empty_placement_dropped_and_enums() -> None:
    cfg = parse_create("S", b'{"name":"S","placement":{},"retention":"interest","discard":"NEW"}')
    assert (
        cfg.placement is None and cfg.retention is Retention.INTEREST and cfg.discard is Discard.NEW
    )
    cfg = parse_create("S", b'{"name":"S","placement":{"tags":["x"]}}')
    assert cfg.placement == Placement(tags=("x",))


def test_marker_ttl_turns_on_ttl_and_rollup() -> None:
    cfg = parse_create(
        "S", b'{"name":"S","subject_delete_marker_ttl":1000000000,"deny_purge":false}'
    )
    assert cfg.allow_msg_ttl and cfg.allow_rollup and not cfg.deny_purge


def test_metadata_versioning_keys() -> None:
    """Dynamic keys dropped, the required level computed (a sent one overwritten),
    other ``_nats.*`` keys kept, as nats-server does."""
    body = b'{"name":"S","metadata":{"_nats.req.level":"1","_nats.ver":"x","_nats.level":"9",'
    cfg = parse_create("S", body + b'"_nats.foo":"y","a":"b"}}')
    assert cfg.metadata == (("_nats.foo", "y"), ("_nats.req.level", "0"), ("a", "b"))
    ttl = parse_create("S", b'{"name":"S","allow_msg_ttl":true}')
    assert ttl.metadata == (("_nats.req.level", "1"),)
    markers = parse_create("S", b'{"name":"S","subject_delete_marker_ttl":1000000000}')
    assert dict(markers.metadata)["_nats.req.level"] == "1"
    check_recreate(cfg, dataclasses.replace(cfg, metadata=(("_nats.foo", "y"), ("a", "b"))))


def test_case_insensitive_keys_and_concatenated_values() -> None:
    assert parse_create("S", b'{"NAME":"S"}').name == "S"
    assert parse_create("S", b'{"name":"X","max_msgs":3} {"name":"S"}').max_msgs == 3


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", (400, 10056, "stream name in subject does not match request")),
        (b'{"name":', (400, 10025, "invalid JSON: unexpected EOF")),
        (
            b"[1]",
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal array into Go value of type server.StreamConfigRequest",
            ),
        ),
        (b'{"name":"S","x":1}', (400, 10025, 'invalid JSON: json: unknown field "x"')),
        (
            b'{"name":"S","max_age":"1s"}',
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal string into Go struct field StreamConfigRequest.max_age of type time.Duration",
            ),
        ),
        (
            b'{"name":"S","max_msgs":1e3}',
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal number 1e3 into Go struct field StreamConfigRequest.max_msgs of type int64",
            ),
        ),
        (
            b'{"name":"S","metadata":{"a":1}}',
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal number into Go struct field StreamConfigRequest.metadata.a of type string",
            ),
        ),
        (
            b'{"name":"S","storage":"disk"}',
            (400, 10025, 'invalid JSON: can not unmarshal "\\"disk\\""'),
        ),
        (
            b'{"name":"S","compression":5}',
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal number into Go value of type string",
            ),
        ),
        (
            b'{"name":"S","no_ack":tru}',
            (
                400,
                10025,
                "invalid JSON: invalid character '}' in literal true (expecting 'e') at offset 25",
            ),
        ),
        (b'{"name":"S","max_age":50000000}', (500, 10052, "max age needs to be >= 100ms")),
        (
            b'{"name":"S","max_age":1000000000,"duplicate_window":2000000000}',
            (500, 10052, "duplicates window can not be larger then max age"),
        ),
        (
            b'{"name":"S","sealed":true}',
            (500, 10052, "stream configuration for create can not be sealed"),
        ),
        (
            b'{"name":"S","num_replicas":3}',
            (500, 10074, "replicas > 1 not supported in non-clustered mode"),
        ),
        (b'{"name":"S","num_replicas":-1}', (400, 10133, "replicas count cannot be negative")),
        (
            b'{"name":"S","subjects":["$JS.API.>"]}',
            (500, 10052, "subjects that overlap with jetstream api require no-ack to be true"),
        ),
        (
            b'{"name":"S","subjects":["$SYS.>"]}',
            (500, 10052, "subjects that overlap with system api require no-ack to be true"),
        ),
        (b'{"name":"S","subjects":["a b"]}', (500, 10052, "invalid subject")),
        (b'{"name":"S","subjects":["a","a"]}', (500, 10052, 'subject "a" overlaps with "a"')),
        (
            b'{"name":"S","discard_new_per_subject":true}',
            (500, 10052, "discard new per subject requires discard new policy to be set"),
        ),
        (
            b'{"name":"S","mirror":{"name":"B"},"subjects":["x"]}',
            (400, 10034, "stream mirrors can not contain subjects"),
        ),
        (
            b'{"name":"S","mirror":{"name":"B"},"first_seq":1}',
            (400, 10143, "stream mirrors can not have first sequence configured"),
        ),
        (
            b'{"name":"S","sources":[{"name":"B"},{"name":"B"}]}',
            (400, 10140, "duplicate source configuration detected"),
        ),
        (
            b'{"name":"S","subject_transform":{"src":"a.*","dest":"b.$2"}}',
            (
                400,
                10156,
                "stream transform: invalid mapping destination: wildcard index out of range"
                " in $2: [2]",
            ),
        ),
        (
            b'{"name":"S","pedantic":true,"max_bytes":-3}',
            (400, 10157, "pedantic mode: max_bytes must be set to -1"),
        ),
    ],
)
def test_create_errors(body: bytes, expected: tuple[int, int, str]) -> None:
    assert err_of("S", body.decode()) == expected


def test_name_rules() -> None:
    assert err_of("a>", '{"name":"a>"}')[1] == 10052
    assert err_of("a/b", '{"name":"a/b"}') == (
        400,
        10128,
        "Stream name can not contain path separators",
    )
    assert (
        err_of("x" * 256, '{"name":"' + "x" * 256 + '"}')[2]
        == "stream name is too long, maximum allowed is 255"
    )


def test_clustered_allows_r3() -> None:
    assert parse_create("S", b'{"name":"S","num_replicas":3}', clustered=True).num_replicas == 3


def test_overlap_and_recreate() -> None:
    a = parse_create("A", b'{"name":"A","subjects":["a.>"]}')
    b = parse_create("B", b'{"name":"B","subjects":["a.b"]}')
    with pytest.raises(JSApiError) as ei:
        check_overlap(b, [a])
    assert ei.value.err_code == 10065
    check_overlap(a, [a])  # itself is not a conflict
    assert subjects_overlap(["x.*"], ["x.y", "z"]) and not subjects_overlap(["x.*"], ["x.y.z"])
    check_recreate(a, a)
    with pytest.raises(JSApiError) as ei:
        check_recreate(b, a)
    assert ei.value.err_code == 10058


def test_validate_mapping() -> None:
    assert validate_mapping("a.*", "b.$1") == ""
    assert validate_mapping("a.*.*", "b.{{wildcard(2)}}.{{partition(3,1)}}") == ""
    assert validate_mapping("a", "") == ""
    assert validate_mapping("a.*", "b.{{nope(1)}}") != ""


# ------------------------------------------------------------------ update


def upd(old_body: str, new_body: str, **kw: bool) -> StreamConfig:
    old = parse_create("U", old_body.encode())
    new, _ = parse_update("U", new_body.encode())
    return check_update(old, new, **kw)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (
            '{"name":"U"}',
            '{"name":"U","storage":"memory"}',
            "stream configuration update can not change storage type",
        ),
        (
            '{"name":"U"}',
            '{"name":"U","retention":"workqueue"}',
            "stream configuration update can not change retention policy to/from workqueue",
        ),
        (
            '{"name":"U","deny_delete":true}',
            '{"name":"U"}',
            "stream configuration update can not cancel deny message deletes",
        ),
        (
            '{"name":"U","deny_purge":true}',
            '{"name":"U"}',
            "stream configuration update can not cancel deny purge",
        ),
        (
            '{"name":"U","allow_msg_ttl":true}',
            '{"name":"U"}',
            "message TTL status can not be disabled",
        ),
    ],
)
def test_update_errors(old: str, new: str, reason: str) -> None:
    with pytest.raises(JSApiError) as ei:
        upd(old, new)
    assert (ei.value.err_code, ei.value.description) == (10052, reason)


def test_update_mirror_replicas_unseal() -> None:
    with pytest.raises(JSApiError) as ei:
        upd('{"name":"U","mirror":{"name":"B"}}', '{"name":"U","mirror":{"name":"C"}}')
    assert ei.value.err_code == 10055
    with pytest.raises(JSApiError) as ei:
        upd('{"name":"U"}', '{"name":"U","num_replicas":3}')
    assert ei.value.err_code == 10074
    assert upd('{"name":"U"}', '{"name":"U","num_replicas":3}', clustered=True).num_replicas == 3
    sealed = upd('{"name":"U","max_age":3600000000000}', '{"name":"U","sealed":true}')
    assert (sealed.max_age_ns, sealed.discard, sealed.deny_delete, sealed.deny_purge) == (
        0,
        Discard.NEW,
        True,
        True,
    )
    new, _ = parse_update("U", b'{"name":"U"}')
    with pytest.raises(JSApiError) as ei:
        check_update(sealed, new)
    assert ei.value.description == "stream configuration update can not unseal a sealed stream"
    assert (
        upd('{"name":"U"}', '{"name":"U","retention":"interest"}').retention is Retention.INTEREST
    )


def test_decode_keeps_go_zero_values() -> None:
    req = decode_request(b'{"name":"S","pedantic":true}')
    assert req.pedantic and req.config.max_msgs == 0 and req.config.num_replicas == 0


# ------------------------------------------------------------------ render


def test_rfc3339() -> None:
    assert rfc3339_ns(0) == "0001-01-01T00:00:00Z"
    assert rfc3339_ns(-62_135_596_800 * 10**9) == "0001-01-01T00:00:00Z"  # Go's zero time
    assert rfc3339_ns(-50_000_000_000 * 10**9) == "0385-07-25T07:06:40Z"
    assert rfc3339_ns(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789Z"
    assert rfc3339_ns(1_700_000_000_120_000_000) == "2023-11-14T22:13:20.12Z"
    assert rfc3339_ns(1_700_000_000_000_000_000) == "2023-11-14T22:13:20Z"


def test_state_and_info() -> None:
    assert go_json(state_dict(StreamState())) == (
        '{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":0,'
        '"last_ts":"0001-01-01T00:00:00Z","consumer_count":0}'
    )
    st = StreamState(
        msgs=2, bytes=9, first_seq=1, last_seq=3, num_subjects=2, num_deleted=1, deleted=(2,)
    )
    assert list(state_dict(st)) == [
        "messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts",
        "num_subjects", "num_deleted", "deleted", "consumer_count",
    ]  # fmt: skip
    cfg = StreamConfig(name="S", subjects=("s.>",))
    info = stream_info_dict(
        cfg, StreamState(), created_ns=0, ts_ns=0, cluster={"leader": "n1"}, paging=(0, 0, 0)
    )
    assert list(info) == ["total", "offset", "limit", "config", "created", "state", "cluster", "ts"]
    text = stream_create_response(stream_info_dict(cfg, StreamState(), created_ns=0, ts_ns=0))
    assert text.startswith(
        '{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"S",'
    )
    assert '"subjects":["s.\\u003e"]' in text and text.endswith(',"did_create":true}')


def test_pub_ack_and_errors() -> None:
    assert pub_ack("X", 1) == '{"stream":"X","seq":1}'
    assert pub_ack("C", 9, duplicate=True) == '{"stream":"C","seq":9,"duplicate": true}'
    assert pub_ack("D", 1, domain="hub") == '{"stream":"D","domain":"hub","seq":1}'
    e = JSApiError(errors.STREAM_NOT_MATCH)
    assert pub_ack_error(e, stream="PR") == (
        '{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"PR","seq":0}'
    )
    assert error_response(
        "io.nats.jetstream.api.v1.stream_info_response", JSApiError(errors.STREAM_NOT_FOUND)
    ) == (
        '{"type":"io.nats.jetstream.api.v1.stream_info_response",'
        '"error":{"code":404,"err_code":10059,"description":"stream not found"}}'
    )


_TOKEN = st.sampled_from(["a", "b", "*"])
_SUBJECT = st.builds(
    lambda toks, gt: ".".join(toks + ([">"] if gt else [])),
    st.lists(_TOKEN, min_size=1, max_size=3),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_SUBJECT, max_size=3), st.lists(st.lists(_SUBJECT, max_size=3), max_size=4))
def test_configs_overlap_is_subjects_overlap_over_the_others(
    mine: list[str], others: list[list[str]]
) -> None:
    # the meta machine's check in apply agrees with the proposer's rule
    want = any(subjects_overlap(mine, o) for o in others)
    assert configs_overlap({"subjects": mine}, [{"subjects": o} for o in others]) == want
