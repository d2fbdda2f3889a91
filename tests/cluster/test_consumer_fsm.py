"""The consumer state machine under a fake clock (times are plain ints in ns).

Each test drives ``ConsumerStateMachine`` with encoded ops exactly as the
shell does (``next_messages`` to choose, ``ConsumerDelivered`` to decide,
``next_due_ns`` + ``ConsumerTimeouts`` for timers) over a memory stream store.
"""

from __future__ import annotations

import io

import pytest

from cluster.consumer_fsm import (
    ConsumerOutcome,
    ConsumerStateMachine,
    MaxDeliveries,
    Nakked,
    Terminated,
    count_pending,
    next_messages,
    policy_of,
    rfc3339_to_ns,
    select_start,
)
from cluster.consumer_model import AckPolicy, ConsumerConfig, DeliverPolicy
from cluster.ops import (
    AckItem,
    AckKind,
    ConsumerAcks,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerOp,
    ConsumerPolicy,
    ConsumerPolicyUpdate,
    ConsumerStreamFirst,
    ConsumerTimeouts,
    OpDecodeError,
    OpError,
    decode_any,
    encode_op,
)
from store.memory import MemoryConsumerStore, MemoryStreamStore

S = 1_000_000_000
T0 = 1_700_000_000 * S


def stream(*subjects: str, t0: int = T0) -> MemoryStreamStore:
    st = MemoryStreamStore()
    for i, subj in enumerate(subjects):
        st.append(subj, b"", f"m{i + 1}".encode(), t0 + i)
    return st


class Harness:
    """A consumer over a stream, with a fake clock."""

    def __init__(self, store: MemoryStreamStore, cfg: ConsumerConfig, now: int = T0) -> None:
        self.store = store
        self.cstore = MemoryConsumerStore()
        self.cfg = cfg
        self.now = now
        self.fsm = ConsumerStateMachine("c", self.cstore)
        start, lss = select_start(cfg, store)
        self.apply(ConsumerCreated("c", policy_of(cfg), start, lss))

    def apply(self, op: ConsumerOp):  # type: ignore[no-untyped-def]
        data = encode_op(op)
        assert decode_any(data) == op
        return self.fsm.apply(data)

    def fetch(self, n: int) -> list[tuple[int, int, int]]:
        """Deliver up to ``n``: ``(sseq, dseq, dc)`` each."""
        msgs = []
        for m in next_messages(self.fsm, self.store):
            msgs.append(m.seq)
            if len(msgs) == n:
                break
        if not msgs:
            return []
        out = self.apply(ConsumerDelivered("c", tuple(msgs), self.now))
        return [(d.sseq, d.dseq, d.dc) for d in out.deliveries]

    def ack(self, kind: AckKind, sseq: int, dseq: int, delay: int = -1, reason: str = ""):  # type: ignore[no-untyped-def]
        return self.apply(ConsumerAcks("c", (AckItem(kind, sseq, dseq, delay, reason),), self.now))

    def tick_to(self, t: int):  # type: ignore[no-untyped-def]
        self.now = t
        return self.apply(ConsumerTimeouts("c", t))


def explicit(**kw: object) -> ConsumerConfig:
    base: dict[str, object] = {
        "ack_policy": AckPolicy.EXPLICIT,
        "ack_wait_ns": 30 * S,
        "max_deliver": -1,
    }
    base.update(kw)
    return ConsumerConfig(**base)  # type: ignore[arg-type]


def test_deliver_and_explicit_ack_move_floor_from_bottom() -> None:
    h = Harness(stream("a", "b", "c"), explicit())
    assert h.fetch(10) == [(1, 1, 1), (2, 2, 1), (3, 3, 1)]
    assert h.fsm.num_ack_pending == 3
    h.ack(AckKind.ACK, 2, 2)  # not the bottom: floor stays
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (0, 0)
    h.ack(AckKind.ACK, 1, 1)  # bottom: floor jumps below the next pending
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (2, 2)
    out = h.ack(AckKind.ACK, 3, 3)
    assert out.acked == [3]
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (3, 3)
    assert h.fsm.num_ack_pending == 0
    assert h.fetch(1) == []


def test_acks_for_unknown_or_undelivered_messages() -> None:
    h = Harness(stream("a", "b"), explicit())
    h.fetch(1)
    assert h.ack(AckKind.ACK, 2, 2).acks[0].ok is False  # beyond delivered: ignored, no reply
    assert h.ack(AckKind.ACK, 1, 1).acks[0].ok is True
    again = h.ack(AckKind.ACK, 1, 1)  # double ack: harmless
    assert again.acks[0].ok is True and again.acked == []
    assert h.ack(AckKind.ACK, 99, 99).acks[0].ok is False
    assert h.ack(AckKind.NAK, 1, 1).events == []  # nak of an acked message: nothing


