"""Checkers: one property each, over a history and the final per-node reads.

Theory of operation: a checker is a pure function ``(RunData) -> Verdict``.  ``RunData`` holds the
paired ops (``chaos.history.Op``), the raw records (deliveries, samples, faults) and, per node, what
that node's own replica held at the end (``chaos.readback``).  A verdict says ok / violated /
unknown (``None``: the property could not be judged, e.g. a node could not be read), how many
items were checked and how many offend, and the first offending items as examples.  Every checker
is linear in the history (one pass plus dictionary lookups, or a sort), except the KV
linearizability search, which is bounded by a step budget and answers unknown past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.history import Op

EXAMPLES_MAX = 5


@dataclass
class StreamRead:
    """One node's view of one stream at the end: its state and its messages by seq."""

    state: dict[str, int] | None = None  # first_seq, last_seq, messages, num_deleted
    msgs: dict[int, tuple[str, str]] = field(default_factory=dict)  # seq -> (subject, payload)
    complete: bool = False  # every seq first..last was asked for and answered
    error: str | None = None
    absent: bool = False  # the node answered but hosts no such stream: an empty replica


@dataclass
class RunData:
    ops: list[Op]
    records: list[dict[str, Any]]
    reads: dict[str, dict[str, StreamRead]]  # node -> stream -> read
    consumers: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # node -> state
    drained: bool = False
    quiet: bool = True  # replicas agreed on last seqs after healing
    alive: dict[str, bool] = field(default_factory=dict)  # node -> serving at the end


@dataclass
class Verdict:
    name: str
    title: str
    ok: bool | None
    checked: int = 0
    bad: int = 0
    examples: list[Any] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    def offend(self, example: Any, n: int = 1) -> None:
        self.bad += n
        if len(self.examples) < EXAMPLES_MAX:
            self.examples.append(example)

    def finish(self) -> Verdict:
        if self.checked == 0 and self.bad == 0:
            self.detail.setdefault("unknown", "nothing to check")
        if self.ok is None and "unknown" not in self.detail:
            self.ok = self.bad == 0
        elif self.bad:
            self.ok = False
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "ok": self.ok,
            "checked": self.checked,
            "bad": self.bad,
            "examples": self.examples,
            "detail": self.detail,
        }


def liveness(data: RunData) -> Verdict:
    """L1: after healing, every node serves, replicas converge and the consumer drains."""
    v = Verdict("L1", "after healing: every node up, replicas converged, consumer drained", None)
    for node, up in sorted(data.alive.items()):
        v.checked += 1
        if not up:
            v.offend({"node_down_at_end": node})
    v.checked += 2
    if not data.quiet:
        v.offend({"replicas_did_not_converge": True})
    if not data.drained:
        v.offend({"consumer_not_drained": True})
    return v.finish()


def check_all(data: RunData) -> list[Verdict]:
    """Every checker, in the matrix's order."""
    from chaos.checkers import consumer, kv, replicas, stream

    out: list[Verdict] = [liveness(data)]
    out += stream.check(data)
    out += replicas.check(data)
    out += consumer.check(data)
    out += kv.check(data)
    return out
