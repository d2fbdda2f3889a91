"""What each server tells the meta layer about itself, and who decides for an account.

Theory of operation: every server registers a ``PeerRecord`` in the meta state — its name,
cluster, tags and the accounts JetStream runs in on it (:func:`peer_record`) — at each new
meta leader and again when a configuration reload starts JetStream in another account
(:func:`register_loop`).  Placement puts an account's streams only on servers that run its
JetStream (``cluster.meta.machine``).  An account's creates, updates and deletes are decided
by the meta leader, or — when the leader's own configuration lacks that account's
JetStream, so it has no service for it — by the first (by name) server that runs it, whose
proposals reach the leader (:func:`decider`).  A new leader also finishes the account purges
its predecessor left unfinished (:func:`resume_purges`, from ``MetaMachine.purging``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from cluster.meta import PeerRecord, peer_entry
from raft.errors import RaftError

if TYPE_CHECKING:
    from node.jetstream.meta import MetaLayer

log = logging.getLogger(__name__)

#: pause before a failed registration is proposed again
PEER_REGISTER_RETRY_S = 0.25


def decider(layer: MetaLayer, account: str) -> str | None:
    """The server that decides ``account``'s creates, updates and deletes (None: no meta
    leader known)."""
    leader = layer.leader
    rec = layer.machine.peers.get(leader) if leader is not None else None
    if rec is None or rec.accounts is None or account in rec.accounts:
        return leader
    hosts = sorted(
        p.name for p in layer.machine.peers.values() if p.accounts is None or account in p.accounts
    )
    return hosts[0] if hosts else leader


def peer_record(layer: MetaLayer) -> PeerRecord:
    """This server as placement knows it: its tags and the accounts JetStream runs in here
    (streams of other accounts are never placed on it)."""
    accounts = tuple(sorted(layer.expected | set(layer.views)))
    return PeerRecord(layer.name, layer.cluster_name, layer.tags, accounts)


async def register_loop(layer: MetaLayer) -> None:
    """Keep this server's ``PeerRecord`` in the meta state: at each leader, and again when
    it changes (``layer.registration_changed``: a reload started another account's
    JetStream)."""
    group = layer.group
    assert group is not None
    leadership = group.subscribe_leadership()

    async def register() -> None:
        while group.leader_id is not None and layer.machine.peers.get(layer.name) != (
            me := peer_record(layer)
        ):
            try:
                await layer.propose(peer_entry(me))
            except RaftError:
                await trio.sleep(PEER_REGISTER_RETRY_S)

    async def on_change() -> None:
        while True:
            await layer.registration_changed.wait()
            layer.registration_changed = trio.Event()
            await register()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_change)
        async with leadership:
            async for state in leadership:
                if state.leader_id is not None:
                    await register()
        nursery.cancel_scope.cancel()


def resume_purges(layer: MetaLayer) -> None:
    """A new meta leader: each account purge left unfinished is finished by the server
    that decides for that account now."""
    for account in sorted(layer.machine.purging):
        view = layer.views.get(account)
        if view is not None and decider(layer, account) == layer.name:
            log.info("event=account_purge_resumed account=%s", account)
            view.svc.purge_account(resume=True)
