"""Checkers on synthetic histories: each must pass a good history and FAIL a bad one.

A checker that never fails is a defect, so every property has at least one history built to
violate it.  No servers here: pure functions over hand-made records and reads.
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.checkers import RunData, StreamRead, Verdict, check_all, consumer, kv, replicas, stream
from chaos.history import History, pair


class H:
    """Builds a history with explicit times."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.n = 0

    def op(self, proc: str, f: str, t0: float, t1: float, kind: str, inv: dict, res: dict) -> None:
        self.records.append({"type": "invoke", "op": self.n, "proc": proc, "f": f, "t": t0, **inv})
        self.records.append({"type": kind, "op": self.n, "proc": proc, "f": f, "t": t1, **res})
        self.n += 1

    def pub(self, proc: str, value: str, t0: float, t1: float, seq: int | None, kind="ok") -> None:
        res = {"seq": seq, "dup": False} if kind == "ok" else {}
        self.op(proc, "publish", t0, t1, kind, {"value": value}, res)

    def deliver(
        self, t: float, seq: int, cseq: int, n: int, value: str, fetched: float | None = None
    ) -> None:
        rec = {
            "type": "deliver",
            "t": t,
            "proc": "w3-0",
            "seq": seq,
            "cseq": cseq,
            "n": n,
            "value": value,
        }
        if fetched is not None:
            rec["fetched"] = fetched
        self.records.append(rec)

    def data(self, reads: dict[str, dict[int, str]], **kw: Any) -> RunData:
        rs = {}
        for node, msgs in reads.items():
            seqs = sorted(msgs)
            st = {
                "first_seq": seqs[0] if seqs else 0,
                "last_seq": seqs[-1] if seqs else 0,
                "messages": len(seqs),
                "num_deleted": 0,
            }
            sr = StreamRead(st, {s: ("log.0", p) for s, p in msgs.items()}, complete=True)
            rs[node] = {"LOG": sr}
        return RunData(pair(self.records), self.records, rs, **kw)


def by_name(vs: list[Verdict], name: str) -> Verdict:
    return next(v for v in vs if v.name == name)


def good_log() -> tuple[H, dict[str, dict[int, str]]]:
    h = H()
    h.pub("w1-0", "a0", 0.0, 0.1, 1)
    h.pub("w1-1", "b0", 0.05, 0.2, 2)
    h.pub("w1-0", "a1", 0.3, 0.4, 3)
    h.pub("w1-1", "b1", 0.35, 0.9, None, kind="info")
    log = {1: "a0", 2: "b0", 3: "a1"}
    return h, {"n1": dict(log), "n2": dict(log), "n3": dict(log)}


def test_good_history_passes_every_stream_check() -> None:
    h, reads = good_log()
    vs = stream.check(h.data(reads)) + replicas.check(h.data(reads))
    for v in vs:
        if v.name in ("W2",):
            continue
        assert v.ok is True, v


def test_s1_lost_ack_and_loss_classes() -> None:
    h, reads = good_log()
    h.pub("w1-0", "a2", 0.5, 0.6, 4)
    h.pub("w1-0", "a3", 0.7, 0.8, 5)
    for n in reads:
        reads[n][5] = "a3"  # a2 (seq 4) lost on every replica: a middle loss for w1-0
    del reads["n3"][1]  # and a0 lost on n3: a prefix loss
    v = stream.s1_no_lost_ack(h.data(reads))
    assert v.ok is False and v.bad == 2
    assert v.detail["classes"] == {"lost-prefix": 1, "lost-middle": 1, "lost-postfix": 0}


def test_loss_classification_postfix() -> None:
    h = H()
    for i in range(4):
        h.pub("p", f"v{i}", i, i + 0.5, i + 1)
    ops = pair(h.records)
    assert stream.classify_losses(ops, {ops[2].op, ops[3].op})["lost-postfix"] == 2


def test_s2_fork_and_duplicate() -> None:
    h, reads = good_log()
    reads["n2"][2] = "b1"  # n2 holds another payload at seq 2: a fork
    v = stream.s2_no_fork(h.data(reads))
    assert v.ok is False
    h, reads = good_log()
    for n in reads:
        reads[n][4] = "a1"  # a1 stored twice
    v = stream.s2_no_fork(h.data(reads))
    assert v.ok is False and v.detail["duplicates"] == 3


