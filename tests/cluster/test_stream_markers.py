"""Subject delete markers and the ``Nats-Stream-Source`` publish check in the
stream state machine (rules observed on nats-server 2.15.1; the end-to-end
comparison with the reference is in ``tests/integration/test_jetstream_limits.py``)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cluster.headers import parse_headers
from cluster.ops import (
    Expire,
    OpError,
    StreamPolicy,
    UpdatePolicy,
    decode_policy,
    encode_policy,
)
from cluster.stream_fsm import (
    ApiErrorResult,
    ExpireResult,
    NewMessages,
    PubResult,
    Stored,
    StreamStateMachine,
)
from cluster.stream_fsm.markers import (
    go_duration_s,
    is_marker,
    marker_headers,
    plan_expiry,
    raise_msg_ttl,
)
from store.api import StreamStore
from store.file import FileStreamStore
from store.limits import StreamLimits
from store.memory import MemoryStreamStore
from tests.cluster.test_stream_fsm import SEC, T0, all_msgs, one, pub, publish

SOURCE_HDR = ApiErrorResult(400, 10227, "message stream source header is not allowed")
Make = Callable[..., StreamStateMachine]
MARKER_2S = b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n"


@pytest.fixture(params=["memory", "file"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    made: list[StreamStore] = []

    def factory(**kw: object) -> StreamStateMachine:
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore()
        else:
            store = FileStreamStore(tmp_path / f"s{len(made)}")
        made.append(store)
        kw.setdefault("allow_msg_ttl", True)
        kw.setdefault("allow_rollup_hdrs", True)
        kw.setdefault("subject_delete_marker_ttl_ns", 2 * SEC)
        return StreamStateMachine(store, StreamPolicy("S", **kw))  # type: ignore[arg-type]

    yield factory
    for s in made:
        s.close()


# --------------------------------------------------------------------------- pure helpers


def test_go_duration_of_whole_seconds() -> None:
    assert [go_duration_s(s) for s in (0, 1, 2, 59, 60, 90, 3600, 3661, 90000)] == [
        "0s", "1s", "2s", "59s", "1m0s", "1m30s", "1h0m0s", "1h1m1s", "25h0m0s",
    ]  # fmt: skip


def test_marker_header_block_is_the_references() -> None:
    assert marker_headers(2) == MARKER_2S
    assert b"Nats-TTL: 1m0s\r\n" in marker_headers(60)


def test_is_marker() -> None:
    assert is_marker(MARKER_2S)
    assert is_marker(b"NATS/1.0\r\nNats-Marker-Reason: Foo\r\n\r\n")
    assert is_marker(b"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n")
    assert not is_marker(b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n")
    assert not is_marker(b"NATS/1.0\r\nNats-Marker-Reason: \r\n\r\n")  # empty: not one
    assert not is_marker(b"NATS/1.0\r\nnats-marker-reason: MaxAge\r\n\r\n")  # case-sensitive
    assert not is_marker(b"")


def test_raise_msg_ttl_moves_the_header_to_the_end() -> None:
    assert (
        raise_msg_ttl(b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n", 2) == b"NATS/1.0\r\nNats-TTL: 2\r\n\r\n"
    )
    got = raise_msg_ttl(b"NATS/1.0\r\nNats-TTL: 1s\r\nA: b\r\nNats-TTL: 1\r\n\r\n", 5)
    assert got == b"NATS/1.0\r\nA: b\r\nNats-TTL: 5\r\n\r\n"


# --------------------------------------------------------------------------- Nats-Stream-Source


def test_client_source_header_is_refused(make: Make) -> None:
    f = make(subject_delete_marker_ttl_ns=0)
    assert one(f, "a", headers={"Nats-Stream-Source": "X 1 a"}) == SOURCE_HDR
    assert one(f, "a", headers={"Nats-Stream-Source": ""}) == PubResult("S", 1)  # empty: fine


def test_source_header_checked_after_expected_seqs_before_dedupe(make: Make) -> None:
    f = make(subject_delete_marker_ttl_ns=0)
    assert one(f, "a", headers={"Nats-Msg-Id": "m1"}) == PubResult("S", 1)
    src = {"Nats-Stream-Source": "X 1 a"}
    assert one(f, "a", headers={**src, "Nats-Msg-Id": "m1"}) == SOURCE_HDR
    wrong = one(f, "a", headers={**src, "Nats-Expected-Last-Sequence": "9"})
    assert wrong == ApiErrorResult(400, 10071, "wrong last sequence: 1")
    assert one(f, "a", headers={**src, "Nats-Rollup": "bogus"}) == SOURCE_HDR
    assert one(f, "a", headers={**src, "Nats-TTL": "bogus"}) == SOURCE_HDR


def test_expected_last_sequence_beats_a_duplicate(make: Make) -> None:
    f = make(subject_delete_marker_ttl_ns=0)
    assert one(f, "a", headers={"Nats-Msg-Id": "m1"}) == PubResult("S", 1)
    h = {"Nats-Msg-Id": "m1", "Nats-Expected-Last-Sequence": "5"}
    assert one(f, "a", headers=h) == ApiErrorResult(400, 10071, "wrong last sequence: 1")
    h = {"Nats-Msg-Id": "m1", "Nats-Expected-Last-Subject-Sequence": "5"}
    assert one(f, "a", headers=h) == ApiErrorResult(400, 10071, "wrong last sequence: 1")
    h = {"Nats-Msg-Id": "m1", "Nats-Expected-Last-Msg-Id": "zz"}
    assert one(f, "a", headers=h) == PubResult("S", 1, duplicate=True)


# --------------------------------------------------------------------------- TTL floor


def test_short_ttl_raised_to_marker_ttl(make: Make) -> None:
    f = make()
    one(f, "a", headers={"Nats-TTL": "1s"})
    one(f, "b", headers={"Nats-TTL": "5"})
    one(f, "c", headers={"Nats-TTL": "never"})
    got = [m.headers for m in all_msgs(f.store)]
    assert got == [
        b"NATS/1.0\r\nNats-TTL: 2\r\n\r\n",
        b"NATS/1.0\r\nNats-TTL: 5\r\n\r\n",
        b"NATS/1.0\r\nNats-TTL: never\r\n\r\n",
    ]


def test_ttl_not_raised_with_one_message_per_subject(make: Make) -> None:
    f = make(limits=StreamLimits(max_msgs_per_subject=1))
    one(f, "a", headers={"Nats-TTL": "1s"})
    assert all_msgs(f.store)[0].headers == b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n"


# --------------------------------------------------------------------------- expiry


def test_max_age_leaves_one_marker_per_subject(make: Make) -> None:
    f = make(limits=StreamLimits(max_age_ns=3 * SEC))
    publish(f, pub("b", ts=T0), pub("b", ts=T0), pub("c", ts=T0), pub("e", ts=T0))
    one(f, "f", headers={"Nats-Marker-Reason": "Foo"}, ts=T0)  # a marker gets no marker
    now = T0 + 3 * SEC
    out = f.apply_op(Expire(now))
    assert out.results == (ExpireResult(5),)
    assert out.effects == (NewMessages(8),)
    got = [(m.seq, m.subject, m.headers, m.payload, m.ts_ns) for m in all_msgs(f.store)]
    assert got == [
        (6, "b", MARKER_2S, b"", now),
        (7, "c", MARKER_2S, b"", now),
        (8, "e", MARKER_2S, b"", now),
    ]
    assert f.last_msg_id == ""


def test_markers_expire_without_markers(make: Make) -> None:
    f = make()
    one(f, "a", headers={"Nats-TTL": "1s"}, ts=T0)  # raised to 2
    out = f.apply_op(Expire(T0 + 2 * SEC))
    assert out.results == (ExpireResult(1),)
    (marker,) = all_msgs(f.store)
    assert (marker.seq, marker.headers) == (2, MARKER_2S)
    assert f.store.next_expiry_ns() == T0 + 4 * SEC  # the marker's own TTL
    out = f.apply_op(Expire(T0 + 4 * SEC))
    assert out.results == (ExpireResult(1),) and out.effects == ()
    st = f.store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 3, 2)


def test_no_marker_while_the_subject_keeps_a_message(make: Make) -> None:
    f = make(limits=StreamLimits(max_age_ns=3 * SEC))
    one(f, "a", ts=T0)
    one(f, "a", headers={"Nats-TTL": "never"}, ts=T0)
    out = f.apply_op(Expire(T0 + 5 * SEC))
    assert out.results == (ExpireResult(1),) and out.effects == ()
    assert [m.seq for m in all_msgs(f.store)] == [2]


def test_marker_reported_for_republish(make: Make) -> None:
    f = make()
    f.report_stored = True
    one(f, "a", headers={"Nats-TTL": "2s"}, ts=T0)
    out = f.apply_op(Expire(T0 + 2 * SEC))
    assert Stored(2, "a", MARKER_2S, b"", T0 + 2 * SEC, 1) in out.effects


def test_plan_counts_earlier_due_messages_out(make: Make) -> None:
    f = make()
    publish(f, *(pub(s, ts=T0) for s in ("a", "a", "b", "a")))
    steps = plan_expiry(f.store, [1, 2, 3])
    assert [(s.seq, s.marker) for s in steps] == [(1, False), (2, False), (3, True)]
    steps = plan_expiry(f.store, [1, 2, 3, 4])
    assert [(s.seq, s.marker) for s in steps] == [(1, False), (2, False), (3, True), (4, True)]


def test_many_subjects_expire_together(make: Make) -> None:
    f = make(limits=StreamLimits(max_age_ns=SEC))
    publish(f, *(pub(f"s.{i}", ts=T0) for i in range(40)))
    out = f.apply_op(Expire(T0 + SEC))
    assert out.results == (ExpireResult(40),)
    msgs = all_msgs(f.store)
    assert [m.subject for m in msgs] == [f"s.{i}" for i in range(40)]
    assert all(parse_headers(m.headers).get("Nats-Marker-Reason") == "MaxAge" for m in msgs)


def test_without_marker_ttl_expiry_only_removes(make: Make) -> None:
    f = make(subject_delete_marker_ttl_ns=0, limits=StreamLimits(max_age_ns=SEC))
    one(f, "a", ts=T0)
    out = f.apply_op(Expire(T0 + SEC))
    assert out.results == (ExpireResult(1),) and all_msgs(f.store) == []


def test_marker_ttl_can_be_turned_on_by_update(make: Make) -> None:
    f = make(subject_delete_marker_ttl_ns=0, limits=StreamLimits(max_age_ns=SEC))
    one(f, "a", ts=T0)
    pol = StreamPolicy(
        "S",
        limits=StreamLimits(max_age_ns=SEC),
        allow_msg_ttl=True,
        allow_rollup_hdrs=True,
        subject_delete_marker_ttl_ns=60 * SEC,
    )
    f.apply_op(UpdatePolicy(pol))
    f.apply_op(Expire(T0 + SEC))
    (m,) = all_msgs(f.store)
    assert b"Nats-TTL: 1m0s\r\n" in m.headers


# --------------------------------------------------------------------------- policy encoding


def test_policy_encoding_without_markers_is_unchanged() -> None:
    old = encode_policy(StreamPolicy("S"))
    assert "subject_delete_marker_ttl_ns" not in old
    assert decode_policy(old) == StreamPolicy("S")
    p = StreamPolicy("S", allow_msg_ttl=True, subject_delete_marker_ttl_ns=5 * SEC)
    assert decode_policy(encode_policy(p)) == p
    with pytest.raises(OpError):
        decode_policy({**old, "bogus": 1})
    with pytest.raises(OpError):
        decode_policy({**old, "subject_delete_marker_ttl_ns": -1})


def test_snapshot_keeps_marker_policy(make: Make) -> None:
    f = make()
    one(f, "a")
    g = make(subject_delete_marker_ttl_ns=0)
    g.restore(io.BytesIO(f.snapshot()))
    assert g.policy.subject_delete_marker_ttl_ns == 2 * SEC
