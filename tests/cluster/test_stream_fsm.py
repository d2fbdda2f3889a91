"""cluster.stream_fsm: every publish rule, purge/delete/update/expire, snapshot, determinism.

Scenario tests run over ``MemoryStreamStore`` and ``FileStreamStore`` (tmp dir);
the hypothesis properties run over memory stores (plus one memory-vs-file run).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.headers import encode_headers
from cluster.ops import (
    DeleteMsg,
    Expire,
    Op,
    OpDecodeError,
    Publish,
    Purge,
    StreamMsg,
    StreamPolicy,
    UpdatePolicy,
    encode_op,
)
from cluster.stream_fsm import (
    ApiErrorResult,
    ApplyOutcome,
    DeleteResult,
    ExpireResult,
    NewMessages,
    PolicyResult,
    PubResult,
    Purged,
    PurgeResult,
    StreamSnapshotError,
    StreamStateMachine,
    go_quote,
    parse_msg_ttl_ns,
)
from store.api import StoredMsg, StreamStore
from store.file import FileStreamStore
from store.limits import Accounting, Discard, StreamLimits
from store.memory import MemoryStreamStore

SEC = 1_000_000_000
WINDOW = 120 * SEC
T0 = 1_700_000_000 * SEC

MakeFsm = Callable[..., StreamStateMachine]


@pytest.fixture(params=["memory", "file"])
def make_fsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeFsm]:
    stores: list[StreamStore] = []
    counter = iter(range(1000))

    def factory(name: str = "S", **kw: object) -> StreamStateMachine:
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore()
        else:
            store = FileStreamStore(tmp_path / f"s{next(counter)}", segment_bytes_max=512)
        stores.append(store)
        return StreamStateMachine(store, StreamPolicy(name, **kw))  # type: ignore[arg-type]

    yield factory
    for s in stores:
        s.close()


def pub(
    subject: str = "a",
    payload: bytes = b"x",
    ts: int = T0,
    headers: Mapping[str, str] | None = None,
    raw: bytes | None = None,
) -> Publish:
    hdr = raw if raw is not None else (encode_headers(headers.items()) if headers else None)
    return Publish(subject, hdr, payload, ts)


def publish(fsm: StreamStateMachine, *msgs: Publish) -> ApplyOutcome:
    return fsm.apply_op(StreamMsg(msgs))


def one(fsm: StreamStateMachine, *args: object, **kw: object) -> object:
    out = publish(fsm, pub(*args, **kw))  # type: ignore[arg-type]
    assert len(out.results) == 1
    return out.results[0]


def err(code: int, err_code: int, desc: str) -> ApiErrorResult:
    return ApiErrorResult(code, err_code, desc)


def all_msgs(store: StreamStore) -> list[StoredMsg]:
    out = []
    seq = 1
    while (m := store.load_next(">", seq)) is not None:
        out.append(m)
        seq = m.seq + 1
    return out


def seqs(store: StreamStore) -> list[int]:
    return [m.seq for m in all_msgs(store)]


# --------------------------------------------------------------------------- basics


def test_sequences_and_new_messages_effect(make_fsm: MakeFsm) -> None:
    f = make_fsm("ORDERS")
    out = publish(f, pub("a"), pub("b"))
    assert out.results == (PubResult("ORDERS", 1), PubResult("ORDERS", 2))
    assert out.effects == (NewMessages(2),)
    m = f.store.load(2)
    assert (m.subject, m.headers, m.payload, m.ts_ns) == ("b", b"", b"x", T0)


def test_headers_stored_verbatim(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    raw = b"NATS/1.0\r\nX-Custom:  v \r\nX-Custom: w\r\n\r\n"
    assert one(f, "a", raw=raw) == PubResult("S", 1)
    assert f.store.load(1).headers == raw


def test_malformed_header_block_is_stored_not_fatal(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    raw = b"garbage\r\nno colon here\r\nNats-Msg-Id: m1\r\n"
    assert one(f, "a", raw=raw) == PubResult("S", 1)
    # The id is still honoured, as nats-server's byte scan would find it.
    assert one(f, "a", raw=raw) == PubResult("S", 1, duplicate=True)


def test_batch_returns_per_publish_results_in_order(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    out = publish(
        f,
        pub("a", headers={"Nats-Msg-Id": "1"}),
        pub("a", headers={"Nats-Expected-Stream": "OTHER"}),
        pub("b"),
        pub("a", headers={"Nats-Msg-Id": "1"}),
        pub("c", headers={"Nats-Expected-Last-Sequence": "2"}),
    )
    assert out.results == (
        PubResult("S", 1),
        err(400, 10060, "expected stream does not match"),
        PubResult("S", 2),
        PubResult("S", 1, duplicate=True),
        PubResult("S", 3),
    )
    assert out.effects == (NewMessages(3),)


def test_batch_with_nothing_stored_has_no_effect(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "a", headers={"Nats-Msg-Id": "1"})
    out = publish(
        f, pub("a", headers={"Nats-Msg-Id": "1"}), pub("a", headers={"Nats-Expected-Stream": "X"})
    )
    assert out.effects == ()


# --------------------------------------------------------------------------- dedupe


def test_dedupe_inside_window(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=WINDOW)
    h = {"Nats-Msg-Id": "id-1"}
    assert one(f, "a", ts=T0, headers=h) == PubResult("S", 1)
    assert one(f, "b", ts=T0 + 1, headers={"Nats-Msg-Id": "id-2"}) == PubResult("S", 2)
    assert one(f, "a", ts=T0 + WINDOW - 1, headers=h) == PubResult("S", 1, duplicate=True)
    assert seqs(f.store) == [1, 2]
    # A duplicate does not change the last msg id.
    assert f.last_msg_id == "id-2"


def test_dedupe_outside_window_stores_again(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=WINDOW)
    h = {"Nats-Msg-Id": "id-1"}
    assert one(f, "a", ts=T0, headers=h) == PubResult("S", 1)
    # now - ts >= window: expired (nats-server's purgeMsgIds rule).
    assert one(f, "a", ts=T0 + WINDOW, headers=h) == PubResult("S", 2)
    assert one(f, "a", ts=T0 + WINDOW + 5, headers=h) == PubResult("S", 2, duplicate=True)


def test_dedupe_uses_op_timestamps_even_backwards(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=WINDOW)
    one(f, "a", ts=T0, headers={"Nats-Msg-Id": "old"})
    one(f, "a", ts=T0 + 10 * WINDOW, headers={"Nats-Msg-Id": "new"})
    # "old" was pruned when time advanced; a proposer clock stepping back
    # cannot resurrect it, and "new" is still a duplicate.
    assert one(f, "a", ts=T0 + 1, headers={"Nats-Msg-Id": "old"}) == PubResult("S", 3)
    assert one(f, "a", ts=T0 + 2, headers={"Nats-Msg-Id": "new"}) == PubResult(
        "S", 2, duplicate=True
    )


def test_dedupe_table_pruned_as_time_advances(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=WINDOW)
    for i in range(5):
        one(f, "a", ts=T0 + i, headers={"Nats-Msg-Id": f"m{i}"})
    assert len(list(f.dedupe_entries())) == 5
    one(f, "a", ts=T0 + WINDOW + 2)  # no id: still prunes m0..m2
    assert [k for k, _, _ in f.dedupe_entries()] == ["m3", "m4"]
    f.apply_op(Expire(T0 + 2 * WINDOW))
    assert list(f.dedupe_entries()) == []


def test_header_names_are_case_sensitive(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    h = {"nats-msg-id": "lc1"}
    assert one(f, "a", headers=h) == PubResult("S", 1)
    assert one(f, "a", headers=h) == PubResult("S", 2)
    assert one(f, "a", raw=b"NATS/1.0\r\nNats-Msg-Id:nospace\r\n\r\n") == PubResult("S", 3)
    assert one(f, "a", raw=b"NATS/1.0\r\nNats-Msg-Id: nospace \r\n\r\n") == PubResult(
        "S", 3, duplicate=True
    )


def test_zero_window_disables_dedupe(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=0)
    h = {"Nats-Msg-Id": "x"}
    assert one(f, "a", headers=h) == PubResult("S", 1)
    assert one(f, "a", headers=h) == PubResult("S", 2)
    assert list(f.dedupe_entries()) == []


def test_dedupe_survives_snapshot_restore(make_fsm: MakeFsm) -> None:
    f = make_fsm(duplicate_window_ns=WINDOW)
    one(f, "a", ts=T0, headers={"Nats-Msg-Id": "a1"})
    one(f, "b", ts=T0 + 1, headers={"Nats-Msg-Id": "b1"})
    g = make_fsm("S")
    g.restore(io.BytesIO(f.snapshot()))
    assert list(g.dedupe_entries()) == list(f.dedupe_entries())
    assert g.last_msg_id == "b1"
    assert one(g, "a", ts=T0 + 5, headers={"Nats-Msg-Id": "a1"}) == PubResult(
        "S", 1, duplicate=True
    )
    assert one(g, "a", ts=T0 + WINDOW, headers={"Nats-Msg-Id": "a1"}) == PubResult("S", 3)


def test_rejected_publish_does_not_record_msg_id(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_msgs=1, discard=Discard.NEW))
    one(f, "a")
    h = {"Nats-Msg-Id": "retry"}
    assert one(f, "a", headers=h) == err(503, 10077, "maximum messages exceeded")
    f.apply_op(Purge())
    assert one(f, "a", headers=h) == PubResult("S", 2)


# --------------------------------------------------------------------------- expected-*


def test_expected_stream(make_fsm: MakeFsm) -> None:
    f = make_fsm("ORDERS")
    assert one(f, "a", headers={"Nats-Expected-Stream": "ORDERS"}) == PubResult("ORDERS", 1)
    assert one(f, "a", headers={"Nats-Expected-Stream": "orders"}) == err(
        400, 10060, "expected stream does not match"
    )
    assert one(f, "a", headers={"Nats-Expected-Stream": ""}) == PubResult("ORDERS", 2)


def test_expected_stream_checked_before_dedupe(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "a", headers={"Nats-Msg-Id": "m"})
    got = one(f, "a", headers={"Nats-Msg-Id": "m", "Nats-Expected-Stream": "X"})
    assert got == err(400, 10060, "expected stream does not match")


def test_expected_last_sequence(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    h = "Nats-Expected-Last-Sequence"
    assert one(f, "a", headers={h: "0"}) == PubResult("S", 1)
    assert one(f, "a", headers={h: "0"}) == err(400, 10071, "wrong last sequence: 1")
    assert one(f, "b", headers={h: "1"}) == PubResult("S", 2)
    assert one(f, "b", headers={h: "7"}) == err(400, 10071, "wrong last sequence: 2")


@pytest.mark.parametrize("value", ["abc", "-1", "+2", "2.0", " 2x", "99999999999999999999"])
def test_expected_last_sequence_unparsable_is_mismatch(make_fsm: MakeFsm, value: str) -> None:
    f = make_fsm()
    one(f, "a")
    one(f, "a")
    got = one(f, "a", headers={"Nats-Expected-Last-Sequence": value})
    assert got == err(400, 10071, "wrong last sequence: 2")


def test_expected_last_sequence_after_purge_uses_last_seq(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "a")
    one(f, "a")
    f.apply_op(Purge())
    assert one(f, "a", headers={"Nats-Expected-Last-Sequence": "0"}) == err(
        400, 10071, "wrong last sequence: 2"
    )
    assert one(f, "a", headers={"Nats-Expected-Last-Sequence": "2"}) == PubResult("S", 3)


def test_expected_last_subject_sequence(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    h = "Nats-Expected-Last-Subject-Sequence"
    assert one(f, "kv.a", headers={h: "0"}) == PubResult("S", 1)
    assert one(f, "kv.b", headers={h: "0"}) == PubResult("S", 2)
    assert one(f, "kv.a", headers={h: "0"}) == err(400, 10071, "wrong last sequence: 1")
    assert one(f, "kv.a", headers={h: "2"}) == err(400, 10071, "wrong last sequence: 1")
    assert one(f, "kv.a", headers={h: "1"}) == PubResult("S", 3)
    assert one(f, "kv.c", headers={h: "5"}) == err(400, 10071, "wrong last sequence: 0")
    assert one(f, "kv.a", headers={h: "x"}) == err(400, 10071, "wrong last sequence: 3")


def test_expected_last_subject_sequence_other_subject(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "kv.a")
    one(f, "kv.b")
    h = {
        "Nats-Expected-Last-Subject-Sequence": "2",
        "Nats-Expected-Last-Subject-Sequence-Subject": "kv.*",
    }
    assert one(f, "kv.c", headers=h) == PubResult("S", 3)
    assert one(f, "kv.c", headers=h) == err(400, 10071, "wrong last sequence: 3")


def test_expected_last_subject_sequence_after_delete(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "kv.a")
    f.apply_op(DeleteMsg(1))
    assert one(f, "kv.a", headers={"Nats-Expected-Last-Subject-Sequence": "0"}) == PubResult("S", 2)


def test_expected_last_msg_id(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    h = "Nats-Expected-Last-Msg-Id"
    assert one(f, "a", headers={h: "x"}) == err(400, 10070, "wrong last msg ID: ")
    one(f, "a", headers={"Nats-Msg-Id": "m1"})
    assert one(f, "b", headers={h: "m1", "Nats-Msg-Id": "m2"}) == PubResult("S", 2)
    assert one(f, "b", headers={h: "m1"}) == err(400, 10070, "wrong last msg ID: m2")
    # The stream's last message (any subject), even one without an id.
    one(f, "c")
    assert one(f, "a", headers={h: "m2"}) == err(400, 10070, "wrong last msg ID: ")


# --------------------------------------------------------------------------- rollup


def test_rollup_not_permitted(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    for v in ("sub", "all", "bogus"):
        assert one(f, "a", headers={"Nats-Rollup": v}) == err(500, 10111, "rollup not permitted")
    g = make_fsm(allow_rollup_hdrs=True, deny_purge=True)
    assert one(g, "a", headers={"Nats-Rollup": "sub"}) == err(500, 10111, "rollup not permitted")
    assert seqs(f.store) == seqs(g.store) == []


def test_rollup_invalid_value(make_fsm: MakeFsm) -> None:
    f = make_fsm(allow_rollup_hdrs=True)
    assert one(f, "a", headers={"Nats-Rollup": "bogus"}) == err(
        500, 10111, 'rollup value invalid: "bogus"'
    )
    assert one(f, "a", headers={"Nats-Rollup": "SUB"}) == err(
        500, 10111, 'rollup value invalid: "SUB"'
    )


def test_rollup_sub(make_fsm: MakeFsm) -> None:
    f = make_fsm(allow_rollup_hdrs=True)
    publish(f, pub("kv.a"), pub("kv.b"), pub("kv.a"), pub("kv.b"))
    out = publish(f, pub("kv.a", payload=b"roll", headers={"Nats-Rollup": "sub"}))
    assert out.results == (PubResult("S", 5),)
    assert out.effects == (Purged(2, 2), NewMessages(5))
    assert seqs(f.store) == [2, 4, 5]


def test_rollup_all(make_fsm: MakeFsm) -> None:
    f = make_fsm(allow_rollup_hdrs=True)
    publish(f, pub("kv.a"), pub("kv.b"), pub("kv.c"))
    out = publish(f, pub("kv.x", headers={"Nats-Rollup": "all"}))
    assert out.effects == (Purged(4, 3), NewMessages(4))
    assert seqs(f.store) == [4]
    assert f.store.state().first_seq == 4


# --------------------------------------------------------------------------- sealed, sizes, limits


def test_sealed_stream_refuses_everything(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "a")
    f.apply_op(UpdatePolicy(StreamPolicy("S", sealed=True)))
    sealed = err(400, 10109, "invalid operation on sealed stream")
    assert one(f, "a") == sealed
    assert f.apply_op(Purge()).results == (sealed,)
    assert f.apply_op(DeleteMsg(1)).results == (sealed,)
    assert seqs(f.store) == [1]


def test_max_msg_size(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_msg_size=10))
    assert one(f, "a", payload=b"0123456789") == PubResult("S", 1)
    assert one(f, "a", payload=b"0123456789A") == err(
        400, 10054, "message size exceeds maximum allowed"
    )
    # Headers count too.
    assert one(f, "a", payload=b"", headers={"K": "v"}) == err(
        400, 10054, "message size exceeds maximum allowed"
    )
    assert seqs(f.store) == [1]


def test_header_size_limit(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    assert one(f, "a", headers={"K": "v" * 70_000}) == err(
        400, 10097, "header size exceeds maximum allowed of 64k"
    )


def test_discard_new_max_msgs(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_msgs=2, discard=Discard.NEW))
    out = publish(f, pub("a"), pub("b"), pub("c"))
    assert out.results[2] == err(503, 10077, "maximum messages exceeded")
    assert out.effects == (NewMessages(2),)
    assert seqs(f.store) == [1, 2]


def test_discard_new_max_bytes(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_bytes=200, discard=Discard.NEW))
    assert one(f, "a", payload=b"x" * 100) == PubResult("S", 1)
    assert one(f, "a", payload=b"x" * 100) == err(503, 10077, "maximum bytes exceeded")


def test_discard_new_per_subject(make_fsm: MakeFsm) -> None:
    lim = StreamLimits(max_msgs_per_subject=1, discard=Discard.NEW, discard_new_per_subject=True)
    f = make_fsm(limits=lim)
    assert one(f, "a") == PubResult("S", 1)
    assert one(f, "a") == err(503, 10077, "maximum messages per subject exceeded")
    assert one(f, "b") == PubResult("S", 2)


def test_discard_old_keeps_newest(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_msgs=2))
    publish(f, pub("a"), pub("b"), pub("c"))
    assert seqs(f.store) == [2, 3]


def test_msg_ttl_header(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    assert one(f, "a", headers={"Nats-TTL": "5s"}) == err(400, 10166, "per-message TTL is disabled")
    assert one(f, "a", headers={"Nats-TTL": "500ms"}) == err(400, 10165, "invalid per-message TTL")
    assert one(f, "a", headers={"Nats-TTL": "bogus"}) == err(400, 10165, "invalid per-message TTL")
    g = make_fsm(allow_msg_ttl=True)
    assert one(g, "a", headers={"Nats-TTL": "5"}) == PubResult("S", 1)


def test_parse_msg_ttl() -> None:
    assert parse_msg_ttl_ns("never") == -1
    assert parse_msg_ttl_ns("1s") == SEC
    assert parse_msg_ttl_ns("1m30s") == 90 * SEC
    assert parse_msg_ttl_ns("1.5h") == 5400 * SEC
    assert parse_msg_ttl_ns("5") == 5 * SEC
    for bad in ("", "0", "999ms", "1x", "s", "-5s", "1..2s", "bogus"):
        assert parse_msg_ttl_ns(bad) is None, bad


def test_go_quote() -> None:
    assert go_quote("bogus") == '"bogus"'
    assert go_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert go_quote("a\nb\x01") == '"a\\nb\\x01"'
    assert go_quote("é") == '"é"'


# --------------------------------------------------------------------------- purge / delete


def _fill(f: StreamStateMachine) -> None:
    publish(f, *(pub(s) for s in ["a", "b", "a", "b", "a", "c"]))


@pytest.mark.parametrize(
    ("op", "purged", "left"),
    [
        (Purge(), 6, []),
        (Purge(filter=""), 6, []),
        (Purge(filter="a"), 3, [2, 4, 6]),
        (Purge(filter="*"), 6, []),
        (Purge(seq=4), 3, [4, 5, 6]),
        (Purge(keep=2), 4, [5, 6]),
        (Purge(filter="a", keep=1), 2, [2, 4, 5, 6]),
        (Purge(filter="b", seq=4), 1, [1, 3, 4, 5, 6]),
        (Purge(filter="zzz"), 0, [1, 2, 3, 4, 5, 6]),
    ],
)
def test_purge_forms(make_fsm: MakeFsm, op: Purge, purged: int, left: list[int]) -> None:
    f = make_fsm()
    _fill(f)
    out = f.apply_op(op)
    first = left[0] if left else 7
    assert out.results == (PurgeResult(purged),)
    assert out.effects == (Purged(first, purged),)
    assert seqs(f.store) == left
    assert f.store.state().last_seq == 6


def test_purge_denied(make_fsm: MakeFsm) -> None:
    f = make_fsm(deny_purge=True)
    _fill(f)
    assert f.apply_op(Purge()).results == (err(500, 10110, "stream purge not permitted"),)
    assert len(seqs(f.store)) == 6


def test_delete_forms_and_errors(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    _fill(f)
    assert f.apply_op(DeleteMsg(2)).results == (DeleteResult(2),)
    assert f.apply_op(DeleteMsg(3, erase=False)).results == (DeleteResult(3),)
    assert f.apply_op(DeleteMsg(2)).results == (err(500, 10057, "no message found"),)
    assert f.apply_op(DeleteMsg(7)).results == (err(500, 10057, "stream store EOF"),)
    assert f.apply_op(DeleteMsg(0)).results == (err(500, 10057, "no message found"),)
    assert seqs(f.store) == [1, 4, 5, 6]


def test_delete_denied(make_fsm: MakeFsm) -> None:
    f = make_fsm(deny_delete=True)
    _fill(f)
    assert f.apply_op(DeleteMsg(1)).results == (err(500, 10057, "message delete not permitted"),)


# --------------------------------------------------------------------------- update / expire


def test_update_policy_applies_limits(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    _fill(f)
    new = StreamPolicy("S", limits=StreamLimits(max_msgs=2), allow_rollup_hdrs=True)
    assert f.apply_op(UpdatePolicy(new)).results == (PolicyResult(4),)
    assert f.policy == new
    assert f.store.limits == new.limits.normalised()
    assert seqs(f.store) == [5, 6]
    assert one(f, "z", headers={"Nats-Rollup": "all"}) == PubResult("S", 7)


def test_update_policy_window_zero_clears_dedupe(make_fsm: MakeFsm) -> None:
    f = make_fsm()
    one(f, "a", headers={"Nats-Msg-Id": "m"})
    f.apply_op(UpdatePolicy(StreamPolicy("S", duplicate_window_ns=0)))
    assert list(f.dedupe_entries()) == []


def test_expire_uses_leaders_clock_from_op(make_fsm: MakeFsm) -> None:
    f = make_fsm(limits=StreamLimits(max_age_ns=10 * SEC))
    publish(f, pub("a", ts=T0), pub("a", ts=T0 + 5 * SEC), pub("a", ts=T0 + 20 * SEC))
    assert f.apply_op(Expire(T0 + 9 * SEC)).results == (ExpireResult(0),)
    assert f.apply_op(Expire(T0 + 15 * SEC)).results == (ExpireResult(2),)
    assert seqs(f.store) == [3]


# --------------------------------------------------------------------------- raft protocol


def test_apply_bytes_equals_apply_op(make_fsm: MakeFsm) -> None:
    f, g = make_fsm(), make_fsm()
    op = StreamMsg((pub("a", headers={"Nats-Msg-Id": "1"}), pub("b")))
    assert f.apply(encode_op(op)) == g.apply_op(op)
    with pytest.raises(OpDecodeError):
        f.apply(b"\x00garbage")


def test_snapshot_restore_full_state(make_fsm: MakeFsm) -> None:
    pol = StreamPolicy("S", limits=StreamLimits(max_msgs=10), allow_rollup_hdrs=True)
    f = make_fsm("S", limits=StreamLimits(max_msgs=10), allow_rollup_hdrs=True)
    _fill(f)
    one(f, "d", headers={"Nats-Msg-Id": "\udcff-raw"})  # an undecodable byte survives
    f.apply_op(DeleteMsg(2))
    g = make_fsm("OTHER")
    g.restore(io.BytesIO(f.snapshot()))
    assert g.policy == pol
    assert g.store.limits == pol.limits.normalised()
    assert g.last_msg_id == "\udcff-raw"
    assert all_msgs(g.store) == all_msgs(f.store)
    assert g.store.state() == f.store.state()
    assert g.snapshot() == f.snapshot()
    # Both continue identically.
    op = StreamMsg((pub("d", headers={"Nats-Msg-Id": "\udcff-raw"}), pub("e")))
    assert f.apply_op(op) == g.apply_op(op)


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff", b"\xa0", b"\x80"],
)
def test_restore_rejects_garbage_and_keeps_state(make_fsm: MakeFsm, data: bytes) -> None:
    f = make_fsm()
    _fill(f)
    before = f.snapshot()
    with pytest.raises(StreamSnapshotError):
        f.restore(io.BytesIO(data))
    assert f.snapshot() == before


def test_restore_rejects_bad_parts(make_fsm: MakeFsm) -> None:
    import cbor2

    f = make_fsm()
    _fill(f)
    good = cbor2.loads(f.snapshot())
    before = f.snapshot()
    bad_docs = [
        {**good, "v": 2},
        {**good, "policy": {}},
        {**good, "dedupe": [["x", 1]]},
        {**good, "dedupe": [[b"x", 0, 1]]},
        {**good, "last_msg_id": "str"},
        {**good, "store": b"not a store snapshot"},
        {k: v for k, v in good.items() if k != "dedupe"},
    ]
    for doc in bad_docs:
        with pytest.raises(StreamSnapshotError):
            f.restore(io.BytesIO(cbor2.dumps(doc)))
        assert f.snapshot() == before


# --------------------------------------------------------------------------- determinism

_subjects = st.sampled_from(["a", "b", "c.x", "c.y"])
_hdr_values = {
    "Nats-Msg-Id": st.sampled_from(["m1", "m2", "m3", "m4"]),
    "Nats-Expected-Stream": st.sampled_from(["S", "T"]),
    "Nats-Expected-Last-Sequence": st.integers(0, 12).map(str) | st.just("x"),
    "Nats-Expected-Last-Subject-Sequence": st.integers(0, 12).map(str),
    "Nats-Expected-Last-Msg-Id": st.sampled_from(["m1", "m2", "m3", "m4"]),
    "Nats-Rollup": st.sampled_from(["sub", "all", "bad"]),
    "Nats-TTL": st.sampled_from(["5s", "1ms"]),
}


@st.composite
def _publish(draw: st.DrawFn) -> Publish:
    keys = draw(st.lists(st.sampled_from(sorted(_hdr_values)), max_size=3, unique=True))
    hdrs = {k: draw(_hdr_values[k]) for k in keys}
    if draw(st.booleans()):
        hdrs["Nats-Msg-Id"] = draw(_hdr_values["Nats-Msg-Id"])
    ts = T0 + draw(st.integers(0, 150)) * SEC
    payload = draw(st.binary(max_size=30))
    return pub(draw(_subjects), payload, ts, headers=hdrs or None)


_limits = st.builds(
    StreamLimits,
    max_msgs=st.sampled_from([-1, 3, 6]),
    max_bytes=st.sampled_from([-1, 300, 1000]),
    max_age_ns=st.sampled_from([0, 60 * SEC]),
    max_msgs_per_subject=st.sampled_from([-1, 1, 2]),
    max_msg_size=st.sampled_from([-1, 20]),
    discard=st.sampled_from(Discard),
    discard_new_per_subject=st.booleans(),
)
_policy = st.builds(
    StreamPolicy,
    name=st.just("S"),
    limits=_limits,
    duplicate_window_ns=st.sampled_from([0, 30 * SEC, WINDOW]),
    allow_rollup_hdrs=st.booleans(),
    sealed=st.sampled_from([False] * 7 + [True]),
    deny_delete=st.booleans(),
    deny_purge=st.booleans(),
    allow_msg_ttl=st.booleans(),
)
_ops: st.SearchStrategy[Op] = st.one_of(
    st.lists(_publish(), min_size=1, max_size=4).map(lambda ms: StreamMsg(tuple(ms))),
    st.lists(_publish(), min_size=1, max_size=4).map(lambda ms: StreamMsg(tuple(ms))),
    st.builds(
        Purge,
        filter=st.none() | _subjects | st.just("c.*"),
        seq=st.none() | st.integers(0, 14),
        keep=st.none() | st.integers(0, 3),
    ),
    st.builds(DeleteMsg, seq=st.integers(0, 14), erase=st.booleans()),
    st.builds(UpdatePolicy, policy=_policy),
    st.builds(Expire, now_ns=st.integers(0, 400).map(lambda s: T0 + s * SEC)),
)


def _fingerprint(f: StreamStateMachine) -> tuple[object, ...]:
    return (
        f.store.state(deleted_details=True),
        all_msgs(f.store),
        list(f.dedupe_entries()),
        f.last_msg_id,
        f.policy,
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(_ops, max_size=25), st.integers(0, 25))
def test_determinism_two_replicas_and_a_restored_one(ops: list[Op], cut: int) -> None:
    a = StreamStateMachine(MemoryStreamStore(), StreamPolicy("S"))
    b = StreamStateMachine(MemoryStreamStore(), StreamPolicy("S"))
    c: StreamStateMachine | None = None
    for i, op in enumerate(ops):
        if i == cut:
            c = StreamStateMachine(MemoryStreamStore(), StreamPolicy("S"))
            c.restore(io.BytesIO(a.snapshot()))
        ra = a.apply_op(op)
        rb = b.apply(encode_op(op))
        assert ra == rb
        if c is not None:
            assert c.apply_op(op) == ra
    assert _fingerprint(a) == _fingerprint(b)
    assert a.snapshot() == b.snapshot()
    if c is not None:
        assert _fingerprint(c) == _fingerprint(a)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(_ops, max_size=20))
def test_determinism_memory_vs_file(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op]
) -> None:
    d = tmp_path_factory.mktemp("fsm")
    fs = FileStreamStore(d / "s", segment_bytes_max=256)
    try:
        a = StreamStateMachine(MemoryStreamStore(accounting=Accounting.FILE), StreamPolicy("S"))
        b = StreamStateMachine(fs, StreamPolicy("S"))
        for op in ops:
            assert a.apply_op(op) == b.apply_op(op)
        assert _fingerprint(a) == _fingerprint(b)
    finally:
        fs.close()


def test_recover_from_store_rebuilds_dedupe_and_last_msg_id() -> None:
    from cluster.ops import Publish, StreamMsg, StreamPolicy
    from cluster.stream_fsm import PubResult, StreamStateMachine
    from store.memory import MemoryStreamStore

    store = MemoryStreamStore()
    policy = StreamPolicy(name="S", duplicate_window_ns=1_000)
    first = StreamStateMachine(store, policy)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: %s\r\n\r\n"
    msgs = [Publish("s", hdr % (b"a%d" % i), b"x", 100 * i) for i in range(20)]
    first.apply_op(StreamMsg(tuple(msgs)))
    again = StreamStateMachine(store, policy)  # a restart: same store, fresh state
    assert again.recover_from_store() == 10  # ts 1000..1900 are within 1000 ns of 1900
    assert again.last_msg_id == "a19"
    out = again.apply_op(StreamMsg((Publish("s", hdr % b"a15", b"x", 1950),)))
    assert out.results[0] == PubResult("S", 16, True)
    out = again.apply_op(StreamMsg((Publish("s", hdr % b"a5", b"x", 1950),)))
    assert out.results[0] == PubResult("S", 21, False)  # outside the window: stored