def test_s4_gap() -> None:
    h, reads = good_log()
    d = h.data(reads)
    d.reads["n1"]["LOG"].msgs.pop(2)  # state still says 1..3
    v = stream.s4_no_gaps(d)
    assert v.ok is False and v.examples[0]["holes"] == [2]


def test_s5_and_s7_order() -> None:
    h = H()
    h.pub("w1-0", "a0", 0.0, 0.1, 5)
    h.pub("w1-0", "a1", 0.2, 0.3, 4)  # acked after a0 returned, yet a lower seq
    h.pub("w1-1", "b0", 0.4, 0.5, 3)  # another producer, later, lower again
    reads = {n: {3: "b0", 4: "a1", 5: "a0"} for n in ("n1", "n2", "n3")}
    assert stream.s5_producer_order(h.data(reads)).bad == 1
    assert stream.s7_ack_monotonic(h.data(reads)).bad == 2
    h2, reads2 = good_log()
    assert stream.s7_ack_monotonic(h2.data(reads2)).ok is True


def test_s6_phantom() -> None:
    h, reads = good_log()
    reads["n1"][4] = "never-written"
    assert stream.s6_no_phantoms(h.data(reads)).ok is False


def test_w2_chain() -> None:
    h = H()
    h.op("w2-0", "append", 0, 0.1, "ok", {"value": "1", "expect": 0}, {"seq": 1})
    h.op("w2-0", "append", 0.2, 0.3, "ok", {"value": "2", "expect": 1}, {"seq": 3})
    d = h.data({})
    d.reads = {
        "n1": {
            "CHAIN": StreamRead(
                {"first_seq": 1, "last_seq": 2, "messages": 2},
                {1: ("chain", "1"), 2: ("chain", "7")},
                True,
            )
        }
    }
    v = stream.w2_chain(d)
    assert v.ok is False and v.bad == 2


def test_s3_divergence() -> None:
    h, reads = good_log()
    assert replicas.s3_replica_agreement(h.data(reads)).ok is True
    reads["n3"][3] = "b1"
    v = replicas.s3_replica_agreement(h.data(reads))
    assert v.ok is False
    assert v.detail["divergent"] == {"LOG": ["n3"]}
    assert v.examples[0]["first_difference_at_seq"] == 3


def consumer_run(deliveries: list[tuple], acks: list[tuple], log: dict[int, str], **kw: Any):
    h = H()
    for t, seq, cseq, n, value, *fetched in deliveries:
        h.deliver(t, seq, cseq, n, value, *fetched)
    for t0, t1, seq in acks:
        h.op("w3-0", "ack", t0, t1, "ok", {"seq": seq}, {})
    return h.data({n: dict(log) for n in ("n1", "n2", "n3")}, **kw)


LOG2 = {1: "a0", 2: "b0"}


def test_consumer_good() -> None:
    d = consumer_run(
        [(0.1, 1, 1, 1, "a0"), (0.2, 2, 2, 1, "b0")],
        [(0.1, 0.15, 1), (0.2, 0.25, 2)],
        LOG2,
        drained=True,
    )
    for v in consumer.check(d):
        assert v.ok in (True, None), v
    assert consumer.c1_at_least_once(d).ok is True


def test_c1_undelivered() -> None:
    d = consumer_run([(0.1, 1, 1, 1, "a0")], [], LOG2, drained=True)
    assert consumer.c1_at_least_once(d).ok is False
    d.drained = False
    assert consumer.c1_at_least_once(d).ok is None


def test_c2_redelivery_after_ack() -> None:
    dl = [(0.1, 1, 1, 1, "a0"), (5.0, 1, 3, 2, "a0"), (0.3, 1, 2, 2, "a0")]
    v = consumer.c2_no_redelivery_after_ack(consumer_run(dl, [(0.1, 0.2, 1)], LOG2))
    assert v.ok is False and v.bad == 1 and v.detail["raced_redeliveries"] == 1


