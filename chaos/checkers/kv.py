"""KV per-key linearizability of reads and CAS increments (Wing–Gong search with memo).

Theory of operation: each key of bucket CAS is a register holding an integer, written only by
``cas(old -> old+1)`` guarded by the revision a read returned.  Every value of a key is written at
most once (it only grows), so "the revision is still r" is "the value is still old", and the model
is a plain CAS register.  An ok op took effect once between its invoke and its completion; a
``fail`` (wrong last sequence) is an observation that the value was not ``old``; an ``info`` op may
take effect once any time after its invoke, or never.

The search (Wing & Gong, with Lowe's memo of visited (linearized set, value) configurations) picks,
at each step, any pending op invoked before the earliest completion among the pending ok/fail ops,
applies it to the model if the model allows, and succeeds when every ok/fail op is linearized.  It
is exponential in the worst case, so histories are bounded: at most ``OPS_PER_KEY_MAX`` ops per key
(the first ones) and ``STEPS_MAX`` search steps per key; past the step budget the key is unknown.
"""

from __future__ import annotations

from collections import defaultdict

from chaos.checkers import RunData, Verdict
from chaos.history import Op

OPS_PER_KEY_MAX = 600
STEPS_MAX = 200_000


def _step(o: Op, value: int) -> int | None:
    """The register's value after ``o`` from ``value``, or None if ``o`` cannot happen there."""
    if o.f == "read":
        return value if o.res.get("value") == value else None
    old, new = o.inv["old"], o.inv["new"]
    if o.type == "fail":
        return value if value != old else None
    return new if value == old else None


def linearizable(ops: list[Op], init: int, steps_max: int = STEPS_MAX) -> bool | None:
    """Is this single-key history linearizable from ``init``?  None: step budget exhausted."""
    ops = sorted(ops, key=lambda o: o.t0)
    required = 0
    for i, o in enumerate(ops):
        if o.type != "info":
            required |= 1 << i
    seen: set[tuple[int, int]] = set()
    stack = [(0, init)]
    steps = 0
    while stack:
        done, value = stack.pop()
        if done & required == required:
            return True
        if (done, value) in seen:
            continue
        seen.add((done, value))
        steps += 1
        if steps > steps_max:
            return None
        horizon = min(o.t1 for i, o in enumerate(ops) if not done >> i & 1 and o.type != "info")
        for i, o in enumerate(ops):
            if o.t0 > horizon:
                break
            if done >> i & 1:
                continue
            nv = _step(o, value)
            if nv is not None:
                stack.append((done | 1 << i, nv))
    return False


def kv_linearizable(data: RunData) -> Verdict:
    v = Verdict("KV", "KV per-key linearizability of reads and CAS increments", None)
    by_key: dict[str, list[Op]] = defaultdict(list)
    for o in data.ops:
        if (o.f == "read" and o.type == "ok") or o.f == "cas":
            by_key[o.inv["key"]].append(o)
    unknown = []
    for key, ops in sorted(by_key.items()):
        if len(ops) > OPS_PER_KEY_MAX:
            v.detail.setdefault("cut", {})[key] = f"first {OPS_PER_KEY_MAX} of {len(ops)} ops"
        ops = sorted(ops, key=lambda o: o.t0)[:OPS_PER_KEY_MAX]
        # a cut at OPS_PER_KEY_MAX may leave later-invoked ops out: that only weakens the check
        v.checked += len(ops)
        result = linearizable(ops, 0)
        if result is None:
            unknown.append(key)
        elif not result:
            v.offend({"key": key, "ops": len(ops), "first_ops": [_brief(o) for o in ops[:6]]})
    if unknown:
        v.detail["unknown"] = f"search budget exhausted on keys {unknown}"
    return v.finish()


def _brief(o: Op) -> str:
    if o.f == "read":
        return f"{o.proc} read={o.res.get('value')} [{o.t0:.3f},{o.t1:.3f}]"
    return f"{o.proc} cas {o.inv['old']}->{o.inv['new']} {o.type} [{o.t0:.3f},{o.t1:.3f}]"


def check(data: RunData) -> list[Verdict]:
    return [kv_linearizable(data)]
