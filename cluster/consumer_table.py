"""The consumers of a replicated stream, as its group's log makes them.

Theory of operation
-------------------
A replicated stream's consumers live in the stream's own Raft group: their
ops (``cluster.consumer_ops``: deliveries, acks, timeouts, …) and their life
(``ConsumerAssign``, ``ConsumerRemove``) are entries of the same log as the
stream's messages, so the stream's leader is every consumer's leader and
every replica holds every consumer's state.  ``ConsumerTable`` is that state
on one replica: one ``ConsumerStateMachine`` per consumer, over a memory
``ConsumerStore``, with the consumer's config, creation time and group name.

``ReplicatedStreamFSM.apply_at`` hands every consumer entry to ``apply``,
always: unlike the stream's ops, consumer entries are never skipped by the
stream's applied mark, because the table is memory only and is rebuilt at
start by replaying the journal (stream groups keep their whole journal).  So
everything ``apply`` decides depends only on the entries and the table's own
state -- never on the stream's store, which after a restart already holds
what the replayed entries appended.  What the consumer state machine needs of
the stream (where a new consumer starts, the stream's first sequence after a
purge) is chosen by the proposer and carried in the op.

Shells (``cluster.consumers.Consumer``) are the node's business; the table
tells its ``listeners`` ``(event, name)`` after it applied an assign
(``"assigned"``/``"updated"``) or a removal (``"removed"``), synchronously,
inside apply: a listener must only note or schedule work.

A consumer op naming a consumer the table does not hold (removed meanwhile,
or a proposal made before a removal) is ignored: its result is None.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster.consumer_fsm import ConsumerOutcome, ConsumerStateMachine, policy_of
from cluster.consumer_model import ConsumerConfig
from cluster.ops import (
    ConsumerAssign,
    ConsumerCreated,
    ConsumerOp,
    ConsumerPolicyUpdate,
    ConsumerRemove,
)
from store.memory import MemoryConsumerStore

log = logging.getLogger(__name__)

__all__ = ["ConsumerTable", "TableEntry"]

#: listener(event, consumer name): "assigned", "updated" or "removed"
TableListener = Callable[[str, str], None]


@dataclass
class TableEntry:
    """One consumer of the table.

    Attributes:
        cfg: its config (the last assign's).
        created_ns: its creation time (the first assign's).
        group: its Raft group name as ConsumerInfo shows it (``C-R3F-…``).
        fsm: its state machine (memory store).
    """

    cfg: ConsumerConfig
    created_ns: int
    group: str
    fsm: ConsumerStateMachine


class ConsumerTable:
    """The consumers of one replicated stream on this replica."""

    def __init__(self) -> None:
        self.entries: dict[str, TableEntry] = {}
        self.listeners: list[TableListener] = []

    def apply(self, op: ConsumerOp | ConsumerAssign | ConsumerRemove) -> Any:
        """Apply one consumer entry.

        Returns:
            The ``ConsumerOutcome`` of a consumer op or an assign; True for
            a removal that removed; None for an entry about a consumer not
            held (ignored).

        Raises:
            OpError: an assign whose config is not a consumer config (the
                table is unchanged).
        """
        if isinstance(op, ConsumerAssign):
            return self._assign(op)
        if isinstance(op, ConsumerRemove):
            if self.entries.pop(op.consumer, None) is None:
                return None
            self._tell("removed", op.consumer)
            return True
        e = self.entries.get(op.consumer)
        if e is None:
            return None
        return e.fsm.apply_op(op)

    def _assign(self, op: ConsumerAssign) -> ConsumerOutcome:
        cfg = _config(op.config)
        name = op.consumer
        e = self.entries.get(name)
        if e is None:
            fsm = ConsumerStateMachine(name, MemoryConsumerStore(), save_each_op=False)
            out = fsm.apply_op(
                ConsumerCreated(name, policy_of(cfg), op.start_seq, op.last_per_subject)
            )
            self.entries[name] = TableEntry(cfg, op.created_ns, op.group, fsm)
            self._tell("assigned", name)
            return out
        e.cfg = cfg
        out = e.fsm.apply_op(ConsumerPolicyUpdate(name, policy_of(cfg)))
        self._tell("updated", name)
        return out

    def snapshot(self) -> list[tuple[str, bytes, int, str, bytes]]:
        """Every consumer as ``(name, config bytes, created_ns, group, fsm snapshot)``."""
        return [
            (name, config_bytes(e.cfg), e.created_ns, e.group, e.fsm.snapshot())
            for name, e in sorted(self.entries.items())
        ]

    def install(self, consumers: list[tuple[str, bytes, int, str, bytes]]) -> None:
        """Replace the table with ``snapshot()``'s output.  A consumer held
        already keeps its state machine object (its shell stays), restored
        in place; listeners hear "removed", "assigned" or "updated".

        Raises:
            OpError: a config that is not a consumer config.
            ValueError: a malformed consumer state.
        """
        fresh: dict[str, TableEntry] = {}
        for name, cfg_doc, created_ns, group, state in consumers:
            cfg = _config(cfg_doc)
            e = self.entries.get(name)
            fsm = (
                e.fsm
                if e is not None
                else ConsumerStateMachine(name, MemoryConsumerStore(), save_each_op=False)
            )
            fsm.restore(io.BytesIO(state))
            fsm.policy = policy_of(cfg)
            fresh[name] = TableEntry(cfg, created_ns, group, fsm)
        gone = [n for n in self.entries if n not in fresh]
        old = self.entries
        self.entries = fresh
        for n in gone:
            self._tell("removed", n)
        for n in fresh:
            self._tell("updated" if n in old else "assigned", n)

    def _tell(self, event: str, name: str) -> None:
        for listener in list(self.listeners):
            try:
                listener(event, name)
            except Exception:  # a shell's trouble never changes what was applied
                log.exception("event=consumer_table_listener_failed consumer=%s", name)


def _config(doc: bytes) -> ConsumerConfig:
    from cluster.ops import OpError

    try:
        return ConsumerConfig.from_dict(json.loads(doc))
    except Exception as e:  # any damage: the entry is refused, nothing changes
        raise OpError(f"consumer_assign config: {type(e).__name__}: {e}") from e


def config_bytes(cfg: ConsumerConfig) -> bytes:
    """A config as ``ConsumerAssign`` carries it."""
    return json.dumps(cfg.to_dict(), separators=(",", ":"), sort_keys=True).encode()