def test_ack_wait_redelivery_keeps_original_consumer_seq_in_pending() -> None:
    h = Harness(stream("a", "b"), explicit(ack_wait_ns=2 * S))
    assert h.fetch(2) == [(1, 1, 1), (2, 2, 1)]
    assert h.fsm.next_due_ns() == T0 + 2 * S
    assert h.tick_to(T0 + 2 * S - 1).wake is False
    assert h.fsm.redeliveries() == []
    assert h.tick_to(T0 + 2 * S).wake is True
    assert h.fsm.redeliveries() == [1, 2]
    assert h.fsm.next_due_ns() is None  # everything queued
    assert h.fetch(1) == [(1, 3, 2)]
    assert h.fsm.pending[1][0] == 1
    assert h.fsm.num_redelivered == 1
    h.ack(AckKind.ACK, 1, 3)
    assert h.fsm.num_redelivered == 0


def test_backoff_schedule_and_max_deliveries() -> None:
    # nats-server: backoff [1s,3s], max_deliver 4 -> deliveries at 0, 1, 4, 7 s;
    # at 10 s the last delivery's timer runs out and the message is queued
    # like any other; it is given up (advisory) only when taken off the queue.
    cfg = explicit(ack_wait_ns=1 * S, backoff_ns=(1 * S, 3 * S), max_deliver=4)
    h = Harness(stream("a"), cfg)
    times = []
    t = T0
    h.fetch(1)
    times.append(0)
    while len(times) < 4:
        due = h.fsm.next_due_ns()
        assert due is not None
        t = due
        assert h.tick_to(t).events == []
        assert h.fetch(1)
        times.append((t - T0) // S)
    assert times == [0, 1, 4, 7]
    assert h.fsm.next_due_ns() == T0 + 10 * S
    out = h.tick_to(T0 + 10 * S)
    assert out.events == [] and out.acked == [] and out.wake
    assert h.fsm.redeliveries() == [1]
    assert (h.fsm.num_ack_pending, h.fsm.num_redelivered) == (1, 1)
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (0, 0)
    assert h.fsm.next_due_ns() is None  # queued: no timer until taken off
    out = h.apply(ConsumerDelivered("c", (1,), T0 + 12 * S))  # the next pull
    assert out.deliveries == [] and out.events == [MaxDeliveries(1, 4)]
    assert out.acked == [1] and out.wake
    assert h.fsm.redeliveries() == []
    assert (h.fsm.num_ack_pending, h.fsm.num_redelivered) == (0, 1)
    assert h.fsm.deliveries(1) == 5  # nats-server keeps the count it reached
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (4, 1)  # see the delivery compat test


def test_max_deliver_given_up_on_the_next_pull_then_new_messages_follow() -> None:
    h = Harness(stream("a", "b"), explicit(ack_wait_ns=1 * S, max_deliver=2))
    assert h.fetch(1) == [(1, 1, 1)]
    h.tick_to(T0 + 1 * S)
    h.now = T0 + 1 * S
    assert h.fetch(1) == [(1, 2, 2)]
    h.tick_to(T0 + 2 * S)
    assert h.fsm.num_ack_pending == 1 and h.fsm.redeliveries() == [1]
    h.now = T0 + 5 * S
    out = h.apply(ConsumerDelivered("c", (1,), h.now))
    assert out.events == [MaxDeliveries(1, 2)] and out.deliveries == [] and out.wake
    assert h.fetch(1) == [(2, 3, 1)]  # the same request then gets the next message


def test_max_deliver_1_is_given_up_at_the_timeout() -> None:
    # nats-server's timer check counts redeliveries (at least 1) against
    # max_deliver: with max_deliver 1 the message is given up right there
    h = Harness(stream("a", "b"), explicit(ack_wait_ns=1 * S, max_deliver=1))
    h.fetch(2)
    h.ack(AckKind.ACK, 2, 2)
    out = h.tick_to(T0 + 1 * S)
    assert out.events == [MaxDeliveries(1, 1)] and out.acked == [1]
    assert h.fsm.redeliveries() == [] and h.fsm.num_ack_pending == 0
    assert h.fetch(1) == []


def test_max_deliver_lowered_under_the_count_gives_up_silently() -> None:
    # the advisory goes out once, when the count is exactly max_deliver
    h = Harness(stream("a", "b"), explicit(ack_wait_ns=1 * S, max_deliver=5))
    h.fetch(2)
    for i in (1, 2):
        h.now = T0 + i * S
        h.tick_to(h.now)
        h.fetch(2)
    assert (h.fsm.deliveries(1), h.fsm.deliveries(2)) == (3, 3)
    h.ack(AckKind.NAK, 2, 6)
    h.apply(ConsumerPolicyUpdate("c", policy_of(explicit(ack_wait_ns=1 * S, max_deliver=2))))
    out = h.apply(ConsumerDelivered("c", (2,), h.now))  # -NAK'd, taken off the queue
    assert out.events == [] and out.acked == [2]
    out = h.tick_to(T0 + 3 * S)  # 1: two redeliveries >= 2, at the timer
    assert out.events == [MaxDeliveries(1, 2)] and out.acked == [1]
    assert h.fsm.num_ack_pending == 0


def test_nak_now_and_nak_with_delay_and_progress() -> None:
    h = Harness(stream("a", "b"), explicit(ack_wait_ns=30 * S))
    h.fetch(2)
    out = h.ack(AckKind.NAK, 1, 1)
    assert out.events == [Nakked(1, 1, 1)] and out.wake
    assert h.fsm.redeliveries() == [1]
    h.now = T0 + 1 * S
    h.ack(AckKind.NAK, 2, 2, delay=5 * S)
    assert h.fsm.next_due_ns() == T0 + 6 * S  # delay counted from the nak
    assert h.fetch(5) == [(1, 3, 2)]  # 2 is waiting for its delay
    h.now = T0 + 3 * S
    h.ack(AckKind.PROGRESS, 1, 3)  # +WPI restarts 1's timer
    assert h.fsm.deadline_ns(1) == T0 + 33 * S
    h.tick_to(T0 + 6 * S)
    assert h.fsm.redeliveries() == [2]
    assert h.fetch(5) == [(2, 4, 2)]


def test_term_acks_and_reports() -> None:
    h = Harness(stream("a"), explicit())
    h.fetch(1)
    out = h.ack(AckKind.TERM, 1, 1, reason="bad")
    assert out.events == [Terminated(1, 1, 1, "bad")]
    assert out.acked == [1]
    assert h.fsm.num_ack_pending == 0


def test_ack_all_acks_everything_below() -> None:
    h = Harness(stream("a", "b", "c", "d"), explicit(ack_policy=AckPolicy.ALL))
    h.fetch(4)
    out = h.ack(AckKind.ACK, 3, 3)
    assert out.acked == [1, 2, 3]
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (3, 3)
    assert h.ack(AckKind.ACK, 2, 2).acked == []  # below the floor: no-op, still answered


def test_ack_none_moves_floor_with_deliveries_and_has_no_timers() -> None:
    h = Harness(stream("a", "b"), ConsumerConfig(max_deliver=-1))
    assert h.fetch(5) == [(1, 1, 1), (2, 2, 1)]
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (2, 2)
    assert h.fsm.num_ack_pending == 0 and h.fsm.next_due_ns() is None


def test_max_ack_pending_stalls_new_messages_not_redeliveries() -> None:
    h = Harness(stream("a", "b", "c"), explicit(max_ack_pending=2, ack_wait_ns=S))
    assert [d[0] for d in h.fetch(10)] == [1, 2]
    assert h.fetch(10) == []
    h.tick_to(T0 + S)
    assert [d[0] for d in h.fetch(10)] == [1, 2]  # redeliveries pass
    out = h.ack(AckKind.ACK, 1, 3)
    assert out.wake
    assert [d[0] for d in h.fetch(10)] == [3]


def test_filters_and_pending_count() -> None:
    st = stream("a.1", "b.1", "a.2", "c", "a.1")
    h = Harness(st, explicit(filter_subjects=("a.*", "c")))
    assert count_pending(st, ("a.*", "c"), 1) == 4
    assert [d[0] for d in h.fetch(2)] == [1, 3]
    assert count_pending(st, ("a.*", "c"), h.fsm.next_sseq) == 2
    assert [d[0] for d in h.fetch(9)] == [4, 5]
    assert count_pending(st, (), 3) == 3


def test_stream_purge_drops_pending_and_moves_floor() -> None:
    st = stream("a", "b", "c")
    h = Harness(st, explicit())
    h.fetch(2)
    st.purge()
    h.apply(ConsumerStreamFirst("c", 4))
    assert h.fsm.num_ack_pending == 0
    assert (h.fsm.floor_dseq, h.fsm.floor_sseq) == (2, 3)
    assert h.fsm.next_sseq == 4
    st.append("d", b"", b"x", T0 + 9)
    assert h.fetch(5) == [(4, 3, 1)]


@pytest.mark.parametrize(
    ("cfg", "start", "lss"),
    [
        (ConsumerConfig(), 1, ()),
        (ConsumerConfig(deliver_policy=DeliverPolicy.NEW), 6, ()),
        (ConsumerConfig(deliver_policy=DeliverPolicy.LAST), 5, ()),
        (ConsumerConfig(deliver_policy=DeliverPolicy.LAST, filter_subject="b"), 2, ()),
        (ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=3), 3, ()),
        (
            ConsumerConfig(
                deliver_policy=DeliverPolicy.BY_START_TIME,
                opt_start_time="2023-11-14T22:13:20.000000002Z",
            ),
            3,
            (),
        ),
        (
            ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subject=">"),
            6,
            (2, 4, 5),
        ),
    ],
)
def test_select_start(cfg: ConsumerConfig, start: int, lss: tuple[int, ...]) -> None:
    st = stream("a", "b", "a", "c", "a")
    assert select_start(cfg, st) == (start, lss)


