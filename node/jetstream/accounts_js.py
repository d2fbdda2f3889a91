"""JetStream in several accounts on one server: one service per account, shared limits.

Theory of operation
-------------------
Every account that enables JetStream gets its own ``JetStreamService``: its
own internal client bound to the account (so its ``$JS.API.>`` and
``$JS.<domain>.API.>`` subscriptions, its streams' capture subscriptions, its
PubAcks, deliveries and advisories live in that account's sublist and
nowhere else), its own stream and consumer registries, API counters and
account limits.  Isolation is therefore structural, as for core NATS
(``node.accounts``): a client of account A publishes into A's sublist, where
only A's service listens.

What the services share is the server: its storage limits
(``jetstream { max_memory_store, max_file_store }``) are checked against the
usage and reservations of every account (one ``StorageLimits``), while each
account's own ``max_mem``/``max_file`` limits see that account's usage only
(``AccountStorage``, each service's view of it).  ``/jsz``, ``/varz`` and ``$SYS.REQ.SERVER.PING.JSZ`` see one
view summed over the services (:func:`combined_view`).

Files: each account's streams live under ``<store_dir>/jetstream/<account>/``
(``streams/<name>``, as nats-server lays them out).  A store written before
accounts had directories (``<store_dir>/jetstream/streams``, ``_meta_``,
``quarantine`` directly under ``jetstream``) is moved once into the home
account's directory at start (:func:`account_store_dir`).

In a cluster the services of every account share the server's one meta layer
(``node.jetstream.meta_account``): its assignments are keyed by account and
stream name, and each service sees and acts on its own account's only.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from node.monitor.jsz import JetStreamView

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

#: the op of an account purge in a service's API queue (no subject has an empty token)
PURGE_OP = ("", "ACCOUNT", "PURGE")
#: what lay directly under ``<store_dir>/jetstream`` before per-account directories
_LEGACY_ENTRIES = ("streams", "_meta_", "quarantine")


#: how long an account purge's proposal is retried through changes of meta leader
PURGE_RETRY_S_MAX = 10.0


async def _propose_through(svc: JetStreamService, entry: bytes) -> object | None:
    """Propose ``entry`` to the meta group, again after each change of leader (a
    follower's proposal goes to the leader), for at most ``PURGE_RETRY_S_MAX``; the
    result, or None when it never went through.  An entry proposed twice is harmless
    (a second delete finds nothing: 10059; a second purge record adds nothing new)."""
    from raft.errors import RaftError

    group = svc.meta.layer.group if svc.meta is not None else None
    with trio.move_on_after(PURGE_RETRY_S_MAX):
        while True:
            try:
                return await svc.assignments.propose(entry)
            except RaftError as exc:
                log.info("event=account_purge_retry reason=%r", exc)
                if group is not None:
                    await group.wait_leader()
                await trio.sleep(0.05)  # the new leader settles (bounded by the scope)
    return None


def account_store_dir(jetstream_dir: str, account: str, *, home: bool) -> str:
    """The JetStream directory of ``account`` (``<jetstream_dir>/<account>``).

    For the home account, a layout written before per-account directories is
    moved in first (only when the account's directory does not exist yet, so
    an account literally named ``streams`` is never confused with it).
    """
    d = os.path.join(jetstream_dir, account)
    if home and not os.path.isdir(d):
        legacy = [e for e in _LEGACY_ENTRIES if os.path.isdir(os.path.join(jetstream_dir, e))]
        if legacy:
            os.makedirs(d, exist_ok=True)
            for e in legacy:
                os.replace(os.path.join(jetstream_dir, e), os.path.join(d, e))
            log.info("event=jetstream_layout_migrated account=%s moved=%s", account, legacy)
    return d


def combined_view(services: Sequence[JetStreamService]) -> JetStreamView:
    """One ``JetStreamView`` over every account's service (the first one's meta)."""
    views = [svc.stats() for svc in services]
    first = views[0]
    if len(views) == 1:
        return first
    return JetStreamView(
        ha_assets=sum(v.ha_assets for v in views),
        meta=first.meta,
        leader=first.leader,
        memory=sum(v.memory for v in views),
        storage=sum(v.storage for v in views),
        reserved_memory=sum(v.reserved_memory for v in views),
        reserved_storage=sum(v.reserved_storage for v in views),
        api_level=first.api_level,
        api_total=sum(v.api_total for v in views),
        api_errors=sum(v.api_errors for v in views),
        api_inflight=sum(v.api_inflight for v in views),
        accounts=tuple(a for v in views for a in v.accounts),
    )


async def purge_account(svc: JetStreamService, *, resume: bool = False) -> None:
    """Delete every stream of ``svc``'s account and then its directory (one server).

    As nats-server 2.15.1 does on ``$JS.API.ACCOUNT.PURGE.<account>``: each stream
    goes as by STREAM.DELETE, through the account's meta layer (its consumers'
    ``CONSUMER.DELETED`` advisories, then its ``STREAM.DELETED``, in the account),
    ``<store_dir>/jetstream/<account>`` is removed, and the account's API counters do
    not count it.  In a cluster this runs on the meta leader: the account's streams
    are deleted cluster-wide through the meta log (each host drops its copy, as for
    STREAM.DELETE); the account's directories stay.  There the purge is first recorded
    in the meta state (``MetaMachine.purging``: the names to delete), and each delete
    takes one name off: a purge cut short by a change of meta leader is finished by
    whichever server decides for the account next (``resume``: no new record, just
    the names left).
    """
    from cluster.meta import MetaError, delete_stream_entry, purge_account_entry

    account = svc.account.name
    if svc.meta is None:
        names = sorted(svc.assignments.configs())
    else:
        if not resume and await _propose_through(svc, purge_account_entry(account)) is None:
            return  # no leader for PURGE_RETRY_S_MAX: nothing recorded, nothing deleted
        left = svc.meta.layer.machine.purging.get(account, set())
        names = sorted(n for n in left if n in svc.assignments.configs())
    counted = svc.api_total, svc.api_errors  # the effects count their answers: not these
    for name in names:
        if svc.assignments.assignment(name) is None:
            continue  # gone meanwhile (another server resumed this purge)
        entry = delete_stream_entry(name, reply="", account=account)
        result = await _propose_through(svc, entry)
        if result is None:  # the next meta leader resumes from the recorded names
            log.warning("event=account_purge_interrupted account=%s stream=%s", account, name)
            break
        if isinstance(result, MetaError) and result.err_code != 10059:
            log.warning("event=account_purge_failed stream=%s reason=%r", name, result)
    svc.api_total, svc.api_errors = counted
    if svc.meta is None and not svc.api.streams:
        await trio.to_thread.run_sync(lambda: shutil.rmtree(svc.store_dir, ignore_errors=True))
    log.info("event=account_purged account=%s streams=%d", svc.account.name, len(names))