def test_c3_floor_back_and_disagreement() -> None:
    d = consumer_run([], [], LOG2)
    d.records += [
        {"type": "cinfo", "t": 1, "ack_floor": 5},
        {"type": "cinfo", "t": 2, "ack_floor": 3},
    ]
    d.consumers = {"n1": {"ack_floor": 5}, "n2": {"ack_floor": 5}, "n3": {"ack_floor": 4}}
    v = consumer.c3_ack_floor(d)
    assert v.ok is False and v.bad == 2


def test_c4_uncommitted_read() -> None:
    d = consumer_run([(0.1, 3, 1, 1, "ghost")], [], LOG2)
    assert consumer.c4_no_uncommitted_read(d).ok is False


def test_c5_non_monotonic() -> None:
    d = consumer_run([(0.1, 2, 1, 1, "b0"), (0.2, 1, 2, 1, "a0"), (0.3, 1, 3, 1, "a0")], [], LOG2)
    v = consumer.c5_monotonic_delivery(d)
    assert v.ok is False and v.bad == 3  # two pairs out of order, and a repeat with count 1


def kv_ops(spec: list[tuple]) -> list:
    h = H()
    for proc, f, t0, t1, kind, a, b in spec:
        if f == "read":
            h.op(proc, "read", t0, t1, kind, {"key": "k"}, {"value": a})
        else:
            h.op(proc, "cas", t0, t1, kind, {"key": "k", "old": a, "new": b}, {})
    return pair(h.records)


def test_kv_linearizable_and_not() -> None:
    ok = kv_ops([
        ("a", "cas", 0, 1, "ok", 0, 1),
        ("b", "read", 0.5, 1.5, "ok", 1, None),  # concurrent with the cas: may see 1
        ("b", "cas", 2, 3, "fail", 0, 1),  # value is 1, so a cas from 0 fails
        ("c", "cas", 2.5, 9, "info", 1, 2),  # unknown: may or may not have happened
        ("a", "read", 10, 11, "ok", 2, None),
    ])  # fmt: skip
    assert kv.linearizable(ok, 0) is True
    stale = kv_ops([("a", "cas", 0, 1, "ok", 0, 1), ("b", "read", 2, 3, "ok", 0, None)])
    assert kv.linearizable(stale, 0) is False  # a read after the cas returned sees the old value
    lost = kv_ops([("a", "cas", 0, 1, "ok", 0, 1), ("b", "cas", 2, 3, "ok", 0, 1)])
    assert kv.linearizable(lost, 0) is False  # two ok cas from the same value: a lost update
    d = RunData(stale, [], {})
    assert kv.kv_linearizable(d).ok is False


def test_kv_search_budget_gives_unknown() -> None:
    many = kv_ops(
        [(f"p{i}", "cas", 0, 100, "info", i % 2, 1 - i % 2) for i in range(20)]
        + [("z", "read", 0, 100, "ok", 2, None)]
    )
    assert kv.linearizable(many, 0, steps_max=50) is None


def test_liveness_and_check_all() -> None:
    h, reads = good_log()
    d = h.data(reads, drained=True, quiet=True, alive={"n1": True, "n2": False, "n3": True})
    vs = check_all(d)
    assert by_name(vs, "L1").ok is False
    assert {v.name for v in vs} >= {
        "S1",
        "S2",
        "S3",
        "S4",
        "S5",
        "S6",
        "S7",
        "C1",
        "C2",
        "C3",
        "C4",
        "C5",
        "C6",
        "KV",
        "L1",
    }


def test_history_roundtrip(tmp_path) -> None:
    from chaos.history import load

    hist = History(tmp_path / "h.jsonl")
    op = hist.invoke("w1-0", "publish", value="x")
    hist.complete(op, "ok", seq=1)
    hist.invoke("w1-0", "publish", value="y")  # left open: closed as info
    hist.close()
    ops = pair(load(tmp_path / "h.jsonl"))
    assert [(o.inv["value"], o.type) for o in ops] == [("x", "ok"), ("y", "info")]
    assert ops[1].t1 == float("inf")


@pytest.mark.parametrize("v", [Verdict("X", "t", None)])
def test_verdict_with_nothing_checked_is_unknown(v: Verdict) -> None:
    assert v.finish().ok is None


