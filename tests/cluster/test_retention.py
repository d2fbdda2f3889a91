"""Retention ops in the stream state machine (``AckRemove``, ``Interest``) and
``cluster.retention.needs`` (nats-server's ``needAck``), over memory and file stores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cluster.consumer_fsm import ConsumerStateMachine
from cluster.ops import (
    AckItem,
    AckKind,
    AckRemove,
    ConsumerAcks,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerPolicy,
    ConsumerTimeouts,
    Interest,
    Publish,
    StreamMsg,
    StreamPolicy,
    encode_op,
)
from cluster.retention import needs
from cluster.stream_fsm import AckRemoveResult, PubResult, StreamStateMachine
from store.api import StreamStore
from store.file import FileStreamStore
from store.memory import MemoryConsumerStore, MemoryStreamStore

SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC
MakeFsm = Callable[..., StreamStateMachine]


@pytest.fixture(params=["memory", "file"])
def make_fsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeFsm]:
    stores: list[StreamStore] = []

    def factory(**kw: Any) -> StreamStateMachine:
        store: StreamStore
        if request.param == "memory":
            store = MemoryStreamStore()
        else:
            store = FileStreamStore(tmp_path / f"s{len(stores)}", segment_bytes_max=512)
        stores.append(store)
        return StreamStateMachine(store, StreamPolicy("S", **kw))

    yield factory
    for s in stores:
        s.close()


def publish(fsm: StreamStateMachine, *subjects: str, msg_id: str = "") -> list[Any]:
    hdr = f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode() if msg_id else None
    op = StreamMsg(tuple(Publish(s, hdr, b"x", T0) for s in subjects))
    return list(fsm.apply(encode_op(op)).results)


def live(fsm: StreamStateMachine) -> list[int]:
    out, seq = [], 1
    while (m := fsm.store.load_next(">", seq)) is not None:
        out.append(m.seq)
        seq = m.seq + 1
    return out


def test_ack_remove_ignores_deny_delete_and_missing(make_fsm: MakeFsm) -> None:
    fsm = make_fsm(deny_delete=True, deny_purge=True, sealed=False)
    publish(fsm, "a", "b", "c", "d")
    out = fsm.apply(encode_op(AckRemove((2, 3, 3, 9))))
    assert out.results == (AckRemoveResult(2),)
    assert live(fsm) == [1, 4]
    st = fsm.store.state()
    assert (st.first_seq, st.last_seq, st.msgs) == (1, 4, 2)


def test_ack_remove_below_empties_to_last_plus_one(make_fsm: MakeFsm) -> None:
    fsm = make_fsm()
    publish(fsm, "a", "b", "c")
    out = fsm.apply_op(AckRemove((), below=4))
    assert out.results == (AckRemoveResult(3),)
    st = fsm.store.state()
    assert (st.first_seq, st.last_seq, st.msgs) == (4, 3, 0)
    # a below past the end never moves last_seq
    fsm.apply_op(AckRemove((), below=10))
    assert fsm.store.state().last_seq == 3


def test_interest_skips_unwanted_subjects_in_log_order(make_fsm: MakeFsm) -> None:
    fsm = make_fsm()
    assert publish(fsm, "a") == [PubResult("S", 1)]  # no Interest yet: stored
    fsm.apply(encode_op(Interest(())))
    assert publish(fsm, "a", msg_id="m1") == [PubResult("S", 2)]  # nobody: skipped
    assert publish(fsm, "a", msg_id="m1") == [PubResult("S", 2, duplicate=True)]
    fsm.apply_op(Interest(("b.*",)))
    assert publish(fsm, "a", "b.x", "b.x.y") == [PubResult("S", n) for n in (3, 4, 5)]
    assert live(fsm) == [1, 4]
    fsm.apply_op(Interest((">",)))
    publish(fsm, "z")
    assert live(fsm) == [1, 4, 6]
    st = fsm.store.state()
    assert (st.first_seq, st.last_seq, st.msgs) == (1, 6, 3)


def test_skipped_publish_is_not_republished(make_fsm: MakeFsm) -> None:
    fsm = make_fsm()
    fsm.report_stored = True
    fsm.apply_op(Interest(("k",)))
    out = fsm.apply_op(StreamMsg((Publish("x", None, b"1", T0), Publish("k", None, b"2", T0))))
    stored = [e for e in out.effects if type(e).__name__ == "Stored"]
    assert [e.seq for e in stored] == [2]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- needs


def consumer(ack: str, filters: tuple[str, ...] = (), max_deliver: int = -1) -> Any:
    fsm = ConsumerStateMachine("c", MemoryConsumerStore())
    pol = ConsumerPolicy(ack=ack, ack_wait_ns=SEC, max_deliver=max_deliver, filters=filters)
    fsm.apply_op(ConsumerCreated("c", pol, 1, ()))
    cfg = SimpleNamespace(filters=filters)
    return SimpleNamespace(fsm=fsm, cfg=cfg, closed=False)


def test_needs_explicit() -> None:
    c = consumer("explicit")
    c.fsm.apply_op(ConsumerDelivered("c", (1, 2, 3), T0))
    assert [needs(c, s, "a") for s in (1, 2, 3, 4)] == [True] * 4
    c.fsm.apply_op(ConsumerAcks("c", (AckItem(AckKind.ACK, 2, 2),), T0))
    assert [needs(c, s, "a") for s in (1, 2, 3, 4)] == [True, False, True, True]
    c.fsm.apply_op(ConsumerAcks("c", (AckItem(AckKind.TERM, 1, 1),), T0))
    assert [needs(c, s, "a") for s in (1, 2, 3)] == [False, False, True]


def test_needs_filter_and_ack_none_and_all() -> None:
    f = consumer("explicit", ("b",))
    assert needs(f, 1, "a") is False and needs(f, 1, "b") is True
    n = consumer("none")
    n.fsm.apply_op(ConsumerDelivered("c", (1, 2), T0))
    assert [needs(n, s, None) for s in (1, 2, 3)] == [False, False, True]
    a = consumer("all")
    a.fsm.apply_op(ConsumerDelivered("c", (1, 2, 3), T0))
    a.fsm.apply_op(ConsumerAcks("c", (AckItem(AckKind.ACK, 2, 2),), T0))
    assert [needs(a, s, None) for s in (1, 2, 3)] == [False, False, True]


def test_needs_keeps_messages_out_of_deliveries() -> None:
    c = consumer("explicit", max_deliver=1)
    c.fsm.apply_op(ConsumerDelivered("c", (1, 2), T0))
    c.fsm.apply_op(ConsumerAcks("c", (AckItem(AckKind.ACK, 2, 2),), T0))
    c.fsm.apply_op(ConsumerTimeouts("c", T0 + 2 * SEC))
    assert 1 not in c.fsm.pending
    assert needs(c, 1, None) is True  # given up, never acknowledged: kept
    assert needs(c, 2, None) is False
