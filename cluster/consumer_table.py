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

When the stream group compacts its journal, the table goes into the group's
state snapshot whole (``snapshot_doc``: every consumer's config, position,
ack floor, pending and redelivery counts, redelivery queue) and
``restore_doc`` puts it back exactly, so the entries after the snapshot apply
to the same state on every replica.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster.consumer_fsm import ConsumerOutcome, ConsumerStateMachine, policy_of
from cluster.consumer_model import ConsumerConfig
from cluster.consumer_ops import decode_consumer_policy, encode_consumer_policy
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

    def snapshot_doc(self) -> list[Any]:
        """Every consumer's whole state, cbor-ready, in name order."""
        return [_entry_doc(name, self.entries[name]) for name in sorted(self.entries)]

    def restore_doc(self, doc: object) -> None:
        """Replace the table with ``snapshot_doc``'s; listeners hear ``removed``
        for consumers gone, ``updated`` for those held before (their state
        machine object stays: its state is replaced in place, so a shell
        holding it goes on) and ``assigned`` for new ones.

        Raises:
            OpError: the document is malformed (the table is unchanged).
        """
        if type(doc) is not list:
            raise _op_error("consumer table must be an array")
        entries = dict(_entry_from_doc(item) for item in doc)
        old = self.entries
        events: list[tuple[str, str]] = [("removed", n) for n in old if n not in entries]
        for name, new in entries.items():
            have = old.get(name)
            if have is None:
                events.append(("assigned", name))
                continue
            for attr in _FSM_STATE:
                setattr(have.fsm, attr, getattr(new.fsm, attr))
            have.cfg, have.created_ns, have.group = new.cfg, new.created_ns, new.group
            entries[name] = have
            events.append(("updated", name))
        self.entries = entries
        for event, name in events:
            self._tell(event, name)

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


#: what a consumer's snapshot replaces of its state machine
_FSM_STATE = (
    "policy",
    "dseq",
    "next_sseq",
    "floor_dseq",
    "floor_sseq",
    "pending",
    "rdc",
    "rdq",
    "lss",
    "started",
    "_lss_resume",
    "last_delivered_ns",
    "last_ack_ns",
    "_unsaved",
)


def _op_error(msg: str) -> Exception:
    from cluster.ops import OpError

    return OpError(msg)


def _entry_doc(name: str, e: TableEntry) -> list[Any]:
    f = e.fsm
    return [
        name,
        config_bytes(e.cfg),
        e.created_ns,
        e.group,
        encode_consumer_policy(f.policy),
        [f.dseq, f.next_sseq, f.floor_dseq, f.floor_sseq],
        [[s, p[0], p[1]] for s, p in f.pending.items()],
        [[s, n] for s, n in f.rdc.items()],
        list(f.rdq),
        list(f.lss),
        [f.started, f._lss_resume, f.last_delivered_ns, f.last_ack_ns],
    ]


def _ints(v: object, n: int | None = None) -> list[int]:
    if type(v) is not list or (n is not None and len(v) != n):
        raise _op_error("consumer snapshot: integer array expected")
    if not all(type(x) is int for x in v):
        raise _op_error("consumer snapshot: integers expected")
    return v


def _entry_from_doc(item: object) -> tuple[str, TableEntry]:
    if type(item) is not list or len(item) != 11:
        raise _op_error("consumer snapshot entry must be an array of 11")
    name, cfg_b, created, group, pol, pos, pending, rdc, rdq, lss, misc = item
    if type(name) is not str or type(group) is not str or type(cfg_b) is not bytes:
        raise _op_error("consumer snapshot: bad name, group or config")
    if type(created) is not int or type(misc) is not list or len(misc) != 4:
        raise _op_error("consumer snapshot: bad creation time or flags")
    cfg = _config(cfg_b)
    fsm = ConsumerStateMachine(name, MemoryConsumerStore(), save_each_op=False)
    fsm.policy = decode_consumer_policy(pol)
    fsm.dseq, fsm.next_sseq, fsm.floor_dseq, fsm.floor_sseq = _ints(pos, 4)
    if type(pending) is not list or type(rdc) is not list:
        raise _op_error("consumer snapshot: pending and redeliveries must be arrays")
    fsm.pending = {s: [d, ts] for s, d, ts in (_ints(p, 3) for p in pending)}
    fsm.rdc = {s: n for s, n in (_ints(r, 2) for r in rdc)}
    fsm.rdq = _ints(rdq)
    fsm.lss = _ints(lss)
    started, resume, last_deliv, last_ack = misc
    if type(started) is not bool:
        raise _op_error("consumer snapshot: started must be a bool")
    fsm.started = started
    fsm._lss_resume, fsm.last_delivered_ns, fsm.last_ack_ns = _ints([resume, last_deliv, last_ack])
    fsm._unsaved = True
    return name, TableEntry(cfg, created, group, fsm)


def config_bytes(cfg: ConsumerConfig) -> bytes:
    """A config as ``ConsumerAssign`` carries it."""
    return json.dumps(cfg.to_dict(), separators=(",", ":"), sort_keys=True).encode()
