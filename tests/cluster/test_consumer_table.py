"""The consumers of a replicated stream as its log makes them (``cluster.consumer_table``),
and their place in ``ReplicatedStreamFSM.apply_at``: consumer entries are applied always,
never skipped by the stream's applied mark, and replaying them rebuilds the same state."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.consumer_model import ConsumerConfig
from cluster.consumer_table import ConsumerTable, config_bytes
from cluster.ops import (
    AckItem,
    AckKind,
    ConsumerAcked,
    ConsumerAcks,
    ConsumerAssign,
    ConsumerDelivered,
    ConsumerRemove,
    ConsumerTimeouts,
    OpError,
    Publish,
    StreamMsg,
    StreamPolicy,
    decode_any,
    decode_op,
    encode_op,
)
from cluster.replicated import ReplicatedStreamFSM
from cluster.stream_fsm import StreamStateMachine
from store.limits import StreamLimits
from store.memory import MemoryStreamStore

CFG = ConsumerConfig.from_dict({"durable_name": "D", "ack_policy": "explicit", "ack_wait": 10**9})


def _assign(name: str = "D", cfg: ConsumerConfig = CFG, start: int = 1) -> ConsumerAssign:
    return ConsumerAssign(name, config_bytes(cfg), 5, "C-R3F-abcdefgh", start)


def _ops() -> list[Any]:
    return [
        _assign(),
        ConsumerDelivered("D", (1, 2, 3, 4), 100),
        ConsumerAcked("D", (1, 2), (1, 2), 110),
        ConsumerAcks("D", (AckItem(AckKind.NAK, 3, 3),), 120),
        ConsumerDelivered("D", (3,), 130),
        ConsumerTimeouts("D", 10**12),
        ConsumerDelivered("D", (3, 4, 5), 10**12),
        ConsumerAcked("D", (3, 4, 5), (5, 6, 7), 10**12 + 1),
    ]


def _state(t: ConsumerTable) -> dict[str, Any]:
    return {n: (e.cfg, e.created_ns, e.group, e.fsm.state()) for n, e in t.entries.items()}


def test_entries_round_trip_and_are_not_stream_ops() -> None:
    for op in [*_ops(), ConsumerRemove("D")]:
        assert decode_any(encode_op(op)) == op
        with pytest.raises(OpError):
            decode_op(encode_op(op))


def test_replay_rebuilds_the_same_state_and_tells_listeners() -> None:
    a, b = ConsumerTable(), ConsumerTable()
    heard: list[tuple[str, str]] = []
    b.listeners.append(lambda ev, name: heard.append((ev, name)))
    for op in _ops():
        a.apply(decode_any(encode_op(op)))
    for op in _ops():
        b.apply(op)
    assert _state(a) == _state(b)
    st = a.entries["D"].fsm.state()
    assert st.ack_floor_stream_seq == 5 and not st.pending
    assert heard == [("assigned", "D")]


def test_update_keeps_state_remove_and_unknown_consumer() -> None:
    t = ConsumerTable()
    heard: list[tuple[str, str]] = []
    t.listeners.append(lambda ev, name: heard.append((ev, name)))
    for op in _ops()[:3]:
        t.apply(op)
    new = ConsumerConfig.from_dict({**CFG.to_dict(), "max_deliver": 3})
    t.apply(_assign(cfg=new, start=9))  # an assign of a consumer that exists: config only
    e = t.entries["D"]
    assert e.cfg == new and e.fsm.policy.max_deliver == 3 and e.fsm.floor_sseq == 2
    assert e.fsm.next_sseq == 5  # the start of a later assign is ignored
    assert t.apply(ConsumerRemove("D")) is True
    assert t.apply(ConsumerRemove("D")) is None
    assert t.apply(ConsumerAcked("D", (3,), (3,), 1)) is None  # gone: ignored
    assert heard == [("assigned", "D"), ("updated", "D"), ("removed", "D")]


def test_a_bad_config_changes_nothing() -> None:
    t = ConsumerTable()
    with pytest.raises(OpError):
        t.apply(ConsumerAssign("D", b"not json", 1, "C-R3F-x"))
    assert t.entries == {}


def test_apply_at_never_skips_consumer_entries() -> None:
    store = MemoryStreamStore(StreamLimits())
    fsm = StreamStateMachine(store, StreamPolicy(name="S"))
    rfsm = ReplicatedStreamFSM(fsm, skip_through=10)  # the store holds entries 1..10
    pub = StreamMsg((Publish("s.a", None, b"x", 1),))
    assert rfsm.apply_at(encode_op(pub), 3) is None  # skipped: already in the store
    assert store.state().msgs == 0
    out = rfsm.apply_at(encode_op(_assign()), 4)  # applied although below the mark
    assert out is not None and "D" in rfsm.consumers.entries
    rfsm.apply_at(encode_op(ConsumerDelivered("D", (1,), 5)), 5)
    assert rfsm.consumers.entries["D"].fsm.num_ack_pending == 1
    assert rfsm.applied == 10  # consumer entries do not move the stream's mark
    rfsm.apply_at(encode_op(pub), 11)
    assert store.state().msgs == 1 and rfsm.applied == 11