def test_last_per_subject_delivers_lasts_then_new() -> None:
    st = stream("a", "b", "a")
    cfg = ConsumerConfig(
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subject=">", max_deliver=-1
    )
    h = Harness(st, cfg)
    assert [d[0] for d in h.fetch(10)] == [2, 3]
    st.append("b", b"", b"n", T0 + 10)
    assert [d[0] for d in h.fetch(10)] == [4]


def test_state_survives_a_new_machine_over_the_same_store() -> None:
    h = Harness(stream("a", "b", "c"), explicit(ack_wait_ns=S))
    h.fetch(3)
    h.ack(AckKind.ACK, 1, 1)
    h.tick_to(T0 + S)
    h.fetch(1)
    again = ConsumerStateMachine("c", h.cstore)
    assert again.state() == h.fsm.state()
    assert again.deliveries(2) == 2


def test_snapshot_restore_round_trip() -> None:
    h = Harness(stream("a", "b"), explicit())
    h.fetch(2)
    h.ack(AckKind.NAK, 2, 2)
    other = ConsumerStateMachine("c", MemoryConsumerStore())
    other.restore(io.BytesIO(h.fsm.snapshot()))
    assert other.state() == h.fsm.state() and other.redeliveries() == [2]
    with pytest.raises(ValueError):
        other.restore(io.BytesIO(b"\x00junk"))


