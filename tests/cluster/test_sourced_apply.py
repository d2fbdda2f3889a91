"""MirrorMsg / SourcedMsg: the op codec and their apply in the stream state machine.

Runs over the memory and the file store; every scenario also goes through
``encode_op``/``apply`` (the replicated path) rather than ``apply_op`` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cbor2
import pytest

from cluster.headers import encode_headers
from cluster.ops import (
    FORMAT_VERSION,
    Mirrored,
    MirrorMsg,
    OpCode,
    OpDecodeError,
    OpError,
    Publish,
    SourcedMsg,
    StreamPolicy,
    UpdatePolicy,
    decode_op,
    encode_op,
)
from cluster.stream_fsm import (
    ApiErrorResult,
    ApplyOutcome,
    NewMessages,
    PubResult,
    Purged,
    StreamStateMachine,
)
from store.api import StreamStore
from store.file import FileStreamStore
from store.limits import Discard, StreamLimits
from store.memory import MemoryStreamStore

SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC
MakeFsm = Callable[..., StreamStateMachine]


@pytest.fixture(params=["memory", "file"])
def make_fsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeFsm]:
    stores: list[StreamStore] = []

    def make(**kw: object) -> StreamStateMachine:
        limits = kw.pop("limits", StreamLimits())
        assert isinstance(limits, StreamLimits)
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore(limits)
        else:
            store = FileStreamStore(tmp_path / f"s{len(stores)}", limits)
        stores.append(store)
        return StreamStateMachine(store, StreamPolicy("M", limits=limits, **kw))  # type: ignore[arg-type]

    yield make
    for s in stores:
        s.close()


def apply(fsm: StreamStateMachine, op: MirrorMsg | SourcedMsg | UpdatePolicy) -> ApplyOutcome:
    out = fsm.apply(encode_op(op))
    assert isinstance(out, ApplyOutcome)
    return out


def mir(seq: int, subject: str = "o.a", hdrs: dict[str, str] | None = None) -> Mirrored:
    h = encode_headers(hdrs.items()) if hdrs else None
    return Mirrored(seq, subject, h, b"p%d" % seq, T0 + seq)


def src(payload: bytes, hdrs: dict[str, str] | None = None, subject: str = "o.a") -> Publish:
    h = encode_headers(hdrs.items()) if hdrs else None
    return Publish(subject, h, payload, T0)


# --------------------------------------------------------------------------- codec


def test_codec_round_trip_and_codes() -> None:
    assert (OpCode.MIRROR_MSG, OpCode.SOURCED_MSG) == (6, 7)
    for op in (
        MirrorMsg((mir(3), mir(5, hdrs={"A": "b"}))),
        MirrorMsg((), skip_to=9),
        MirrorMsg((mir(12),), skip_to=10),
        SourcedMsg((src(b"x"), src(b"y", {"Nats-Msg-Id": "1"}))),
    ):
        assert decode_op(encode_op(op)) == op


@pytest.mark.parametrize(
    "build",
    [
        lambda: MirrorMsg(()),
        lambda: MirrorMsg((mir(4), mir(4))),
        lambda: MirrorMsg((mir(4),), skip_to=4),
        lambda: Mirrored(0, "a", None, b"", 1),
        lambda: SourcedMsg(()),
        lambda: SourcedMsg((mir(1),)),  # type: ignore[arg-type]
    ],
)
def test_invalid_ops_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(OpError):
        build()


@pytest.mark.parametrize(
    "body",
    [
        [0, []],
        [1, [[0, "a", None, b"", 1]]],
        [1, [[2, "a", None, b"", 1, 9]]],
        ["x", []],
        [[]],
    ],
)
def test_bad_mirror_bodies_do_not_decode(body: object) -> None:
    with pytest.raises(OpDecodeError):
        decode_op(cbor2.dumps([FORMAT_VERSION, int(OpCode.MIRROR_MSG), body]))


# --------------------------------------------------------------------------- mirror


def test_mirror_keeps_origin_sequences_and_timestamps(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(duplicate_window_ns=0)
    out = apply(fsm, MirrorMsg((mir(2), mir(4), mir(5))))
    assert out.results == (PubResult("M", 2), PubResult("M", 4), PubResult("M", 5))
    assert out.effects == (NewMessages(5),)
    st = fsm.store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted) == (3, 2, 5, 1)
    assert fsm.store.load(4).ts_ns == T0 + 4
    # already present: answered as duplicates, nothing stored
    out = apply(fsm, MirrorMsg((mir(4), mir(5), mir(7))))
    assert out.results == (
        PubResult("M", 4, duplicate=True),
        PubResult("M", 5, duplicate=True),
        PubResult("M", 7),
    )
    assert fsm.store.state().num_deleted == 2


def test_mirror_skip_to_without_messages(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(duplicate_window_ns=0)
    apply(fsm, MirrorMsg((), skip_to=9))
    st = fsm.store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 10, 9)
    apply(fsm, MirrorMsg((mir(10),)))
    apply(fsm, MirrorMsg((mir(14),), skip_to=12))
    st = fsm.store.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted) == (2, 10, 14, 3)


def test_mirror_does_not_dedupe_but_honours_rollup(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(duplicate_window_ns=0)
    same = {"Nats-Msg-Id": "x"}
    out = apply(fsm, MirrorMsg((mir(1, hdrs=same), mir(2, hdrs=same), mir(3, "o.b"))))
    assert [r.seq for r in out.results if isinstance(r, PubResult)] == [1, 2, 3]
    assert fsm.last_msg_id == ""
    out = apply(fsm, MirrorMsg((mir(4, hdrs={"Nats-Rollup": "sub"}),)))
    assert Purged(3, 2) in out.effects  # o.a 1 and 2 rolled up
    assert fsm.store.state().msgs == 2


def test_mirror_stops_at_first_refusal(make_fsm: MakeFsm) -> None:
    lim = StreamLimits(max_msgs=2, discard=Discard.NEW)
    fsm = make_fsm(limits=lim, duplicate_window_ns=0)
    out = apply(fsm, MirrorMsg((mir(1), mir(2), mir(3), mir(4))))
    assert out.results[:2] == (PubResult("M", 1), PubResult("M", 2))
    assert len(out.results) == 3
    err = out.results[2]
    assert isinstance(err, ApiErrorResult) and err.err_code == 10077
    assert fsm.store.state().last_seq == 2


def test_sealed_mirror_refuses(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(duplicate_window_ns=0, sealed=True)
    out = apply(fsm, MirrorMsg((mir(1),)))
    assert isinstance(out.results[0], ApiErrorResult) and out.results[0].err_code == 10109
    assert fsm.store.state().last_seq == 0


# --------------------------------------------------------------------------- sources


def test_sourced_messages_get_own_sequences_and_dedupe(make_fsm: MakeFsm) -> None:
    fsm = make_fsm()
    out = apply(
        fsm,
        SourcedMsg(
            (
                src(b"a", {"Nats-Msg-Id": "1"}),
                src(b"b", {"Nats-Msg-Id": "1"}),
                src(b"c"),
            )
        ),
    )
    assert out.results == (
        PubResult("M", 1),
        PubResult("M", 1, duplicate=True),
        PubResult("M", 2),
    )
    assert out.effects == (NewMessages(2),)
    assert [fsm.store.load(s).payload for s in (1, 2)] == [b"a", b"c"]


def test_sourced_rollup_and_ttl_need_no_permission(make_fsm: MakeFsm) -> None:
    fsm = make_fsm()
    apply(fsm, SourcedMsg((src(b"1"), src(b"2"))))
    out = apply(fsm, SourcedMsg((src(b"3", {"Nats-Rollup": "all", "Nats-TTL": "5s"}),)))
    assert out.results == (PubResult("M", 3),)
    assert Purged(3, 2) in out.effects
    out = apply(fsm, SourcedMsg((src(b"4", {"Nats-Rollup": "bogus"}),)))
    assert isinstance(out.results[0], ApiErrorResult) and out.results[0].err_code == 10111


def test_sourced_batch_stops_at_refusal(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(limits=StreamLimits(max_msg_size=3))
    out = apply(fsm, SourcedMsg((src(b"ok"), src(b"toolong"), src(b"no"))))
    assert out.results[0] == PubResult("M", 1)
    assert len(out.results) == 2
    assert isinstance(out.results[1], ApiErrorResult) and out.results[1].err_code == 10054
    assert fsm.store.state().msgs == 1


@pytest.mark.parametrize("ttl", [False, True])
def test_sourced_run_in_one_append_equals_one_by_one(make_fsm: MakeFsm, ttl: bool) -> None:
    """A run of sourced copies no rule can refuse (the usual catch-up) is stored by one
    ``append_batch``: the same results, effects and store as one op per message (dedupe
    pruning and TTL headers included); a run where a block mentions ``Nats-Msg-Id`` (here
    only in a value) goes one by one, with the same outcome too."""
    kw = {"allow_msg_ttl": True} if ttl else {}
    batched, single = make_fsm(**kw), make_fsm(**kw)
    seed = SourcedMsg((src(b"seed", {"Nats-Msg-Id": "x"}),))
    for fsm in (batched, single):
        apply(fsm, seed)
    calls: list[int] = []
    append_batch = batched.store.append_batch

    def counted(msgs: Any) -> Any:
        calls.append(len(msgs))
        return append_batch(msgs)

    batched.store.append_batch = counted  # type: ignore[method-assign]
    runs = [
        (
            Publish("o.a", None, b"a", T0 + 10 * SEC),
            src(b"b", {"Nats-Stream-Source": "O 2 > > o.a ID"}),
            Publish("o.b", encode_headers([("Nats-TTL", "5s")]), b"c", T0 + 10 * SEC),
        ),
        (src(b"d", {"X-Note": "Nats-Msg-Id-like"}), src(b"e")),
    ]
    for run in runs:
        out = apply(batched, SourcedMsg(run))
        outs = [apply(single, SourcedMsg((m,))) for m in run]
        assert out.results == tuple(r for o in outs for r in o.results)
        assert out.effects == (NewMessages(single.store.state().last_seq),)
    assert calls == [3]
    assert batched.store.state() == single.store.state()
    for s in range(1, 7):
        a, b = batched.store.load(s), single.store.load(s)
        assert (a.subject, a.headers, a.payload, a.ts_ns) == (
            b.subject,
            b.headers,
            b.payload,
            b.ts_ns,
        )
    assert batched._dedupe == single._dedupe