def test_c6_work_queue_retention() -> None:
    h = H()
    h.op("w4-0", "wq-publish", 0, 0.1, "ok", {"value": "q0"}, {"seq": 1})
    h.op("w4-0", "wq-publish", 0.2, 0.3, "ok", {"value": "q1"}, {"seq": 2})
    h.op("w4c-0", "wq-ack", 0.4, 0.5, "ok", {"seq": 1}, {})

    def run_with(msgs: dict[int, str]) -> Verdict:
        d = h.data({})
        st = {"first_seq": min(msgs, default=0), "last_seq": 2, "messages": len(msgs)}
        wq = {s: ("wq.0", p) for s, p in msgs.items()}
        d.reads = {n: {"WQ": StreamRead(st, dict(wq), True)} for n in ("n1", "n2", "n3")}
        return consumer.c6_retention(d)

    assert run_with({2: "q1"}).ok is True
    assert run_with({1: "q0", 2: "q1"}).ok is False  # acked, still there
    assert run_with({}).ok is False  # never acked, gone


def test_c2_c5_judge_by_consumer_order() -> None:
    # a batch's first delivery of seq 1 (cseq 1) is recorded late, after the new
    # leader's redelivery (cseq 3) was acknowledged: neither a redelivery after
    # the ack nor a repeat with count 1 -- the consumer decided cseq 1 first
    dl = [(0.1, 2, 2, 1, "b0"), (0.5, 1, 3, 2, "a0"), (3.0, 1, 1, 1, "a0")]
    d = consumer_run(dl, [(0.5, 0.6, 1)], LOG2)
    assert consumer.c2_no_redelivery_after_ack(d).ok is True
    assert consumer.c5_monotonic_delivery(d).ok is True
    # a delivery decided after the acknowledged one, seen late, still offends
    dl = [(0.1, 1, 1, 1, "a0"), (3.0, 1, 2, 2, "a0")]
    d = consumer_run(dl, [(0.2, 0.3, 1)], LOG2)
    assert consumer.c2_no_redelivery_after_ack(d).ok is False
    # ... unless a delivery with a higher consumer seq arrived within the race window: the
    # redelivery was decided by then and only held up on its way (a paused server)
    dl = [(0.1, 1, 1, 1, "a0"), (0.5, 2, 3, 1, "b0"), (3.0, 1, 2, 2, "a0")]
    v = consumer.c2_no_redelivery_after_ack(consumer_run(dl, [(0.2, 0.3, 1)], LOG2))
    assert v.ok is True and v.detail["raced_redeliveries"] == 1


def test_c2_judges_a_batch_by_when_it_was_fetched() -> None:
    # seeds 21/22 of the composite drill: a new leader redelivers seq 1 (cseq 3) in a batch
    # fetched at 0.15, before another worker's AckSync of seq 1 returned (0.3); the slow worker
    # records it message by message and reaches it at 5.0 -- decided before the ack
    dl = [(0.1, 1, 1, 1, "a0"), (0.15, 2, 2, 2, "b0", 0.15), (5.0, 1, 3, 2, "a0", 0.15)]
    v = consumer.c2_no_redelivery_after_ack(consumer_run(dl, [(0.2, 0.3, 1)], LOG2))
    assert v.ok is True and v.bad == 0
    # without the fetch time it is judged by arrivals, as before: a violation
    d2 = consumer_run([r[:5] for r in dl], [(0.2, 0.3, 1)], LOG2)
    assert consumer.c2_no_redelivery_after_ack(d2).ok is False
    # nats-py handed it out from what reached the subscription for an earlier pull request:
    # fetched late (5.0), arrived early (0.15) -- decided before the ack
    dl = [(0.1, 1, 1, 1, "a0"), (5.0, 1, 3, 2, "a0", 5.0)]
    d3 = consumer_run(dl, [(0.2, 0.3, 1)], LOG2)
    next(r for r in d3.records if r.get("cseq") == 3)["arrived"] = 0.15
    assert consumer.c2_no_redelivery_after_ack(d3).ok is True
    # the same batch fetched after the ack returned is a violation
    dl = [(0.1, 1, 1, 1, "a0"), (2.0, 2, 2, 2, "b0", 2.0), (5.0, 1, 3, 2, "a0", 2.0)]
    v = consumer.c2_no_redelivery_after_ack(consumer_run(dl, [(0.2, 0.3, 1)], LOG2))
    assert v.ok is False and v.bad == 1
