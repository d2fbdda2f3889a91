"""Consumer-side checkers C1–C6 for the durable pull consumer ``c1`` on LOG (W3).

Theory of operation: deliveries are ``deliver`` records (stream seq, consumer seq, delivery count,
payload, time); acks are ``ack`` ops (ok = AckSync returned).  The *majority log* is, per seq, the
payload held by a majority of the nodes' own replicas at the end.

- C1 at-least-once: every seq of the majority log was delivered at least once (judged only if the
  drain finished: otherwise unknown, with the count still reported).
- C2 no redelivery after a durable ack: a delivery of s that the consumer decided after the one an
  ok AckSync acknowledged (a higher consumer seq) and that was seen later than ``RACE_S`` after the
  AckSync returned is a violation; earlier ones raced with AckWait expiry and are only counted.  A
  delivery with a lower consumer seq was decided before the acknowledged one, whenever a client
  got round to recording it (a fetched batch is recorded message by message, after the AckSyncs
  of the ones before it, which may each wait out a timeout during a failover).  A delivery was
  decided no later than it reached the client (``arrived``; else ``fetched``, when its fetch
  returned): a redelivery of s that reached a worker before another worker's AckSync of s
  returned raced with it, however late the worker records it -- a slow worker records a batch
  seconds after it was fetched, and nats-py's fetch first hands out what reached the
  subscription for an earlier pull request (seen: seeds 21, 22, 23 of the composite drill --
  sequences recorded 1.5-4.8 s after their acks in batches fetched before them; and one
  recorded 9 s late from a batch that nats-py had queued for an earlier pull request).
- C3 ack floor monotonic and agreed: the sampled ack floor (``cinfo`` records from the leader)
  never decreases, and every node reports the same ack floor, delivered seq and pending at the end.
- C4 no read of uncommitted data: every delivered (seq, payload) is in the majority log.
- C5 monotonic delivery: first deliveries in consumer-seq order have increasing stream seqs, a
  consumer seq never names two stream seqs, and a repeated delivery carries a count above 1
  ("repeated" in the consumer's own order, consumer seqs, not in the order clients recorded them).
- C6 work-queue / interest retention: needs a work-queue workload (W4), not run yet: unknown.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from chaos.checkers import RunData, Verdict

RACE_S = 1.0


def majority_log(data: RunData, stream: str = "LOG") -> dict[int, str] | None:
    """Per seq, the payload a majority of replicas hold; None if no majority was readable."""
    votes: dict[int, Counter[str]] = {}
    readable = 0
    replicas = [r for r in data.reads.values() if stream in r]
    for r in replicas:
        sr = r.get(stream)
        if sr is None or sr.error is not None:
            continue
        readable += 1
        for seq, (_subj, payload) in sr.msgs.items():
            votes.setdefault(seq, Counter())[payload] += 1
    need = len(replicas) // 2 + 1
    if readable < need:
        return None
    out = {}
    for seq, c in votes.items():
        payload, n = c.most_common(1)[0]
        if n >= need:
            out[seq] = payload
    return out


def _deliveries(data: RunData, stream: str = "LOG") -> list[dict[str, Any]]:
    return sorted(
        (
            r
            for r in data.records
            if r.get("type") == "deliver" and r.get("stream", "LOG") == stream
        ),
        key=lambda r: r["t"],
    )


def c1_at_least_once(data: RunData) -> Verdict:
    v = Verdict("C1", "at-least-once: every message of the final log delivered", None)
    delivered = {d["seq"] for d in _deliveries(data)}
    log = majority_log(data)
    if log is None:
        v.detail["unknown"] = "no majority of replicas readable"
        return v.finish()
    for seq in sorted(log):
        v.checked += 1
        if seq not in delivered:
            v.offend({"undelivered_seq": seq})
    if not data.drained:
        v.detail["unknown"] = "drain did not finish"
        v.detail["undelivered"] = v.bad
        v.bad, v.examples = 0, []
    return v.finish()


def c2_no_redelivery_after_ack(data: RunData) -> Verdict:
    v = Verdict("C2", "no redelivery after an ok AckSync", None)
    deliveries = _deliveries(data)
    acked: dict[int, tuple[float, int]] = {}  # seq -> (AckSync returned, cseq it acknowledged)
    for o in data.ops:
        if o.f == "ack" and o.type == "ok":
            s = o.inv["seq"]
            mine = [
                d["cseq"]
                for d in deliveries
                if d["seq"] == s and d.get("proc") == o.proc and d["t"] <= o.t0
            ]
            cseq = max(mine) if mine else 0
            prev = acked.get(s)
            if prev is None or o.t1 < prev[0]:
                acked[s] = (o.t1, cseq)
    # the consumer assigns consumer sequences in order, so a delivery was decided no later
    # than any delivery with a higher one arrived: a redelivery held up on its way (in a
    # paused server's buffers) is judged by when it was decided, not when it arrived
    decided: dict[int, float] = {}
    first_seen = float("inf")
    for d in sorted(deliveries, key=lambda d: d["cseq"], reverse=True):
        first_seen = min(first_seen, d["t"])
        decided[id(d)] = min(first_seen, d.get("arrived", d.get("fetched", first_seen)))
    raced = 0
    for d in deliveries:
        v.checked += 1
        hit = acked.get(d["seq"])
        if hit is None:
            continue
        t_ack, c_ack = hit
        t = decided[id(d)]
        if t <= t_ack or d["cseq"] < c_ack:
            continue
        if t - t_ack <= RACE_S:
            raced += 1
        else:
            v.offend(
                {"seq": d["seq"], "delivered_at": round(d["t"], 3), "acked_at": round(t_ack, 3)}
            )
    v.detail["raced_redeliveries"] = raced
    return v.finish()


def c3_ack_floor(data: RunData) -> Verdict:
    v = Verdict("C3", "ack floor monotonic over time and agreed by all replicas", None)
    prev = None
    for r in sorted((r for r in data.records if r.get("type") == "cinfo"), key=lambda r: r["t"]):
        v.checked += 1
        floor = r["ack_floor"]
        if prev is not None and floor < prev[0]:
            v.offend(
                {"ack_floor_went_back": [prev[0], floor], "at": round(r["t"], 3), "from": prev[1]}
            )
        prev = (floor, r.get("consumer_leader") or r.get("leader"))
    states = {n: s for n, s in data.consumers.items() if s is not None}
    keys = ("ack_floor", "delivered", "num_pending", "num_ack_pending", "absent")
    fps = {n: tuple(s.get(k) for k in keys) for n, s in states.items()}
    v.detail["final"] = {n: dict(zip(keys, fp, strict=True)) for n, fp in fps.items()}
    if len(set(fps.values())) > 1:
        v.offend({"replicas_disagree": v.detail["final"]})
    if len(states) < len(data.consumers):
        v.detail["unknown"] = "a node's consumer state could not be read"
    return v.finish()


def c4_no_uncommitted_read(data: RunData) -> Verdict:
    v = Verdict("C4", "no read of uncommitted data: deliveries are in the majority log", None)
    log = majority_log(data)
    if log is None:
        v.detail["unknown"] = "no majority of replicas readable"
        return v.finish()
    for d in _deliveries(data):
        v.checked += 1
        if log.get(d["seq"]) != d.get("value"):
            v.offend({"seq": d["seq"], "delivered": d.get("value"), "log": log.get(d["seq"])})
    return v.finish()


def c5_monotonic_delivery(data: RunData) -> Verdict:
    v = Verdict("C5", "monotonic delivery: consumer seqs ordered, redeliveries counted", None)
    by_cseq: dict[int, int] = {}
    seen: set[int] = set()
    for d in sorted(_deliveries(data), key=lambda d: (d["cseq"], d["t"])):
        v.checked += 1
        if by_cseq.setdefault(d["cseq"], d["seq"]) != d["seq"]:
            v.offend({"cseq": d["cseq"], "stream_seqs": [by_cseq[d["cseq"]], d["seq"]]})
        if d["seq"] in seen and d["n"] <= 1:
            v.offend({"seq": d["seq"], "redelivered_with_count": d["n"]})
        seen.add(d["seq"])
    firsts = sorted((d["cseq"], d["seq"]) for d in _deliveries(data) if d["n"] == 1)
    for (c1, s1), (c2, s2) in itertools.pairwise(firsts):
        if c1 != c2 and s2 <= s1:
            v.offend({"first_deliveries_out_of_order": [[c1, s1], [c2, s2]]})
    return v.finish()


def c6_retention(data: RunData) -> Verdict:
    """On WQ (work-queue retention): a seq with an ok ack is gone from every replica; an ok
    publish never acked (not even with an unknown outcome) is still present on every replica."""
    v = Verdict("C6", "work-queue retention: acked gone, unacked present", None)
    acked_ok = {o.inv["seq"] for o in data.ops if o.f == "wq-ack" and o.type == "ok"}
    ack_tried = {o.inv["seq"] for o in data.ops if o.f == "wq-ack"}
    published = {
        o.res["seq"]: o.inv["value"] for o in data.ops if o.f == "wq-publish" and o.type == "ok"
    }
    reads = {n: r["WQ"] for n, r in data.reads.items() if "WQ" in r and r["WQ"].error is None}
    if not reads:
        v.detail["unknown"] = "no readable replica of WQ"
        return v.finish()
    for node, r in reads.items():
        for seq in acked_ok:
            v.checked += 1
            if seq in r.msgs:
                v.offend({"node": node, "acked_but_present": seq})
        for seq, value in published.items():
            if seq in ack_tried:
                continue
            v.checked += 1
            if r.msgs.get(seq, ("", None))[1] != value:
                v.offend({"node": node, "unacked_but_missing": seq, "value": value})
    v.detail["acked"] = len(acked_ok)
    return v.finish()


def check(data: RunData) -> list[Verdict]:
    return [
        c1_at_least_once(data),
        c2_no_redelivery_after_ack(data),
        c3_ack_floor(data),
        c4_no_uncommitted_read(data),
        c5_monotonic_delivery(data),
        c6_retention(data),
    ]
