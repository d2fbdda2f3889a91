"""A pysyncobj Transport whose ``send`` only appends to an outbox.

Theory of operation
-------------------
pysyncobj calls ``send(node, message)`` synchronously from inside its tick
and message handlers. :class:`OutboxTransport` never does I/O there: it
records ``(peer_id, message)`` in a per-cycle outbox that :mod:`raft.core`
encodes (cbor, :mod:`raft.wire`) and the driver hands to the peer links only
after the journal is durable. Inbound messages are injected with
:meth:`OutboxTransport.deliver`.

Every member is reported "connected" (Raft tolerates loss; the links retry on
their own). Two uses of pysyncobj's connected set remain:

* a per-peer *per-cycle byte budget*: once a peer's outbox exceeds
  ``budget_bytes`` the peer is reported disconnected, which makes pysyncobj's
  append-entries loop stop for that peer; :meth:`reconnect_all` (start of each
  cycle) reports it connected again. This bounds the work one cycle does for a
  far-behind follower.
* membership changes (``addNode``/``dropNode``).

``next_node_idx`` responses are stamped with the sender's current term (see
:mod:`raft.wire`).
"""

from __future__ import annotations

from typing import Any

from pysyncobj.node import Node
from pysyncobj.transport import Transport

__all__ = ["OutboxTransport", "message_size_estimate"]

Message = dict[str, Any]


def message_size_estimate(m: Message) -> int:
    """Rough encoded size of a message (dominated by entry commands and chunks)."""
    n = 48
    ents = m.get("entries")
    if ents:
        n += sum(len(e[0]) + 24 for e in ents)
    ser = m.get("serialized")
    if ser:
        n += len(ser[0])
    cmd = m.get("command")
    if cmd:
        n += len(cmd)
    return n


class OutboxTransport(Transport):  # type: ignore[misc]
    """Outbox-only transport owned by one :class:`raft.core.RaftCore`."""

    def __init__(self, budget_bytes: int) -> None:
        super().__init__(None, None, ())
        self.budget_bytes = budget_bytes
        self.outbox: dict[str, list[Message]] = {}
        self._bytes: dict[str, int] = {}
        self._members: dict[str, Node] = {}
        self._over_budget: set[str] = set()
        self.syncobj: Any = None

    # ---- pysyncobj Transport API

    @property
    def ready(self) -> bool:
        return True

    def tryGetReady(self) -> None:
        return None

    def addNode(self, node: Node) -> None:
        self._members[node.id] = node
        self._onNodeConnected(node)

    def dropNode(self, node: Node) -> None:
        self._members.pop(node.id, None)
        self._onNodeDisconnected(node)

    def send(self, node: Node, message: Message) -> bool:
        if message["type"] == "next_node_idx" and self.syncobj is not None:
            message["term"] = self.syncobj.raftCurrentTerm
        pid = node.id
        self.outbox.setdefault(pid, []).append(message)
        b = self._bytes.get(pid, 0) + message_size_estimate(message)
        self._bytes[pid] = b
        if b > self.budget_bytes and pid not in self._over_budget:
            self._over_budget.add(pid)
            self._onNodeDisconnected(node)
        return True

    def destroy(self) -> None:
        self.outbox.clear()

    # ---- used by raft.core

    def connect_initial(self, nodes: Any) -> None:
        for node in nodes:
            self.addNode(node)

    def reconnect_all(self) -> None:
        for pid in self._over_budget:
            node = self._members.get(pid)
            if node is not None:
                self._onNodeConnected(node)
        self._over_budget.clear()

    def take_outbox(self) -> dict[str, list[Message]]:
        out, self.outbox = self.outbox, {}
        self._bytes.clear()
        return out

    def deliver(self, node: Node, message: Message) -> None:
        self._onMessageReceived(node, message)
