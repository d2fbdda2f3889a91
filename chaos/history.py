"""Histories: what clients asked, what they were told, and when, as JSON lines.

Theory of operation: every client operation is two records sharing an ``op`` id: an ``invoke``
and one completion, ``ok`` (it happened, with what the server answered), ``fail`` (it certainly did
not happen) or ``info`` (unknown outcome: a timeout, a dropped connection).  Other records are
events: ``deliver`` (a consumer got a message), ``nemesis`` (a fault began or ended), ``leader``
(a stream leader was observed), ``note``.  Times ``t`` are ``time.monotonic()`` seconds since the
run's start, so they order records across tasks.  An invocation left without a completion at the
end of a run is closed as ``info``.

``pair`` turns records into ``Op`` values (invoke and completion merged), which is what checkers
consume; it is one pass over the records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INF = float("inf")


@dataclass
class Op:
    """One completed client operation.

    ``t0`` invoke time, ``t1`` completion time (``INF`` for info: it may take effect any time
    after ``t0``), ``type`` ok/fail/info, ``inv`` the invoke's fields, ``res`` the completion's.
    """

    op: int
    proc: str
    f: str
    type: str
    t0: float
    t1: float
    inv: dict[str, Any] = field(default_factory=dict)
    res: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.res:
            return self.res[key]
        return self.inv.get(key, default)


class History:
    """An append-only list of records, written to ``path`` as they come (when given)."""

    def __init__(self, path: Path | None = None, t_start: float | None = None) -> None:
        self.t_start = time.monotonic() if t_start is None else t_start
        self.records: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}
        self._next = 0
        self._fh = open(path, "w") if path is not None else None

    def now(self) -> float:
        return time.monotonic() - self.t_start

    def _add(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)
        if self._fh is not None:
            self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def invoke(self, proc: str, f: str, **fields: Any) -> int:
        """Record an invocation; returns its op id for ``complete``."""
        op = self._next
        self._next += 1
        rec = {"type": "invoke", "op": op, "proc": proc, "f": f, "t": self.now(), **fields}
        self._open[op] = rec
        self._add(rec)
        return op

    def complete(self, op: int, kind: str, **fields: Any) -> None:
        """Record ``ok``/``fail``/``info`` for ``op``."""
        assert kind in ("ok", "fail", "info"), kind
        inv = self._open.pop(op)
        rec = {"type": kind, "op": op, "proc": inv["proc"], "f": inv["f"], "t": self.now()}
        self._add({**rec, **fields})

    def event(self, kind: str, **fields: Any) -> None:
        self._add({"type": kind, "t": self.now(), **fields})

    def close(self) -> None:
        """Close open invocations as ``info`` and the file."""
        for op in list(self._open):
            self.complete(op, "info", error="open at end of run")
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def load(path: Path) -> list[dict[str, Any]]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def pair(records: Iterable[dict[str, Any]]) -> list[Op]:
    """Merge invoke + completion records into ``Op``s, ordered by invoke."""
    opened: dict[int, dict[str, Any]] = {}
    ops: dict[int, Op] = {}
    for r in records:
        kind = r.get("type")
        if kind == "invoke":
            opened[r["op"]] = r
        elif kind in ("ok", "fail", "info") and r.get("op") in opened:
            inv = opened.pop(r["op"])
            t1 = INF if kind == "info" else r["t"]
            strip = ("type", "op", "proc", "f", "t")
            ops[r["op"]] = Op(
                r["op"],
                inv["proc"],
                inv["f"],
                kind,
                inv["t"],
                t1,
                {k: v for k, v in inv.items() if k not in strip},
                {k: v for k, v in r.items() if k not in strip},
            )
    for op_id, inv in opened.items():  # never completed: unknown outcome
        strip = ("type", "op", "proc", "f", "t")
        extra = {k: v for k, v in inv.items() if k not in strip}
        ops[op_id] = Op(op_id, inv["proc"], inv["f"], "info", inv["t"], INF, extra, {})
    return sorted(ops.values(), key=lambda o: (o.t0, o.op))


def events(records: Iterable[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (r for r in records if r.get("type") == kind)
