"""The meta layer of a clustered server: one JetStream per cluster, in every account.

Theory of operation
-------------------
In cluster mode every JetStream server runs one member of the meta group
``_meta_`` (``cluster.meta.MetaMachine`` over ``raft.RaftGroup``).  Raft
frames travel on authenticated peer links (``raft.links.TcpPeerLinks``) that
share the cluster port with routes; a peer's address is learned from its
route ``INFO`` (``ip``), and its Raft id is its ``server_name``.

Bootstrap: the first time, the group's members are this server and every
JetStream server found behind the configured routes (each configured URL
resolves to a peer or to ourselves), after a short settle time so gossiped
peers are counted too.  The member list is then kept in ``_meta_/peers.json``
and a restarted server rejoins from its own disk at once.

Who answers (DESIGN §3b): every server receives every ``$JS.API`` request;
``answers(op)`` decides whether this one handles it.  Cluster-wide requests
(create, update, delete, names, list, account info) are handled by the meta
leader only; a request about one stream by the server that hosts it, or —
when no such stream exists — by the meta leader (which answers "not
found").  Others stay silent, so a client sees exactly one reply.

Changes go through the log: the meta leader validates a create/update/delete
and proposes it with the client's reply subject.  Every server applies it;
the one that hosts the stream acts on the effect (starts, reconfigures or
stops its local stream) and answers the client (the proposer answers deletes
itself, so a delete is answered even when the host is down).  At start the
server reconciles its local streams with the assignments it recovered from
its journal; a stream directory found on disk with no assignment is left
untouched (never deleted on a guess).

Accounts: a server runs one ``MetaLayer`` (one member of ``_meta_``) whatever
the number of accounts with JetStream; the assignments are keyed by (account,
stream name).  Each account's ``JetStreamService`` sees the group through its
own ``node.jetstream.meta_account.AccountMeta``: its assignments only, and the
API requests of its account decided by who hosts its streams.  The layer
hands each effect to the service of the assignment's account (and only to
it), and at start reconciles every account's assignments once every
account's service is running.  The layer itself belongs to the home
account's service (the first with JetStream): its directory holds ``_meta_``,
and meta entries written before accounts were carried are that account's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from cluster.meta import (
    MetaMachine,
    PeerRecord,
    StreamAssigned,
    StreamAssignment,
    StreamPeersChanged,
    StreamRemoved,
    StreamUpdated,
)
from cluster.meta.entries import (
    Effect,
)
from cluster.placement import PeerSpec
from cluster.replica_spec import ReplicaSpec
from node.jetstream import meta_monitor, meta_peers
from node.jsapi.streamconfig import configs_overlap
from node.route import parse_route_url
from raft.errors import RaftError
from raft.links import TcpPeerLinks
from raft.storage import OsDisk

if TYPE_CHECKING:
    from node.jetstream.meta_account import AccountMeta
    from node.jetstream.service import JetStreamService
    from node.route import Route
    from raft.group import RaftGroup

log = logging.getLogger(__name__)

META_GROUP = "_meta_"
#: how long the set of known peers must stay unchanged before a first bootstrap
BOOTSTRAP_SETTLE_S = 1.0
#: how long a request waits for a meta leader before it is dropped unanswered
PARK_S_MAX = 4.0
PARKED_MAX = 10_000
PARK_POLL_S = 0.25
#: without a meta leader this long, cluster-wide requests get 503/10008
QUORUM_LOST_S = 5.0
#: meta snapshots: compact the journal after this many entries
META_COMPACTION_ENTRIES = 2_000
#: an idle meta group hibernates after this long (raft.quiet)
META_QUIET_AFTER_S = 0.5

#: ops answered by the meta leader only (tokens after ``API``)
CLUSTER_OPS = {
    ("STREAM", "CREATE"),
    ("STREAM", "UPDATE"),
    ("STREAM", "DELETE"),
    ("STREAM", "NAMES"),
    ("STREAM", "LIST"),
    ("STREAM", "RESTORE"),
    ("INFO",),
}


#: ops about one stream that only the meta leader handles (tokens after ``API``)
META_LEADER_OPS = {("STREAM", "PEER", "REMOVE")}

#: ops about one stream: prefix -> index of the stream name's token
_STREAM_SCOPED = {
    ("STREAM", "MSG", "GET"): 3,
    ("STREAM", "MSG", "DELETE"): 3,
    ("STREAM", "LEADER", "STEPDOWN"): 3,
    ("STREAM", "PEER", "REMOVE"): 3,
    ("CONSUMER", "DURABLE", "CREATE"): 3,
    ("CONSUMER", "MSG", "NEXT"): 3,
    ("CONSUMER", "LEADER", "STEPDOWN"): 3,
    ("STREAM", "INFO"): 2,
    ("STREAM", "PURGE"): 2,
    ("STREAM", "SNAPSHOT"): 2,
    ("CONSUMER", "CREATE"): 2,
    ("CONSUMER", "INFO"): 2,
    ("CONSUMER", "DELETE"): 2,
    ("CONSUMER", "NAMES"): 2,
    ("CONSUMER", "LIST"): 2,
    ("CONSUMER", "PAUSE"): 2,
    ("CONSUMER", "UNPIN"): 2,
}


def stream_of_op(op: tuple[str, ...]) -> str | None:
    """The stream an API op is about (tokens after ``API``), or None."""
    for n in (3, 2):
        i = _STREAM_SCOPED.get(op[:n])
        if i is not None:
            return op[i] if len(op) > i else None
    return None


#: response types of the cluster-wide ops (for 10008 answers)
_CLUSTER_OP_TYPES = {
    ("STREAM", "CREATE"): "stream_create_response",
    ("STREAM", "UPDATE"): "stream_update_response",
    ("STREAM", "DELETE"): "stream_delete_response",
    ("STREAM", "NAMES"): "stream_names_response",
    ("STREAM", "LIST"): "stream_list_response",
    ("STREAM", "RESTORE"): "stream_restore_response",
    ("INFO",): "account_info_response",
}


def unavailable_answer(op: tuple[str, ...]) -> str:
    """The 503/10008 answer to a cluster-wide op (paged ops keep their zero paging)."""
    kind = _CLUSTER_OP_TYPES.get(op[:2]) or _CLUSTER_OP_TYPES.get(op[:1]) or "error_response"
    body: dict[str, Any] = {
        "type": "io.nats.jetstream.api.v1." + kind,
        "error": {
            "code": 503,
            "err_code": 10008,
            "description": "JetStream system temporarily unavailable",
        },
    }
    if op[:2] in (("STREAM", "NAMES"), ("STREAM", "LIST")):
        body.update({"total": 0, "offset": 0, "limit": 0})
    return json.dumps(body, separators=(",", ":"))


def link_secret(cluster: Any) -> bytes:
    """The peer links' shared secret: ``cluster.secret`` if set, else derived
    from the cluster's name and route credentials (who may route may link)."""
    parts = [
        "trijet-raft-v1",
        cluster.name or "",
        cluster.secret or "",
        cluster.user or "",
        cluster.password or "",
    ]
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def route_address(info: dict[str, Any]) -> tuple[str, int] | None:
    """``(host, port)`` of a peer's cluster port from its route INFO."""
    url = info.get("ip")
    if isinstance(url, str) and url:
        parts = urlsplit(url)
        if parts.hostname and parts.port:
            return parts.hostname, parts.port
    host, port = info.get("host"), info.get("port")
    if isinstance(host, str) and host and isinstance(port, int) and port > 0:
        return host, port
    return None


