"""Producer-side checkers S1, S2, S4, S5, S6, S7 and the W2 chain, per chaos-matrix.md.

Theory of operation: publishes (``f == "publish"``, stream LOG, W1) and chain appends
(``f == "append"``, stream CHAIN, W2) are both "writes of a unique value"; an ok write carries the
seq the server acknowledged.  Each node's final read (``StreamRead``) is that node's own replica.

- S1 no lost ack: every ok write's value is at its acked seq on every readable replica.  Lost
  writes are classified per producer as Jepsen does: lost-prefix (before the producer's first
  surviving write), lost-postfix (after its last), lost-middle.
- S2 no fork / uniqueness: one payload per seq across all acks and all reads; each value at most
  once per replica (every value carries a msg-id and runs are shorter than the dedupe window).
- S4 no unexplained gaps: the harness deletes nothing, so each replica holds every seq from
  first_seq to last_seq and first_seq is 1.
- S5 per-producer order / S7 pub-ack monotonic: if a's ack returned before b was invoked, then
  seq(a) < seq(b) — per producer (S5) and across all producers of the stream (S7).  One sort by
  completion time and a sweep: linear after sorting.
- S6 no phantoms: every value read was attempted by some client.
- W2 chain: on CHAIN, every stored message's payload equals its seq (the expected-last-seq chain
  is gapless and never forks), and every ok append was acked at seq == its value.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from chaos.checkers import RunData, StreamRead, Verdict
from chaos.history import Op

WRITES = (("LOG", "publish"), ("CHAIN", "append"))


def _readable(data: RunData, stream: str) -> dict[str, StreamRead]:
    return {
        n: r[stream]
        for n, r in data.reads.items()
        if stream in r and r[stream].error is None and r[stream].state is not None
    }


def _writes(data: RunData, f: str) -> list[Op]:
    return [o for o in data.ops if o.f == f]


def classify_losses(ok_writes: list[Op], lost: set[int]) -> dict[str, int]:
    """Jepsen's classes per producer: ``lost`` holds op ids; ``ok_writes`` any order."""
    by_proc: dict[str, list[Op]] = defaultdict(list)
    for o in ok_writes:
        by_proc[o.proc].append(o)
    out = {"lost-prefix": 0, "lost-middle": 0, "lost-postfix": 0}
    for ops in by_proc.values():
        ops.sort(key=lambda o: o.t0)
        kept = [i for i, o in enumerate(ops) if o.op not in lost]
        for i, o in enumerate(ops):
            if o.op not in lost:
                continue
            if not kept or i < kept[0]:
                out["lost-prefix"] += 1
            elif i > kept[-1]:
                out["lost-postfix"] += 1
            else:
                out["lost-middle"] += 1
    return out


def s1_no_lost_ack(data: RunData) -> Verdict:
    v = Verdict("S1", "no lost ack: every ok write at its seq on every replica", None)
    lost_any: set[int] = set()
    per_node: Counter[str] = Counter()
    all_ok: list[Op] = []
    lost_majority = 0
    for stream, f in WRITES:
        reads = _readable(data, stream)
        oks = [o for o in _writes(data, f) if o.type == "ok"]
        if not reads:
            if oks:
                v.detail["unknown"] = f"no readable replica of {stream}"
            continue
        replicas = [n for n, r in data.reads.items() if stream in r]  # its replicas' reads
        unread = sorted(set(replicas) - set(reads))
        if unread:
            v.detail.setdefault("unreadable", {})[stream] = unread
        for o in oks:
            all_ok.append(o)
            v.checked += 1
            seq, value = o.res["seq"], o.inv["value"]
            missing = [n for n, r in reads.items() if r.msgs.get(seq, ("", None))[1] != value]
            if len(missing) * 2 >= len(replicas):  # not on a majority of all replicas
                lost_majority += 1
            if missing:
                lost_any.add(o.op)
                per_node.update(missing)
                v.offend({"stream": stream, "value": value, "seq": seq, "missing_on": missing})
    v.detail["lost_per_node"] = dict(per_node)
    v.detail["lost_on_majority"] = lost_majority
    v.detail["classes"] = classify_losses(all_ok, lost_any)
    return v.finish()


