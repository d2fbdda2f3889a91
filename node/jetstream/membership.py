"""STREAM.PEER.REMOVE: a replicated stream's member replaced by a free server.

Theory of operation
-------------------
The meta leader answers the request (``node.jetstream.meta.MetaLayer.answers``):
it checks the body as nats-server does (10010 without clustering, 10003 for
an empty body or no ``peer``, 10025 for bad JSON, 10059 for an unknown
stream) and proposes ``REMOVE_STREAM_PEER``; placement of the replacement
happens inside meta ``apply`` (``cluster.meta.machine``: 10040 for a
non-member, 10075 when no free server fits the stream's placement), and the
proposer answers ``{"success":true}`` once the new assignment is committed —
the data moves afterwards, as with the reference.

Every server then acts on the *current* assignment (never on a stale effect:
a second PEER.REMOVE may have changed it again):

* a newcomer starts its replica with the group's members so far plus itself
  (``ensure_local(join=…)``); its store is empty and fills through the
  group's normal catch-up from the leader;
* the stream's leader reconciles the Raft membership with the assignment,
  one change at a time (``reconcile``): add every newcomer, wait until each is
  caught up (its match index at the commit index), then remove the leavers;
  a leader that leaves hands the lead to a caught-up member first.  A new
  leader picks the work up where it stopped (``leadership``), so a leader
  change in the middle loses nothing: the assignment is the goal, the Raft
  membership the progress;
* a leaver keeps its replica until the group's leader says, on
  ``$JSC.GM.<group>``, that it is no longer a member (or its own log shows its
  removal), then drops it (no STREAM.DELETED advisory, as the reference).  Until
  then it still counts for quorum, so a majority holds every acknowledged
  message throughout.  If the assignment names it again it keeps it.

The consumers of a replicated stream live in its group's log, so they follow
the new membership by themselves: a newcomer rebuilds them from the entries it
catches up, and the consumers' leader is always the stream's leader.
An R1 stream is refused (10075): moving its only replica would need its data
copied between servers, which is not built (the reference re-creates it empty
on the new server).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import trio

from cluster.meta import MetaError, StreamPeersChanged, remove_peer_entry
from node.jetstream import apireq
from node.jetstream.common import TYPE, ApiRequest, dumps, error
from node.jsapi.errors import BAD_REQUEST, CLUSTER_REQUIRED, STREAM_NOT_FOUND, JSApiError
from node.jsapi.godecode import d_str
from raft.errors import RaftError

if TYPE_CHECKING:
    from cluster.streams import Stream
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

PEER_REMOVE_RESPONSE = TYPE + "stream_remove_peer_response"
REMOVE_PEER = apireq.Request("JSApiStreamRemovePeerRequest", {"peer": d_str})
#: the subject a group's leader answers with its members
MEMBERS_SUBJECT = "$JSC.GM."
#: bound on one reconciliation (a new leader starts another)
RECONCILE_S_MAX = 120.0
RETRY_S = 0.25
CATCHUP_POLL_S = 0.05
#: a leaver asks the leader this often whether it is out
LEAVER_POLL_S = 0.1
LEAVER_ASK_S = 0.5
#: bound on how long a leaver waits to be let go (then it keeps its data)
LEAVER_S_MAX = 600.0


async def peer_remove(svc: JetStreamService, req: ApiRequest) -> str | None:
    """STREAM.PEER.REMOVE (on the meta leader)."""
    from node.jetstream.clustered import _propose, _refusal

    type_ = PEER_REMOVE_RESPONSE
    meta = svc.meta
    if meta is None:
        raise error(type_, JSApiError(CLUSTER_REQUIRED))
    if apireq.is_empty_request(req.body):
        raise error(type_, JSApiError(BAD_REQUEST))
    try:
        body = apireq.decode(req.body, REMOVE_PEER)
    except JSApiError as err:
        raise error(type_, err) from None
    peer = body.get("peer") or ""
    if not peer:
        raise error(type_, JSApiError(BAD_REQUEST))
    name = req.op[3]
    if meta.assignment(name) is None:
        raise error(type_, JSApiError(STREAM_NOT_FOUND))
    entry = remove_peer_entry(
        name,
        peer,
        seed=meta.rng.getrandbits(63),
        online=meta.online(),
        unique_tag=meta.unique_tag,
        account=svc.account.name,
    )
    result = await _propose(svc, entry)
    if result is None:
        return None  # not committed: unanswered, as nats-server
    if isinstance(result, MetaError):
        raise _refusal(type_, result)
    return dumps({"type": type_, "success": True})


class Membership:
    """This server's part in membership changes of replicated streams.

    Args:
        svc: the JetStream service (clustered).
    """

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc
        self._reconciling: set[str] = set()
        self._leaving: set[str] = set()

    @property
    def me(self) -> str:
        return self.svc.server.server_name

    def start(self) -> None:
        """Answer ``$JSC.GM.<group>`` for the groups this server leads."""
        self.svc.client.subscribe((MEMBERS_SUBJECT + "*").encode(), self._on_members)

    def _on_members(
        self, sub: Any, subject: bytes, reply: bytes | None, hdr: Any, body: bytes
    ) -> None:
        group = subject.decode(errors="replace")[len(MEMBERS_SUBJECT) :]
        if not reply:
            return
        for stream in list(self.svc.api.streams.values()):
            rg = stream.replicated
            if rg is not None and rg.group_id == group and rg.is_leader:
                doc = {"leader": self.me, "members": rg.members}
                self.svc.client.publish(reply, dumps(doc).encode())
                return

    # -- effects ------------------------------------------------------------

    async def peers_changed(self, effect: StreamPeersChanged) -> None:
        """A stream's peer set changed: act on its current assignment."""
        from node.jetstream import meta_effects

        svc = self.svc
        assert svc.meta is not None
        name = effect.assignment.name
        sa = svc.meta.assignment(name)
        if sa is None:
            return
        local = svc.api.streams.get(name)
        if self.me in sa.peers:
            if local is None:
                join = tuple(sorted({*effect.old, *sa.peers}))
                log.info("event=stream_peer_joining stream=%s members=%s", name, ",".join(join))
                await meta_effects.ensure_local(svc, sa, join=join)
            elif local.created_ns == sa.created_ns:
                self.leadership(local, local.is_leader)
        elif local is not None and local.created_ns == sa.created_ns:
            self._leave(local)

    def leadership(self, stream: Stream, lead: bool) -> None:
        """A replicated stream's lead changed here: a leader whose group's
        members differ from the assignment reconciles them."""
        rg = stream.replicated
        meta = self.svc.meta
        if not lead or rg is None or meta is None:
            return
        name = stream.cfg.name
        sa = meta.assignment(name)
        if sa is None or sa.created_ns != stream.created_ns or name in self._reconciling:
            return
        if set(sa.peers) == set(rg.members):
            return
        self._reconciling.add(name)
        self.svc.api.nursery.start_soon(self._reconcile, stream)

    def stream_started(self, stream: Stream) -> None:
        """Follow a replicated stream's leadership (reconcile on gaining it)."""
        rg = stream.replicated
        if rg is not None:
            rg.leader_listeners.append(lambda lead: self.leadership(stream, lead))

    # -- the leader -----------------------------------------------------------

    async def _reconcile(self, stream: Stream) -> None:
        name = stream.cfg.name
        try:
            with trio.move_on_after(RECONCILE_S_MAX) as scope:
                done = await self._reconcile_steps(stream)
            if scope.cancelled_caught:
                log.warning("event=membership_reconcile_timeout stream=%s", name)
            elif done:
                log.info("event=membership_reconciled stream=%s", name)
                self.svc.advisories.stream_action("modify", name, stream.cfg)
        finally:
            self._reconciling.discard(name)

    async def _reconcile_steps(self, stream: Stream) -> bool:
        """One change at a time until the members are the assignment's; True
        when they are, False when this server stopped leading or the stream went."""
        svc = self.svc
        assert svc.meta is not None
        rg = stream.replicated
        assert rg is not None
        name = stream.cfg.name
        goal: int | None = None  # the commit index newcomers must reach
        while True:
            sa = svc.meta.assignment(name)
            if (
                sa is None
                or sa.created_ns != stream.created_ns
                or svc.api.streams.get(name) is not stream
                or not rg.is_leader
            ):
                return False
            target, members = set(sa.peers), set(rg.members)
            if target == members:
                return True
            try:
                missing = sorted(target - members)
                if missing and not rg.bootstrapped.is_set():
                    # born from an R1 store: nobody joins before its first snapshot
                    await rg.bootstrapped.wait()
                    continue
                if missing:
                    log.info("event=stream_member_add stream=%s peer=%s", name, missing[0])
                    await rg.raft.add_member(missing[0])
                    goal = None
                    continue
                if goal is None:  # under load the commit index moves on: a fixed goal
                    goal = int(rg.status().get("commit_index") or 0)
                if not self._caught_up(stream, target - {self.me}, goal):
                    await trio.sleep(CATCHUP_POLL_S)
                    continue
                extra = sorted(members - target)
                if self.me in extra:
                    heir = sorted(target)[0]
                    log.info("event=stream_leader_leaving stream=%s to=%s", name, heir)
                    await rg.step_down(heir)
                    return False
                log.info("event=stream_member_remove stream=%s peer=%s", name, extra[0])
                await rg.raft.remove_member(extra[0])
            except RaftError as exc:
                log.warning("event=membership_change_failed stream=%s reason=%r", name, exc)
                await trio.sleep(RETRY_S)

    @staticmethod
    def _caught_up(stream: Stream, peers: set[str], goal: int) -> bool:
        """Whether every one of ``peers`` holds the log up to index ``goal``."""
        rg = stream.replicated
        assert rg is not None
        seen = rg.status().get("peers") or {}
        for p in peers:
            match = (seen.get(p) or {}).get("match_index")
            if not isinstance(match, int) or match < goal:
                return False
        return True

    # -- a leaver ---------------------------------------------------------------

    def leave(self, stream: Stream) -> None:
        """This server is no longer assigned ``stream``: drop it once out of its group."""
        self._leave(stream)

    def _leave(self, stream: Stream) -> None:
        name = stream.cfg.name
        if name in self._leaving:
            return
        self._leaving.add(name)
        self.svc.api.nursery.start_soon(self._leave_when_out, stream)

    async def _leave_when_out(self, stream: Stream) -> None:
        name = stream.cfg.name
        try:
            with trio.move_on_after(LEAVER_S_MAX) as scope:
                out = await self._wait_out(stream)
            if scope.cancelled_caught:
                log.warning("event=stream_leaver_kept stream=%s reason=never_let_go", name)
                return
            if out and self.svc.api.streams.get(name) is stream:
                await self._drop(stream)
        finally:
            self._leaving.discard(name)

    async def _wait_out(self, stream: Stream) -> bool:
        """Until the group's leader no longer lists this server; False when
        the assignment names it again (or the stream went)."""
        svc = self.svc
        assert svc.meta is not None
        rg = stream.replicated
        name = stream.cfg.name
        while True:
            sa = svc.meta.assignment(name)
            if sa is None or self.me in sa.peers or svc.api.streams.get(name) is not stream:
                return False
            if rg is None or rg.raft.core.removed:
                return True
            if rg.is_leader:  # the lead moves first (reconcile hands it over)
                self.leadership(stream, True)
            else:
                members = await self._ask_members(rg.group_id)
                if members is not None and self.me not in members:
                    return True
            await trio.sleep(LEAVER_POLL_S)

    async def _ask_members(self, group: str) -> list[str] | None:
        """The members the group's leader reports, or None (no answer in time)."""
        doc = await ask_group(self.svc, group, LEAVER_ASK_S)
        m = None if doc is None else doc.get("members")
        if isinstance(m, list) and all(isinstance(x, str) for x in m):
            return m
        return None

    async def _drop(self, stream: Stream) -> None:
        """Stop the replica and remove its data (it is no longer a member)."""
        svc = self.svc
        name = stream.cfg.name
        log.info(
            "event=stream_replica_dropped stream=%s group=%s",
            name,
            stream.replicated and stream.replicated.group_id,
        )
        svc.release(name)
        if svc.consumers is not None:
            svc.consumers.drop_stream(name)
        await svc.api.delete_stream(name)
        svc.resources.forget(name)


async def ask_group(svc: JetStreamService, group: str, timeout_s: float) -> dict[str, Any] | None:
    """What a stream group's leader answers on ``$JSC.GM.<group>`` (its members
    and leader), or None when nothing came within ``timeout_s``."""
    assert svc.meta is not None
    inbox = f"_INBOX.jgm.{svc.meta.rng.getrandbits(64):016x}".encode()
    got: list[dict[str, Any]] = []
    done = trio.Event()

    def on_reply(sub: Any, subject: bytes, reply: Any, hdr: Any, body: bytes) -> None:
        try:
            doc = json.loads(body)
        except ValueError:
            return
        if isinstance(doc, dict):
            got.append(doc)
            done.set()

    sub = svc.client.subscribe(inbox, on_reply)
    try:
        svc.client.publish((MEMBERS_SUBJECT + group).encode(), b"", reply=inbox)
        with trio.move_on_after(timeout_s):
            await done.wait()
    finally:
        svc.client.unsubscribe(sub)
    return got[0] if got else None