#: a server this young waits (bounded by the rest of it) for peer links not up yet
#: before a create is placed short of peers (``MetaShell.online_for``)
STARTUP_PLACEMENT_GRACE_S = 10.0


class MetaLayer:
    """This server's member of the meta group, and who answers what.

    Args:
        svc: the JetStream service (its server, API facade and handlers).
    """

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc
        server = svc.server
        cluster = server.cfg.cluster
        assert cluster is not None
        self.cluster_name = cluster.name or ""
        self.name = server.server_name
        self.tags = tuple(server.cfg.server_tags)
        self.unique_tag = server.cfg.jetstream.unique_tag or ""
        js = server.cfg.jetstream
        #: compaction bounds of this server's replicated stream groups
        self.journal_bounds = (js.raft_journal_entries_max, js.raft_journal_bytes_max)
        self.leader_write_overlap = js.raft_leader_write_overlap
        self.machine = MetaMachine(overlap=configs_overlap, default_account=svc.account.name)
        #: every account's view, by account name (registered by the services)
        self.views: dict[str, AccountMeta] = {}
        #: the accounts JetStream runs in on this server (each registers a view)
        self.expected = {a.name for a in server.accounts.jetstream_accounts} or {svc.account.name}
        self._views_started = trio.Event()
        #: set when this server's ``PeerRecord`` changed (``meta_peers.register_loop``)
        self.registration_changed = trio.Event()
        self.group: RaftGroup | None = None
        self.links = TcpPeerLinks(
            self.name, link_secret(cluster), rng=random.Random(server.rng.random())
        )
        self.dir = Path(svc.store_dir) / META_GROUP
        #: JetStream peers seen on routes: name -> cluster port address
        self.known: dict[str, tuple[str, int]] = {}
        self._known_changed = trio.Event()
        self.ready = trio.Event()
        self.started_wall = time.time()
        self._born = trio.current_time()
        self._effects_send, self._effects_recv = trio.open_memory_channel[Effect](math.inf)
        self.rng = random.Random(server.rng.random())
        self._parked: list[
            tuple[float, Any, Callable[[Any], None], Callable[[tuple[str, ...]], bool | None]]
        ] = []
        self._parked_wake = trio.Event()
        self._changed = trio.Event()
        self._ever_had_leader = False
        self._leaderless_since: float | None = trio.current_time()
        self._nursery: trio.Nursery | None = None
        self._sys_client: Any = None  # publishes the meta advisories (system account)

    # -- accounts -------------------------------------------------------------

    def register(self, view: AccountMeta) -> None:
        """An account's service joins (before its ``started``); one a reload started
        changes what this server tells placement (``_register_loop``)."""
        self.views[view.account] = view
        self.registration_changed.set()

    def decider(self, account: str) -> str | None:
        """``meta_peers.decider``: who decides ``account``'s creates and deletes."""
        return meta_peers.decider(self, account)

    def me(self) -> PeerRecord:
        """``meta_peers.peer_record``: this server as placement knows it."""
        return meta_peers.peer_record(self)

    def view_started(self) -> None:
        """One more account's service runs: reconcile once all of them do."""
        if self.expected <= {a for a, v in self.views.items() if v.started}:
            self._views_started.set()

    # -- routes -------------------------------------------------------------

    def route_up(self, route: Route) -> None:
        """A route registered: learn the peer's Raft address if it runs JetStream."""
        info = route.remote_info
        if not info.get("jetstream") or (info.get("domain") or "") != self.svc.domain:
            return  # one JetStream per cluster and domain
        addr = self._dialed_address(route.remote_id) or route_address(info)
        name = route.remote_name
        if addr is None or not name or name == self.name:
            return
        if self.known.get(name) != addr:
            self.known[name] = addr
            self.links.add_peer(name, addr)
            ev, self._known_changed = self._known_changed, trio.Event()
            ev.set()
        else:
            # the peer is back (a restart): its Raft link need not wait out
            # the dial backoff that grew while it was down
            self.links.redial(name)

    def _dialed_address(self, server_id: str) -> tuple[str, int] | None:
        """The address of a configured route URL that reached ``server_id``:
        Raft links take the same path as routes (through whatever the
        operator put between the servers), not the peer's advertised one."""
        routes = self.svc.server.routes
        for url, sid in sorted(routes.url_ids.items()):
            if sid == server_id:
                try:
                    host, port, _, _ = parse_route_url(url)
                except ValueError:
                    continue
                return host, port
        return None

    # -- lifecycle ----------------------------------------------------------

    async def run(self) -> None:
        """Form or rejoin the meta group and serve it until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.links.run)
            nursery.start_soon(self._unpark_loop)
            peers = await self._members()
            others = [p for p in peers if p != self.name]
            # a cluster's only: a standalone server (``solo_meta``) never imports the Raft stack
            from raft.config import RaftConfig
            from raft.group import RaftGroup

            config = RaftConfig(
                log_compaction_entries_min=META_COMPACTION_ENTRIES,
                quiet_after_s=META_QUIET_AFTER_S,
            )
            self.group = RaftGroup(
                META_GROUP,
                self.name,
                others,
                self.machine,
                self.links,
                OsDisk(self.dir),
                config,
                rng=random.Random(self.rng.random()),
            )
            await nursery.start(self.group.run)
            self.machine.listener = self._effects_send.send_nowait
            await self._views_started.wait()
            await self._reconcile()
            self.ready.set()
            log.info("event=meta_started members=%s", ",".join(sorted(peers)))
            nursery.start_soon(self._effects_loop)
            nursery.start_soon(self._register_loop)
            nursery.start_soon(self._watch_leader)
            self._parked_wake.set()

    async def _members(self) -> list[str]:
        """The group's members: from disk, or found on routes (first start)."""
        path = self.dir / "peers.json"
        saved = await trio.to_thread.run_sync(_read_peers, path)
        if saved:
            return saved
        routes = self.svc.server.routes
        configured = list(self.svc.server.cfg.cluster.routes)  # type: ignore[union-attr]
        while configured:
            pending = [
                u for u in configured if u not in routes.self_urls and u not in routes.url_ids
            ]
            changed = self._known_changed
            if not pending:
                with trio.move_on_after(BOOTSTRAP_SETTLE_S) as settle:
                    await changed.wait()
                if settle.cancelled_caught:
                    break
                continue
            with trio.move_on_after(0.1):
                await changed.wait()
        peers = sorted({self.name, *self.known})
        await trio.to_thread.run_sync(_write_peers, path, peers)
        return peers

    # -- state --------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.group is not None and self.group.is_leader

    @property
    def leader(self) -> str | None:
        return None if self.group is None else self.group.leader_id

    def online(self) -> list[str]:
        """Servers this one can reach now (itself included)."""
        return [self.name] + [n for n in self.known if self.links.is_connected(n)]

    async def online_for(self, replicas: int) -> list[str]:
        """``online()``; while this server is young (``STARTUP_PLACEMENT_GRACE_S``) and
        fewer than ``replicas`` are up but enough are known, first wait (bounded by the
        grace) for the links of known peers not connected yet: a cluster that has just
        formed places an R3 stream although one peer link lags behind the meta election."""
        up = self.online()
        remaining = self._born + STARTUP_PLACEMENT_GRACE_S - trio.current_time()
        missing = [n for n in self.known if not self.links.is_connected(n)]
        if len(up) >= replicas or remaining <= 0 or len(up) + len(missing) < replicas:
            return up
        with trio.move_on_after(remaining):
            async with trio.open_nursery() as nursery:

                async def one(peer: str) -> None:
                    await self.links.wait_connected(peer)
                    if len(self.online()) >= replicas:
                        nursery.cancel_scope.cancel()

                for peer in missing:
                    nursery.start_soon(one, peer)
        return self.online()

    def hosts(self, sa: StreamAssignment) -> bool:
        """Whether this server runs ``sa`` (one of its peers)."""
        return self.name in sa.peers

    def replica_spec(
        self, sa: StreamAssignment, members: tuple[str, ...] | None = None
    ) -> ReplicaSpec | None:
        """This server's place in ``sa``'s Raft group (None for R1); ``members``
        overrides the assignment's peers (a newcomer joining a running group)."""
        if not sa.replicated:
            return None
        peers = tuple(members) if members is not None else tuple(sa.peers)
        js = self.journal_bounds
        return ReplicaSpec(
            sa.group,
            self.name,
            peers,
            self.links,
            seed=self.rng.getrandbits(63),
            journal_entries_max=js[0],
            journal_bytes_max=js[1],
            leader_write_overlap=self.leader_write_overlap,
        )

    def specs(self, names: list[str]) -> list[PeerSpec]:
        """Placement's view of the servers ``names`` (online: reachable now)."""
        up = set(self.online())
        out = []
        for n in names:
            rec = self.machine.peers.get(n)
            tags = rec.tags if rec is not None else ()
            out.append(PeerSpec(n, self.cluster_name, tags, n in up, 0))
        return out

    def replicated_block(self, stream: Any, account: str) -> dict[str, Any]:
        """StreamInfo ``cluster`` of ``account``'s replicated stream, as its leader sees it."""
        return meta_monitor.replicated_block(self, stream, account)

    def unavailable(self, op: tuple[str, ...]) -> bool:
        """Whether a request needing the meta leader is answered 503/10008 now:
        cluster-wide ops after ``QUORUM_LOST_S`` without a meta leader."""
        since = self._leaderless_since
        if (
            self.leader is not None
            or since is None
            or (op[:2] not in CLUSTER_OPS and op[:1] not in CLUSTER_OPS)
        ):
            return False
        return trio.current_time() - since >= QUORUM_LOST_S

    def kick(self) -> None:
        """Something parked requests may wait for happened (a leader, a stream)."""
        self._changed.set()

    def park(
        self,
        req: Any,
        dispatch: Callable[[Any], None],
        answers: Callable[[tuple[str, ...]], bool | None],
        declined: Callable[[Any, float], None] | None = None,
    ) -> None:
        """Hold a request until a meta leader is known (at most ``PARK_S_MAX``);
        ``answers`` is its account's verdict (``AccountMeta.answers``), and
        ``declined(req, arrived)`` hears of it if another server answers it."""
        if len(self._parked) >= PARKED_MAX:
            log.warning("event=meta_parked_full subject=%r", req.subject)
            return
        self._parked.append((trio.current_time(), req, dispatch, answers, declined))
        self._parked_wake.set()

    async def _unpark_loop(self) -> None:
        while True:
            await self._parked_wake.wait()
            self._parked_wake = trio.Event()
            while self._parked:
                if self.ready.is_set() and self.leader is not None:
                    now = trio.current_time()
                    batch, self._parked = self._parked, []
                    for parked in batch:
                        t, req, dispatch, answers, declined = parked
                        if now - t > PARK_S_MAX:
                            continue
                        verdict = answers(req.op)
                        if verdict is None:
                            self._parked.append(parked)
                        elif verdict:
                            dispatch(req)
                        elif declined is not None:
                            declined(req, t)
                    if not self._parked:
                        break
                with trio.move_on_after(PARK_POLL_S):
                    await self._changed.wait()
                self._changed = trio.Event()
                now = trio.current_time()
                self._parked = [p for p in self._parked if now - p[0] <= PARK_S_MAX]

    async def _watch_leader(self) -> None:
        """Track when the meta group lost its leader (for parking and 10008)."""
        assert self.group is not None
        leadership = self.group.subscribe_leadership()
        serving = False
        async with leadership:
            async for state in leadership:
                if state.is_leader and not serving:  # leads and serves (its state is whole)
                    self._announce_leader()
                serving = state.is_leader
                if state.leader_id is None:
                    if self._leaderless_since is None:
                        self._leaderless_since = trio.current_time()
                else:
                    self._leaderless_since = None
                    self._ever_had_leader = True
                    self._parked_wake.set()
                    meta_peers.resume_purges(self)
                self.kick()

    def _announce_leader(self) -> None:
        """``DOMAIN.LEADER_ELECTED`` in the system account (this server leads now)."""
        from node.internal import InternalClient
        from node.jetstream.cluster_advisories import domain_leader_elected

        if self._sys_client is None:
            server = self.svc.server
            self._sys_client = InternalClient(server, "jetstream-meta", server.accounts.system)
        client = self._sys_client
        try:
            domain_leader_elected(self.svc, lambda subj, body: client.publish(subj, body))
        except Exception:
            log.exception("event=meta_leader_advisory_failed")

    def step_down_soon(self, target: str | None) -> None:
        """Hand the meta lead over (to ``target``; None: any current member) in the
        background: a stepdown request is answered before the election ends."""
        if self._nursery is not None and self.group is not None:
            self._nursery.start_soon(self._step_down, target)

    async def _step_down(self, target: str | None) -> None:
        assert self.group is not None
        try:
            await self.group.step_down(target=target)
        except RaftError as exc:
            log.warning("event=meta_stepdown_failed target=%s reason=%r", target, exc)

    async def propose(self, entry: bytes) -> object:
        """Replicate a meta entry; the machine's result.

        Raises:
            RaftError: not leader, no leader, dropped (maybe committed).
        """
        assert self.group is not None
        return await self.group.propose(entry)

    # -- effects --------------------------------------------------------------

    async def _effects_loop(self) -> None:
        async for effect in self._effects_recv:
            try:
                await self._on_effect(effect)
            except Exception:
                log.exception("event=meta_effect_failed effect=%r", effect)
            self.kick()

    def _service(self, sa: StreamAssignment) -> JetStreamService | None:
        """The service of ``sa``'s account here (None: JetStream is not enabled
        for that account on this server: its assignments are not acted on)."""
        view = self.views.get(sa.account)
        if view is None:
            log.warning("event=meta_account_unknown account=%s stream=%s", sa.account, sa.name)
            return None
        return view.svc

    async def _on_effect(self, effect: Effect) -> None:
        from node.jetstream import meta_effects

        svc = self._service(effect.assignment)
        if svc is None:
            return
        if isinstance(effect, StreamAssigned):
            if self.hosts(effect.assignment):
                await meta_effects.assigned(svc, effect)
        elif isinstance(effect, StreamUpdated):
            if effect.scaled:
                from node.jetstream import scaling

                await scaling.scaled(svc, effect)
            elif self.hosts(effect.assignment):
                await meta_effects.updated(svc, effect)
        elif isinstance(effect, StreamRemoved):
            if effect.assignment.name in svc.api.streams:
                await meta_effects.removed(svc, effect)
        elif isinstance(effect, StreamPeersChanged):
            await svc.membership.peers_changed(effect)

    async def _reconcile(self) -> None:
        """Start the streams assigned to this server, every account's (at start)."""
        from node.jetstream import meta_effects

        for sa in self.machine.assigned_to(self.name):
            svc = self._service(sa)
            if svc is None or not self.hosts(sa) or sa.name in svc.api.streams:
                continue
            try:
                await meta_effects.ensure_local(svc, sa)
            except Exception:
                log.exception("event=stream_start_failed account=%s stream=%s", sa.account, sa.name)

    # -- registration ---------------------------------------------------------

    async def _register_loop(self) -> None:
        await meta_peers.register_loop(self)

    # -- monitoring -------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        """``/jsz`` ``meta_cluster`` (and ``/varz`` ``jetstream.meta``)."""
        return meta_monitor.cluster_info(self)

    def raftz(self) -> dict[str, Any]:
        """The meta group's entry of ``/raftz``."""
        return meta_monitor.meta_raftz(self)

    def stream_raftz(self, stream: Any) -> dict[str, Any]:
        """A replicated stream's group entry of ``/raftz``."""
        return meta_monitor.stream_raftz(self, stream)

    def health(self) -> tuple[int, str] | None:
        """None when healthy, else (HTTP status, error) for ``/healthz``."""
        if not self.ready.is_set():
            return 503, "JetStream is still recovering meta layer"
        if self.leader is None:
            return 503, "JetStream has not established contact with a meta leader"
        return None


def _read_peers(path: Path) -> list[str]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        log.error("event=meta_peers_unreadable path=%s reason=%s", path, e)
        return []
    peers = doc.get("peers") if isinstance(doc, dict) else None
    if isinstance(peers, list) and peers and all(isinstance(p, str) for p in peers):
        return peers
    return []


def _write_peers(path: Path, peers: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        json.dump({"peers": peers}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


OnRoute = Callable[["Route"], None]