def s2_no_fork(data: RunData) -> Verdict:
    v = Verdict("S2", "no fork: one payload per seq; each value at most once per replica", None)
    dups = 0
    for stream, f in WRITES:
        seen: dict[int, str] = {}
        for o in _writes(data, f):
            if o.type == "ok":
                seen.setdefault(o.res["seq"], o.inv["value"])
                if seen[o.res["seq"]] != o.inv["value"]:
                    v.offend({"stream": stream, "seq": o.res["seq"], "acked_twice_for": o.inv})
        for node, r in _readable(data, stream).items():
            counts: Counter[str] = Counter()
            for seq, (_subj, payload) in r.msgs.items():
                v.checked += 1
                counts[payload] += 1
                if seen.setdefault(seq, payload) != payload:
                    v.offend({"stream": stream, "node": node, "seq": seq, "fork": payload})
            for value, c in counts.items():
                if c > 1:
                    dups += c - 1
                    v.offend({"stream": stream, "node": node, "duplicate": value, "copies": c})
    v.detail["duplicates"] = dups
    return v.finish()


def s4_no_gaps(data: RunData) -> Verdict:
    v = Verdict("S4", "no unexplained gaps (the harness deletes nothing)", None)
    for stream, _f in WRITES:
        for node, r in _readable(data, stream).items():
            st = r.state or {}
            first, last = st.get("first_seq", 0), st.get("last_seq", 0)
            v.checked += 1
            if st.get("messages", 0) and first != 1:
                v.offend({"stream": stream, "node": node, "first_seq": first})
            if st.get("num_deleted", 0):
                v.offend({"stream": stream, "node": node, "num_deleted": st["num_deleted"]})
            if r.complete:
                holes = [s for s in range(max(first, 1), last + 1) if s not in r.msgs]
                if holes:
                    v.offend({"stream": stream, "node": node, "holes": holes[:10]}, len(holes))
    return v.finish()


def _order_violations(ops: list[Op]) -> list[tuple[Op, Op]]:
    """Pairs (a, b) with a.t1 < b.t0 and seq(a) >= seq(b); one witness a per offending b."""
    done = sorted(ops, key=lambda o: o.t1)
    out = []
    j, best = 0, None
    for b in sorted(ops, key=lambda o: o.t0):
        while j < len(done) and done[j].t1 < b.t0:
            if best is None or done[j].res["seq"] > best.res["seq"]:
                best = done[j]
            j += 1
        if best is not None and best.res["seq"] >= b.res["seq"] and best.op != b.op:
            out.append((best, b))
    return out


def _order_verdict(name: str, title: str, data: RunData, per_proc: bool) -> Verdict:
    v = Verdict(name, title, None)
    for stream, f in WRITES:
        oks = [o for o in _writes(data, f) if o.type == "ok" and not o.res.get("dup")]
        groups: dict[str, list[Op]] = defaultdict(list)
        for o in oks:
            groups[o.proc if per_proc else stream].append(o)
        for ops in groups.values():
            v.checked += len(ops)
            for a, b in _order_violations(ops):
                v.offend(
                    {
                        "stream": stream,
                        "before": [a.inv["value"], a.res["seq"]],
                        "after": [b.inv["value"], b.res["seq"]],
                    }
                )
    return v.finish()


def s5_producer_order(data: RunData) -> Verdict:
    return _order_verdict("S5", "per-producer order: acked before invoked => lower seq", data, True)


def s7_ack_monotonic(data: RunData) -> Verdict:
    return _order_verdict("S7", "pub-ack seqs increase in real-time order", data, False)


def s6_no_phantoms(data: RunData) -> Verdict:
    v = Verdict("S6", "no phantoms: every value read was written by some client", None)
    for stream, f in WRITES:
        attempted = {o.inv["value"] for o in _writes(data, f)}
        for node, r in _readable(data, stream).items():
            for seq, (_subj, payload) in r.msgs.items():
                v.checked += 1
                if payload not in attempted and not (stream == "CHAIN" and seq == 0):
                    v.offend({"stream": stream, "node": node, "seq": seq, "value": payload})
    return v.finish()


def w2_chain(data: RunData) -> Verdict:
    v = Verdict(
        "W2", "CAS chain: payload == seq on every replica; ok append acked at its value", None
    )
    for o in _writes(data, "append"):
        if o.type == "ok":
            v.checked += 1
            if str(o.res["seq"]) != o.inv["value"]:
                v.offend({"append": o.inv["value"], "acked_seq": o.res["seq"]})
    for node, r in _readable(data, "CHAIN").items():
        for seq, (_subj, payload) in r.msgs.items():
            v.checked += 1
            if payload != str(seq):
                v.offend({"node": node, "seq": seq, "payload": payload})
    return v.finish()


def check(data: RunData) -> list[Verdict]:
    return [
        s1_no_lost_ack(data),
        s2_no_fork(data),
        s4_no_gaps(data),
        s5_producer_order(data),
        s6_no_phantoms(data),
        s7_ack_monotonic(data),
        w2_chain(data),
    ]
