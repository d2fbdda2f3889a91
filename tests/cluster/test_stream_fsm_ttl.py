"""Per-message TTL in the stream state machine: header checks in nats-server's
order (observed on 2.15.1) and expiry decided in apply by ``Expire(now_ns)``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.ops import Expire, StreamPolicy, UpdatePolicy
from cluster.stream_fsm import (
    ApiErrorResult,
    ExpireResult,
    PubResult,
    Stored,
    StreamStateMachine,
    parse_msg_ttl_ns,
    store_limits,
)
from cluster.stream_fsm.machine import HEADER_BYTES_MAX
from store.api import StreamStore
from store.file import FileStreamStore
from store.limits import StreamLimits
from store.memory import MemoryStreamStore
from tests.cluster.test_stream_fsm import SEC, T0, all_msgs, one, pub, publish

TTL_INVALID = ApiErrorResult(400, 10165, "invalid per-message TTL")
TTL_DISABLED = ApiErrorResult(400, 10166, "per-message TTL is disabled")


@pytest.fixture(params=["memory", "file"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def stores(kind: str, tmp_path: Path) -> Iterator[list[StreamStore]]:
    made: list[StreamStore] = []
    yield made
    for s in made:
        s.close()


def fsm(kind: str, tmp_path: Path, made: list[StreamStore], **kw: object) -> StreamStateMachine:
    store: StreamStore
    if kind == "memory":
        store = MemoryStreamStore()
    else:
        store = FileStreamStore(tmp_path / f"s{len(made)}")
    made.append(store)
    return StreamStateMachine(store, StreamPolicy("S", **kw))  # type: ignore[arg-type]


def test_parse_is_case_insensitive_never_and_whole_seconds() -> None:
    assert parse_msg_ttl_ns("NEVER") == -1
    assert parse_msg_ttl_ns("1.9s") == SEC
    assert parse_msg_ttl_ns("+2s") == 2 * SEC
    assert parse_msg_ttl_ns("0") is None


def test_store_limits_follow_allow_msg_ttl() -> None:
    assert store_limits(StreamPolicy("S")).msg_ttl is False
    assert store_limits(StreamPolicy("S", allow_msg_ttl=True)).msg_ttl is True
    assert store_limits(StreamPolicy("S", limits=StreamLimits(max_msgs=0))).max_msgs == -1


@pytest.mark.parametrize(
    ("value", "enabled", "want"),
    [
        ("bogus", False, TTL_INVALID),  # invalid beats disabled (reference)
        ("0", False, TTL_INVALID),
        ("500ms", False, TTL_INVALID),
        ("1s", False, TTL_DISABLED),
        ("never", False, TTL_DISABLED),
        ("bogus", True, TTL_INVALID),
        ("1e3", True, TTL_INVALID),
        ("1.5s", True, PubResult("S", 1)),
        ("NEVER", True, PubResult("S", 1)),
        ("2", True, PubResult("S", 1)),
    ],
)
def test_ttl_header_answers(
    kind: str, tmp_path: Path, stores: list[StreamStore], value: str, enabled: bool, want: object
) -> None:
    f = fsm(kind, tmp_path, stores, allow_msg_ttl=enabled)
    assert one(f, "a", headers={"Nats-TTL": value}) == want


def test_ttl_disabled_is_decided_before_dedupe_and_invalid_after_size(
    kind: str, tmp_path: Path, stores: list[StreamStore]
) -> None:
    f = fsm(kind, tmp_path, stores, limits=StreamLimits(max_msg_size=100))
    assert one(f, "a", headers={"Nats-Msg-Id": "m"}) == PubResult("S", 1)
    # a valid TTL on a stream without allow_msg_ttl: refused even as a duplicate
    assert one(f, "a", headers={"Nats-Msg-Id": "m", "Nats-TTL": "5s"}) == TTL_DISABLED
    # an invalid one loses to the size check
    big = one(f, "a", payload=b"x" * 200, headers={"Nats-TTL": "bogus"})
    assert big == ApiErrorResult(400, 10054, "message size exceeds maximum allowed")
    assert HEADER_BYTES_MAX == 65535


def test_expire_removes_ttl_messages_in_apply(
    kind: str, tmp_path: Path, stores: list[StreamStore]
) -> None:
    f = fsm(kind, tmp_path, stores, allow_msg_ttl=True)
    publish(
        f,
        pub("a", ts=T0, headers={"Nats-TTL": "1s"}),
        pub("b", ts=T0, headers={"Nats-TTL": "never"}),
        pub("c", ts=T0),
    )
    assert f.store.next_expiry_ns() == T0 + SEC
    assert f.apply_op(Expire(T0 + SEC - 1)).results == (ExpireResult(0),)
    assert f.apply_op(Expire(T0 + SEC)).results == (ExpireResult(1),)
    assert [m.subject for m in all_msgs(f.store)] == ["b", "c"]
    assert f.store.next_expiry_ns() is None


def test_enabling_ttl_by_update_reaches_the_store(
    kind: str, tmp_path: Path, stores: list[StreamStore]
) -> None:
    f = fsm(kind, tmp_path, stores)
    assert f.store.limits.msg_ttl is False
    f.apply_op(UpdatePolicy(StreamPolicy("S", allow_msg_ttl=True)))
    assert f.store.limits.msg_ttl is True
    assert one(f, "a", ts=T0, headers={"Nats-TTL": "3"}) == PubResult("S", 1)
    assert f.store.next_expiry_ns() == T0 + 3 * SEC


def test_max_age_and_ttl_together(kind: str, tmp_path: Path, stores: list[StreamStore]) -> None:
    f = fsm(kind, tmp_path, stores, allow_msg_ttl=True, limits=StreamLimits(max_age_ns=2 * SEC))
    publish(
        f,
        pub("a", ts=T0, headers={"Nats-TTL": "10s"}),
        pub("b", ts=T0, headers={"Nats-TTL": "never"}),
    )
    assert f.apply_op(Expire(T0 + 2 * SEC)).results == (ExpireResult(1),)
    assert [m.subject for m in all_msgs(f.store)] == ["b"]


# --------------------------------------------------------------------------- Stored (republish)


def test_stored_effect_carries_the_subject_last_seq(
    kind: str, tmp_path: Path, stores: list[StreamStore]
) -> None:
    f = fsm(kind, tmp_path, stores, limits=StreamLimits(max_msgs_per_subject=1))
    assert [e for e in publish(f, pub("a")).effects if isinstance(e, Stored)] == []
    f.report_stored = True
    out = publish(
        f,
        pub("a", b"1", headers={"X": "1"}),
        pub("b", b"2"),
        pub("a", b"3", headers={"Nats-Msg-Id": "d"}),
        pub("a", b"3", headers={"Nats-Msg-Id": "d"}),  # duplicate: nothing stored
    )
    stored = [e for e in out.effects if isinstance(e, Stored)]
    # the previous message on the subject is looked up before the append (the
    # per-subject limit then removes it)
    assert [(e.seq, e.subject, e.payload, e.subject_last_seq) for e in stored] == [
        (2, "a", b"1", 1),
        (3, "b", b"2", 0),
        (4, "a", b"3", 2),
    ]
    assert stored[0].headers == b"NATS/1.0\r\nX: 1\r\n\r\n"
    assert stored[1].ts_ns == T0
