"""API requests about a replicated stream across one of its leader changes.

Theory of operation
-------------------
Every server gets a copy of each ``$JS.API`` request and decides on its own
view, at its own arrival time, whether it answers it (``AccountMeta.answers``):
for a replicated stream, the stream's leader does.  Across a leader change
those views differ for a moment, and a request can fall between the old
leader and the new one: the new leader's copy arrived while it still saw the
old one lead (declined); the old leader's copy arrived after it had handed
over (held while the group elected, then declined once the new leader was
known).  Nobody answers it.  nats-server leaves such a request unanswered as
well (the client times out and asks again); trijet hands it over instead.

The old leader is the one server that knows which requests it did not act
on, so it forwards them: for ``HANDOVER_S`` after it lost the lead of a group
(measured at the request's arrival), every request about that group it
declines goes to the group's leader of the moment, on
``$TRIJET.FWD.<leader's peer id>.<original subject>`` with the original reply
subject.  A leader that lost the lead while it answered a read (its read
barrier failed) holds the request until the new leader is known and forwards
it the same way.

The new leader prefers its own copy: the reply subject's interest travels
with it (a forwarded copy can overtake it, and an answer sent before that
interest arrived would be dropped).  So a forwarded copy is held until the
leader's own copy arrives or ``HOLD_S`` passes: answered here if the own copy
was not (declined or held), dropped if it was.  The leader remembers what it
answered for ``RECALL_S`` after it gained the lead (subject, reply and body),
so one request is answered once: a forwarded copy never after its own, an
own copy never after a forwarded one (two own copies alike are two requests,
both answered).  A forwarded copy is never forwarded again.  A stepdown or a
purge is acted on by the leader at arrival only (``meta_account``): never
forwarded.  Pull requests (``CONSUMER.MSG.NEXT``) have their own route to a
consumer's leader (``node.nextroute``) and are left to it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from cluster.naming import peer_id
from node.jetstream.common import ApiRequest
from node.jetstream.meta import META_LEADER_OPS, PARK_S_MAX, stream_of_op
from node.jetstream.meta_account import STEPDOWN_OPS, UNREPEATABLE_OPS

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

__all__ = ["FWD_PREFIX", "HANDOVER_S", "RECALL_S", "Handover", "forwardable", "original_subject"]

FWD_PREFIX = b"$TRIJET.FWD."
#: an old leader forwards what it declines this long after losing the lead
HANDOVER_S = 1.0
#: a new leader remembers what it answered this long after gaining the lead
#: (a forward may come after a request held while the group elected)
RECALL_S = HANDOVER_S + PARK_S_MAX + 1.0
#: bound on the requests remembered (the oldest go first)
RECALL_MAX = 65_536
#: a forwarded copy waits this long at most for the leader's own copy
HOLD_S = 0.25
#: bound on the forwarded copies held (more are answered at once)
HOLD_MAX = 10_000

_MSG_NEXT = ("CONSUMER", "MSG", "NEXT")


def forwardable(op: tuple[str, ...]) -> str | None:
    """The stream an API op is about when a handover may forward it, else None."""
    if op[:3] in STEPDOWN_OPS or op[:3] in META_LEADER_OPS or op[:3] == _MSG_NEXT:
        return None
    if op[:2] in UNREPEATABLE_OPS:
        return None
    return stream_of_op(op)


def original_subject(subject: bytes) -> bytes | None:
    """``$TRIJET.FWD.<peer id>.<subject>`` -> ``<subject>`` (None if malformed)."""
    if not subject.startswith(FWD_PREFIX):
        return None
    dot = subject.find(b".", len(FWD_PREFIX))
    return subject[dot + 1 :] if dot > 0 else None


Key = tuple[bytes, bytes, bytes]


def _key(req: ApiRequest) -> Key:
    return (req.subject, req.reply, req.body)


class _Recent(dict[Key, Any]):
    """Requests seen lately, oldest first: ``note`` drops those older than
    ``horizon`` s (and the oldest beyond ``RECALL_MAX``)."""

    def __init__(self, horizon: float) -> None:
        super().__init__()
        self.horizon = horizon

    def note(self, key: Key, now: float, value: Any) -> None:
        edge = now - self.horizon
        while self:
            oldest = next(iter(self))
            if self[oldest][0] >= edge and len(self) < RECALL_MAX:
                break
            del self[oldest]
        self.pop(key, None)
        self[key] = (now, value)


class Handover:
    """One account service's side of the handover (see the module docstring)."""

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc
        #: this server's forward subject prefix
        self.inbox = FWD_PREFIX + peer_id(svc.server.server_name).encode() + b"."
        #: (subject, reply, body) -> (when answered, whether a forwarded copy)
        self._answered = _Recent(RECALL_S)
        #: own copies declined while their group's leader changed lately
        self._declined = _Recent(RECALL_S)
        #: forwarded copies waiting for their own copy, by key, oldest first
        self.held: dict[Key, tuple[float, ApiRequest]] = {}
        self._held_added = trio.Event()

    def _group(self, op: tuple[str, ...]) -> Any:
        name = forwardable(op)
        if name is None:
            return None
        stream = self.svc.api.streams.get(name)
        return None if stream is None else stream.replicated

    def declined(
        self, req: ApiRequest, arrived: float | None = None, deposed: bool = False
    ) -> None:
        """This server does not answer ``req`` (it arrived at ``arrived``):
        forward it if this server lost the lead of its group just before (or
        took it as the leader and was ``deposed`` before it could answer)."""
        if not req.reply:
            return
        rg = self._group(req.op)
        if rg is None:
            return
        now = trio.current_time()
        changed = rg.leader_changed_at
        if changed is not None and now - changed <= RECALL_S:
            self._declined.note(_key(req), now, None)  # a forwarded copy may come
        leader = rg.leader_id
        if leader is None or leader == self.svc.server.server_name or rg.is_leader:
            return
        at = now if arrived is None else arrived
        lost = rg.lost_lead_at(now)
        if not deposed and (lost is None or at - lost > HANDOVER_S):
            return
        log.debug("event=api_handover subject=%r to=%s", req.subject, leader)
        subject = FWD_PREFIX + peer_id(leader).encode() + b"." + req.subject
        self.svc.client.publish(subject, req.body, reply=req.reply, headers=req.headers)

    def first(self, req: ApiRequest, forwarded: bool = False) -> bool:
        """Whether this server is to answer ``req`` (its own copy, or one an
        old leader ``forwarded``): not if the other copy was answered here.
        Remembered while this server gained the lead lately."""
        if not req.reply:
            return True
        rg = self._group(req.op)
        if rg is None:
            return True
        now = trio.current_time()
        if not rg.gained_lead_lately(now, RECALL_S):
            return True
        recall = self._answered
        key = _key(req)
        seen = recall.get(key)
        # two copies of a request in one window: a forwarded one and another
        # (two own copies are two requests sent alike: both answered)
        if seen is not None and (forwarded or seen[1]):
            return False
        recall.note(key, now, forwarded or (seen is not None and seen[1]))
        return True

    def deposed(self, req: ApiRequest) -> None:
        """This server took ``req`` as the leader and lost the lead before it
        could answer (a read barrier failed): held until a leader is known,
        then answered here or forwarded to it."""
        meta = self.svc.meta
        if meta is None or not req.reply or self._group(req.op) is None:
            return
        self._answered.pop(_key(req), None)  # not answered after all
        meta.park(req, self.svc.answer_here, self._declined_deposed)

    def _declined_deposed(self, req: ApiRequest, arrived: float) -> None:
        self.declined(req, arrived, deposed=True)

    # -- the new leader's side: forwarded copies held for their own ----------------

    def hold(self, req: ApiRequest) -> None:
        """A forwarded copy this server answers as the stream's leader: held
        for its own copy (at most ``HOLD_S``), dropped if that was answered."""
        key = _key(req)
        if key in self._answered:
            return
        if key in self._declined or key in self.held or len(self.held) >= HOLD_MAX:
            self.release(req)  # its own copy came and was not answered here
            return
        self.held[key] = (trio.current_time() + HOLD_S, req)
        self._held_added.set()

    def own_copy(self, req: ApiRequest, verdict: bool | None) -> None:
        """This server's own copy of a request arrived (``verdict``: whether
        it answers it): a held forwarded copy is answered now if the own copy
        is not, else dropped."""
        item = self.held.pop(_key(req), None)
        if item is None:
            return
        if not verdict:  # else the own copy is answered (and remembered) instead
            self.release(item[1])

    def release(self, req: ApiRequest) -> None:
        """Answer a forwarded copy here, or -- the lead moved on meanwhile --
        hand it to the leader of the moment (once one is known)."""
        meta = self.svc.meta
        verdict = None if meta is None else meta.answers(req.op)
        if verdict is None and meta is not None:
            meta.park(req, self.release, self._declined_deposed)
        elif verdict is False:
            self.declined(req, deposed=True)
        elif self.first(req, forwarded=True):
            self.svc.answer_here(req)

    async def run(self) -> None:
        """Release held copies whose own copy did not come in time."""
        while True:
            await self._held_added.wait()
            self._held_added = trio.Event()
            while self.held:
                key = next(iter(self.held))
                deadline, req = self.held[key]
                now = trio.current_time()
                if deadline > now:
                    await trio.sleep(deadline - now)
                    continue
                del self.held[key]
                self.release(req)