def test_ops_for_another_consumer_or_bad_entries_are_refused() -> None:
    h = Harness(stream("a"), explicit())
    with pytest.raises(OpError):
        h.fsm.apply(encode_op(ConsumerTimeouts("other", T0)))
    with pytest.raises(OpDecodeError):
        h.fsm.apply(b"\xff\x00")
    with pytest.raises(OpError):
        ConsumerPolicy(ack="sometimes")


def test_rfc3339_to_ns() -> None:
    assert rfc3339_to_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert rfc3339_to_ns("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(ValueError):
        rfc3339_to_ns("yesterday")


@pytest.mark.parametrize(
    "policy",
    [
        DeliverPolicy.LAST,
        DeliverPolicy.NEW,
        DeliverPolicy.BY_START_TIME,
        DeliverPolicy.LAST_PER_SUBJECT,
    ],
)
def test_a_restart_keeps_the_start_chosen_when_nothing_was_delivered(
    policy: DeliverPolicy,
) -> None:
    """Created on an empty stream the start is 1 and ``delivered_stream_seq``
    stays 0; the saved state must still say the start was chosen, so that a
    restart (a new machine over the same store, proposing the start its
    config selects now) does not skip what was published in between (as
    nats-server, which goes on from its stored position)."""
    store = MemoryStreamStore()
    cfg = explicit(deliver_policy=policy, opt_start_time="2023-11-14T22:13:21Z", filter_subject="a")
    h = Harness(store, cfg)
    assert h.fsm.next_sseq == 1
    for subj in ("a", "b", "a"):
        store.append(subj, b"", b"x", T0 + 10)
    again = ConsumerStateMachine("c", h.cstore)
    start, lss = select_start(cfg, store)
    assert start > 1  # choosing again would skip 1..3
    again.apply(encode_op(ConsumerCreated("c", policy_of(cfg), start, lss)))
    assert (again.next_sseq, again.lss) == (1, [])
    h.fsm = again
    assert h.fetch(10) == [(1, 1, 1), (3, 2, 1)]


def test_ack_none_delivered_fast_path_matches_general_loop() -> None:
    """The ack-none batch path yields the same deliveries and state as the
    general loop, including a stale sequence mid-batch (falls back there)."""
    cfg = ConsumerConfig(
        durable_name="c", ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL
    )
    fast, slow = Harness(stream("a", "a", "a", "a", "a"), cfg), Harness(stream("a"), cfg)
    for sseqs in ((1, 2, 3), (4, 2, 5)):
        op = ConsumerDelivered("c", sseqs, T0)
        a, b = ConsumerOutcome(), ConsumerOutcome()
        fast.fsm._delivered(op, a)
        slow.fsm._delivered_from(op.sseqs, op.now_ns, b)
        assert a.deliveries == b.deliveries
        for attr in ("next_sseq", "dseq", "floor_dseq", "floor_sseq", "last_delivered_ns"):
            assert getattr(fast.fsm, attr) == getattr(slow.fsm, attr), attr
    assert fast.fsm.dseq == 5 and fast.fsm.floor_sseq == 5
