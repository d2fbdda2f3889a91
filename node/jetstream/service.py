"""JetStream on one node: API requests in, captured messages to streams, PubAcks out.

Theory of operation: one internal client subscribes to ``$JS.API.>`` (and
``$JS.<domain>.API.>`` when a domain is set).  The router hands each request
over synchronously; it is queued (bounded) and one API task answers requests
in order through the handler table ``ROUTES`` (the handlers live in
``streams_api``, ``msgs_api``, ``snapshot_api``, … and talk to the cluster
facade ``cluster.api``).  ``CONSUMER.MSG.NEXT`` is the exception: it goes
straight to the consumer layer as it arrives (``consumers_api.next_now``),
so pulls never wait behind slow API requests.  Each stream's subjects are
internal subscriptions too: a captured message is offered to its stream together with a callback
that publishes the PubAck on the message's reply subject once the stream's
group says the message is applied and durable.  An unknown API subject gets
no reply, as nats-server does.  Answers sent through the API layer are
counted (``api_total``/``api_errors``, after the handler ran) and audited on
``$JS.EVENT.ADVISORY.API`` (``common`` says which; ``advisories`` publishes).
Direct gets (``$JS.API.DIRECT.GET.<stream>[.<subject>]``) are not API calls:
the catch-all ignores them and a stream with ``allow_direct`` has its own
queue subscriptions for them (made and released with its capture), so a
direct get of any other stream finds no responder (503), as in nats-server.
Streams found on disk are recreated at start.  Mirrors and sources in other
domains talk to their origins through the same internal client
(``ClientMessaging``, the facade's ``Messaging``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from cluster.api import JetStreamApi
from cluster.api_origin import MsgHandler
from cluster.naming import peer_id
from cluster.quarantine import Quarantined
from cluster.streams import Stream
from cluster.transform import cached as cached_transform
from node.internal import InternalClient
from node.jetstream import (
    apilevel,
    cluster_advisories,
    clustered,
    consumers_api,
    membership,
    msgs_api,
    republish,
    snapshot_api,
    streams_api,
)
from node.jetstream.acclimits import ACCOUNT_LIMIT_PUB_ERROR, AccountLimits
from node.jetstream.accounts_js import PURGE_OP, account_store_dir, purge_account
from node.jetstream.advisories import Advisories
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, dumps
from node.jetstream.delivery import ConsumerManager
from node.jetstream.handover import Handover, forwardable, original_subject
from node.jetstream.membership import Membership
from node.jetstream.meta_account import AccountMeta
from node.jetstream.pubacks import make_acker, make_reply_acker, pub_error
from node.jetstream.resources import INSUFFICIENT_RESOURCES, AccountStorage, StorageLimits
from node.jetstream.service_stats import account_info as _account_info
from node.jetstream.service_stats import stats_view
from node.jetstream.solo_meta import SoloMeta
from node.jsapi.versioning import demands_higher_level
from node.monitor.endpoints import js_store_limits
from node.monitor.jsz import JetStreamView
from node.nextroute import (
    LEADER_PREFIX,
    MSG_NEXT_PREFIX,
    SEEN_PREFIX,
    NextWatchers,
    msg_next_subject,
)
from node.session import Subscription

if TYPE_CHECKING:
    from node.jetstream.common import Handler
    from node.server import Server

log = logging.getLogger(__name__)

API_QUEUE_MAX = 10_000
#: a replicated stream's capture outlives the lead this long (``_release_lost_lead``):
#: the unsubscribe's trip over the routes, with room for a loaded machine
CAPTURE_GRACE_S = 0.25
#: op prefixes nats-server drops when they come without a reply subject
_MSG_NEXT = ("CONSUMER", "MSG", "NEXT")
_NEED_REPLY = (("DIRECT", "GET"), _MSG_NEXT)

#: op prefix -> (handler, min and max count of tokens after the prefix)
ROUTES: dict[tuple[str, ...], tuple[Handler, int, int]] = {
    ("STREAM", "CREATE"): (streams_api.create, 1, 1),
    ("STREAM", "UPDATE"): (streams_api.update, 1, 1),
    ("STREAM", "INFO"): (streams_api.info, 1, 1),
    ("STREAM", "DELETE"): (streams_api.delete, 1, 1),
    ("STREAM", "NAMES"): (streams_api.names, 0, 0),
    ("STREAM", "LIST"): (streams_api.list_, 0, 0),
    ("STREAM", "PURGE"): (streams_api.purge, 1, 1),
    ("STREAM", "LEADER", "STEPDOWN"): (streams_api.leader_stepdown, 1, 1),
    ("STREAM", "PEER", "REMOVE"): (membership.peer_remove, 1, 1),
    ("STREAM", "MSG", "GET"): (msgs_api.get, 1, 1),
    ("STREAM", "MSG", "DELETE"): (msgs_api.delete, 1, 1),
    ("DIRECT", "GET"): (msgs_api.direct_get, 1, 1_000),
    ("STREAM", "SNAPSHOT"): (snapshot_api.snapshot, 1, 1),
    ("STREAM", "RESTORE"): (snapshot_api.restore, 1, 1),
    ("CONSUMER", "CREATE"): (consumers_api.create, 1, 1_000),
    ("CONSUMER", "DURABLE", "CREATE"): (consumers_api.create, 2, 2),
    ("CONSUMER", "INFO"): (consumers_api.info, 2, 2),
    ("CONSUMER", "DELETE"): (consumers_api.delete, 2, 2),
    ("CONSUMER", "NAMES"): (consumers_api.names, 1, 1),
    ("CONSUMER", "LIST"): (consumers_api.list_, 1, 1),
    ("CONSUMER", "MSG", "NEXT"): (consumers_api.msg_next, 2, 2),
    ("CONSUMER", "PAUSE"): (consumers_api.pause, 2, 2),
    ("CONSUMER", "UNPIN"): (consumers_api.unpin, 2, 2),
    ("CONSUMER", "LEADER", "STEPDOWN"): (consumers_api.leader_stepdown, 2, 2),
}


class ClientMessaging:
    """``cluster.api_origin.Messaging`` over an internal client (subjects as text).

    Args:
        client: the JetStream service's internal client.
    """

    def __init__(self, client: InternalClient) -> None:
        self._client = client

    def subscribe(self, subject: str, handler: MsgHandler) -> object:
        """Subscribe ``subject``; ``handler`` runs synchronously per message."""

        def on_msg(
            sub: Subscription, subj: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            handler(subj.decode(errors="replace"), reply.decode() if reply else None, hdr, body)

        return self._client.subscribe(subject.encode(), on_msg)

    def unsubscribe(self, handle: object) -> None:
        """Drop a subscription made by ``subscribe``."""
        if isinstance(handle, Subscription):
            self._client.unsubscribe(handle)

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: bytes | None = None,
    ) -> None:
        """Publish on the server's behalf."""
        self._client.publish(
            subject.encode(), payload, reply=reply.encode() if reply else None, headers=headers
        )


def route(op: tuple[str, ...]) -> Handler | None:
    """The handler for an op (tokens after ``API``), or None (no reply)."""
    for n in range(min(3, len(op)), 0, -1):
        entry = ROUTES.get(op[:n])
        if entry is not None:
            handler, lo, hi = entry
            return handler if lo <= len(op) - n <= hi else None
    return None


class JetStreamService:
    """JetStream of one account on one server.

    Args:
        server: the server (config, accounts, routes).
        account: the ``node.accounts.Account`` served (None: the home account,
            the first that enables JetStream); in a cluster the home
            account's service runs the meta layer and the others share it
            (``node.jetstream.meta_account``).
        storage: the server's storage limits, shared by the accounts' services
            (None: this service makes them).
    """

    def __init__(
        self, server: Server, account: Any = None, storage: StorageLimits | None = None
    ) -> None:
        self.server = server
        js = server.cfg.jetstream
        self.domain = js.domain or ""
        #: the account served, its router (its subject space) and its directory
        self.account = account if account is not None else server.accounts.home
        home = self.account is server.accounts.home
        self.router = self.account.router
        self.store_dir = account_store_dir(js.jetstream_dir, self.account.name, home=home)
        self.client = InternalClient(server, "jetstream", self.account)
        #: requests about a replicated stream across its leader changes
        self.handover = Handover(self)
        #: ``$TRIJET.SEEN.>`` while this server has onlookers of pulls (``node.nextroute``)
        self._seen_sub: Subscription | None = None
        #: set while such a pull is handed to them: the API ignores it
        self._deaf = False
        self.api: JetStreamApi = None  # type: ignore[assignment]  # set in run()
        self.consumers: ConsumerManager = None  # type: ignore[assignment]  # set in run()
        self.advisories = Advisories(self)
        #: the server's storage limits (reservations and usage, every account's),
        #: resolved at start, seen through this account
        self.storage = storage if storage is not None else StorageLimits(*js_store_limits(js))
        self.resources = AccountStorage(self.storage, self.account.name)
        #: the account's JetStream limits (``node.jetstream.acclimits``)
        acc_spec = server.cfg.accounts.get(self.account.name)
        self.limits = AccountLimits.from_config(acc_spec.js_limits if acc_spec else {})
        self._subs: dict[str, list[Subscription]] = {}
        self._next_any: Subscription | None = None
        #: a replicated stream's capture kept ``CAPTURE_GRACE_S`` after its lead was lost
        self._graced: dict[str, list[Subscription]] = {}
        self._nursery: trio.Nursery | None = None
        self._send, self._recv = trio.open_memory_channel[ApiRequest](API_QUEUE_MAX)
        self.api_total = 0
        self.api_errors = 0
        self.api_inflight = 0  # queued or being handled
        #: whether this server is one of a cluster's (routes, the ``_meta_`` group)
        self.clustered = server.cfg.cluster is not None
        #: the account's view of the ``_meta_`` Raft group in cluster mode, else None
        self.meta: AccountMeta | None = None
        #: the meta layer that decides stream creates, updates and deletes: the
        #: ``_meta_`` group in a cluster, a group of one on a standalone server
        self.assignments: AccountMeta | SoloMeta
        if self.clustered:
            self.meta = self.assignments = AccountMeta.for_service(self)
        else:
            self.assignments = SoloMeta(self)
        self.membership = Membership(self)
        #: directories set aside at start because they could not be recovered
        self.quarantined: list[Quarantined] = []
        #: set when ``run`` has returned, and when ``stop`` has closed the stores
        self._finished = trio.Event()
        self.stopped = trio.Event()

    # -- lifecycle ----------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover streams, subscribe the API, answer requests until cancelled."""
        try:
            await self._run(task_status)
        finally:
            self._finished.set()

    def detach(self) -> None:
        """Stop taking requests and messages at once (the account loses JetStream): every
        subscription of the service goes; ``stop`` ends the rest."""
        self.client.close()

    async def stop(self) -> None:
        """End ``run`` (its streams and consumers stop), then close the streams' stores and
        give their usage back: the files stay, as nats-server keeps them, and a service
        started again later in the account recovers them."""
        self.detach()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
            await self._finished.wait()
        if self.api is not None:
            for name, stream in list(self.api.streams.items()):
                self.resources.forget(name)
                stream.store.close()
        self.stopped.set()

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.api = JetStreamApi(
                self.store_dir, nursery, domain=self.domain, messaging=ClientMessaging(self.client)
            )
            self.api.set_sync_interval(_sync_interval_s(self.server.cfg.jetstream.sync_interval))
            self.api.on_stream_started.append(self.resources.track)
            self.api.on_stream_started.append(self._capture)
            self.api.on_stream_started.append(self._attach_republish)
            self.consumers = ConsumerManager(self, nursery)
            self.api.sourcing.clustered = self.clustered
            if isinstance(self.assignments, SoloMeta):  # its streams are on its disk
                await self.api.recover()
                await self.consumers.recover()
                for stream in list(self.api.streams.values()):
                    self.assignments.adopt(stream)
            self.quarantined = await trio.to_thread.run_sync(self.api.quarantined)
            self.client.subscribe(b"$JS.API.>", self._on_api)
            if self.domain:
                self.client.subscribe(b"$JS." + self.domain.encode() + b".API.>", self._on_api)
            if self.meta is not None:  # streams start as the meta layer assigns them
                # pulls sent to a consumer's leader (``node.nextroute``)
                self._next_any = self.client.subscribe(LEADER_PREFIX + b">", self._on_to_leader)
                nursery.start_soon(self.handover.run)
                # requests an old stream leader hands over (``node.jetstream.handover``)
                self.client.subscribe(self.handover.inbox + b">", self._on_forwarded)
                # pulls seen by this server's other subscribers (``node.nextroute``)
                watchers = self.account.next_watchers = NextWatchers(self._watch_seen)
                for sub in self.account.sublist.all():
                    if not sub.client.internal:
                        watchers.added(sub.subject)
                server = self.server
                self.api.on_stream_started.append(self.membership.stream_started)
                self.membership.start()
                clustered.usage_responder(self)
                if self.meta.runs_layer:  # the home account's: one layer per server
                    layer = self.meta.layer
                    server.route_listeners.append(layer.route_up)
                    for route in list(server.routes.by_id.values()):
                        layer.route_up(route)
                    server.raft_links = layer.links
                    nursery.start_soon(layer.run)
                self.meta.mark_started()
            task_status.started()
            async for req in self._recv:
                try:
                    await self._handle(req)
                except Exception:
                    # last resort: this request is answered with an error,
                    # the service and the server go on
                    self.server.internal_error("jsapi", subject=req.subject)
                    self._answer_internal_error(req)
                finally:
                    self.api_inflight -= 1

    def _on_api(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        if self._deaf:
            return  # a pull handled elsewhere, for this server's onlookers
        op = _op_of(subject)
        if ".".join(op).startswith("DIRECT.GET"):
            self._unserved(sub, subject, reply)  # served by per-stream subscriptions only
            return
        if not reply and any(op[: len(p)] == p for p in _NEED_REPLY):
            return  # nats-server acts on other requests without a reply subject
        req = ApiRequest(subject, op, reply or b"", hdr, body, self.client.sender)
        if (
            len(op) == 5
            and op[:3] == _MSG_NEXT
            and self.meta is not None
            and req.client is not None
            and self.consumers.leads_next(op[3], op[4])
        ):
            # a client's pull that went to no other server: this one holds
            # the consumer's leader subject (``node.nextroute``)
            self._answer_here_or_forward(req)
            return
        if self.meta is not None:
            verdict = self.meta.answers(op)
            if self.handover.held:
                self.handover.own_copy(req, verdict)
            if verdict is None:  # decided once the meta group has a leader
                self.meta.park(req, self._dispatch, self.handover.declined)
                return
            if not verdict:
                # another server of the cluster answers this one (or a new
                # leader, handed it by this old one: ``node.jetstream.handover``)
                self.handover.declined(req)
                return
        self._dispatch(req)

    def _on_forwarded(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """A request an old stream leader handed to this server
        (``node.jetstream.handover``): answered here unless it already was,
        never forwarded again."""
        original = original_subject(subject)
        if original is None or not original.startswith(b"$JS.") or not reply or self.meta is None:
            return
        op = _op_of(original)
        if forwardable(op) is None:
            return
        req = ApiRequest(original, op, reply, hdr, body, None)
        verdict = self.meta.answers(op)
        if verdict is None:
            self.meta.park(req, self.handover.hold)
        elif verdict:
            self.handover.hold(req)

    def answer_here(self, req: ApiRequest) -> None:
        """Answer a request the handover let through (``node.jetstream.handover``)."""
        self._dispatch(req, checked=True)

    def _on_to_leader(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """A pull request sent to this server as its consumer's leader
        (``node.nextroute``): answered here if this server leads the
        consumer, else published again as the ``MSG.NEXT`` it stands for."""
        if sub is not self._next_any or not reply or self.meta is None:
            return  # the leader's literal subscriptions only hold the interest
        original = msg_next_subject(subject)
        tokens = original.decode(errors="replace").split(".")
        if len(tokens) != 7:
            return
        self.deliver_seen(original, reply, hdr, body)  # this server's onlookers
        req = ApiRequest(original, tuple(tokens[2:]), reply, hdr, body, self.client.sender)
        self._answer_here_or_forward(req)

    def _watch_seen(self, on: bool) -> None:
        """Subscribe ``$TRIJET.SEEN.>`` while a subscriber here can see pulls."""
        if on and self._seen_sub is None:
            self._seen_sub = self.client.subscribe(SEEN_PREFIX + b">", self._on_seen)
        elif not on and self._seen_sub is not None:
            self.client.unsubscribe(self._seen_sub)
            self._seen_sub = None

    def _on_seen(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """Another server's pull, for this server's onlookers (``node.nextroute``)."""
        if sub is self._seen_sub:
            self.deliver_seen(MSG_NEXT_PREFIX + subject[len(SEEN_PREFIX) :], reply, hdr, body)

    def deliver_seen(
        self, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """Hand a pull request handled elsewhere to this server's subscribers
        as a routed message (no queue groups), this service deaf to it."""
        if self._seen_sub is None:
            return
        self._deaf = True
        try:
            self.router.publish(None, subject, reply, hdr, body, ())
            self.router.flush()
        finally:
            self._deaf = False

    def _answer_here_or_forward(self, req: ApiRequest) -> None:
        """A pull sent to this server alone: answered here if it leads the
        consumer, else published again (after an election, if one runs)."""
        meta = self.meta
        assert meta is not None
        if meta.answers(req.op) is None:  # electing: decided once a leader is known
            meta.layer.park(
                req, self._answer_or_forward, lambda op: None if meta.answers(op) is None else True
            )
            return
        self._answer_or_forward(req)

    def _answer_or_forward(self, req: ApiRequest) -> None:
        assert self.meta is not None
        if self.meta.answers(req.op):
            self._dispatch(req)
            return
        # not the leader (any more): its leader subject goes first, so the
        # request is routed to the new leader's interest or to everyone
        self.consumers.drop_next_interest(req.op[3], req.op[4])
        self.client.publish(req.subject, req.body, reply=req.reply, headers=req.headers)

    def _dispatch(self, req: ApiRequest, checked: bool = False) -> None:
        """Answer ``req`` here: pulls at once, the rest through the API queue
        (unless its copy handed over by an old leader was: ``checked`` says
        that was asked already)."""
        if self.meta is not None and not checked and not self.handover.first(req):
            return
        if len(req.op) == 5 and req.op[:3] == _MSG_NEXT:  # the consumer layer answers, now
            try:
                consumers_api.next_now(self, req)
            except Exception:
                log.exception("event=msg_next_failure subject=%r", req.subject)
            return
        try:
            self._send.send_nowait(req)
        except trio.WouldBlock:
            log.warning("event=jsapi_queue_full subject=%r", req.subject)
        else:
            self.api_inflight += 1

    # -- capture --------------------------------------------------------------

    def _capture(self, stream: Stream) -> None:
        """Capture a stream's subjects: R1 at once; a replicated stream only
        while this server leads it (publishes elsewhere reach the leader over
        routes; during an election nobody listens: 503, as nats-server), and
        ``CAPTURE_GRACE_S`` after it handed the lead over (``_release_lost_lead``)."""
        stream.answer_batch = self.router.batched
        rg = stream.replicated
        if rg is None:
            self._subscribe_stream(stream)
            return
        name = stream.cfg.name

        def leadership(lead: bool) -> None:
            if self.api.streams.get(name) is not stream:
                return
            if lead:
                self.release(name)
                self._subscribe_stream(stream)
                if self.meta is not None:
                    block = self.meta.replicated_block(stream)
                    me = {"name": self.server.server_name, "current": True, "active": 0}
                    me["peer"] = peer_id(self.server.server_name)
                    self.advisories.stream_leader_elected(
                        name, me["name"], [me, *block["replicas"]]
                    )
                    for c in list(self.consumers.of(name).values()):
                        cluster_advisories.consumer_leader_elected(self, c)
            else:
                self._release_lost_lead(stream)
                if self.meta is not None and cluster_advisories.lost_quorum(stream):
                    cluster_advisories.quorum_lost(self, stream)
            if self.meta is not None:
                self.meta.kick()

        rg.leader_listeners.append(leadership)
        if rg.is_leader:
            self._subscribe_stream(stream)

    def _subscribe_stream(self, stream: Stream) -> None:
        name = stream.cfg.name
        ack = self._acker(name)
        resources = self.resources
        limits = self.limits
        bytes_limited = limits.max_memory >= 0 or limits.max_storage >= 0
        defer = self.router.defer  # the batch is applied once the chunk is routed

        def on_msg(
            sub: Subscription,
            subject: bytes,
            reply: bytes | None,
            hdr: bytes | None,
            payload: bytes,
        ) -> None:
            if resources.exceeded(stream.cfg.storage):  # the proposer's check (10023)
                if reply and not stream.cfg.no_ack:
                    self.client.publish(reply, pub_error(name, *INSUFFICIENT_RESOURCES))
                return
            if bytes_limited:
                storage = stream.cfg.storage
                if limits.publish_exceeds(storage, resources.used[storage], subject, hdr, payload):
                    if reply and not stream.cfg.no_ack:
                        self.client.publish(reply, pub_error(name, *ACCOUNT_LIMIT_PUB_ERROR))
                    return
            cb = None if (stream.cfg.no_ack or not reply) else partial(ack, reply)
            subj = subject.decode()
            st = stream.cfg.subject_transform
            if st is not None:  # stored under the transformed subject, if it matches
                tr = cached_transform(st.src, st.dest)
                subj = (tr.match(subj) if tr is not None else None) or subj
            if not stream.offer(subj, hdr, payload, cb, defer) and reply:
                self.client.publish(reply, pub_error(name, 503, 10077, "stream is busy"))

        acks = self._reply_acker(name, ack)

        def on_run(
            sub: Subscription, subject: bytes, replies: list[bytes | None], payloads: list[bytes]
        ) -> None:
            # a publisher's run without headers: the checks once (nothing the
            # run does changes their answer before its batch is applied), the
            # run queued with its replies, the PubAcks sent per batch
            cfg = stream.cfg
            if (
                bytes_limited
                or cfg.subject_transform is not None
                or resources.exceeded(cfg.storage)
            ):
                for reply, payload in zip(replies, payloads, strict=True):
                    on_msg(sub, subject, reply, None, payload)
                return
            k = stream.offer_run(
                subject.decode(), replies, payloads, None if cfg.no_ack else acks, defer
            )
            if k < len(payloads) and not cfg.no_ack:
                for reply in replies[k:]:
                    if reply:
                        self.client.publish(reply, pub_error(name, 503, 10077, "stream is busy"))

        self._subs[name] = [
            self.client.subscribe(s.encode(), on_msg, run=on_run) for s in stream.cfg.subjects
        ]
        if stream.cfg.allow_direct:
            self._subs[name] += self._direct_subs(name)
        if self.meta is not None:
            self._subs[name].append(clustered.info_responder(self, stream))

    def _direct_subs(self, name: str) -> list[Subscription]:
        """``$JS.API.DIRECT.GET.<name>`` and ``….<name>.>`` (queue group
        ``_sys_``, as nats-server): direct gets are answered only while the
        stream allows them; they go through the API queue, never counted.
        """
        prefixes = [b"$JS.API."]
        if self.domain:
            prefixes.append(b"$JS." + self.domain.encode() + b".API.")
        subs = []
        for prefix in prefixes:
            base = prefix + b"DIRECT.GET." + name.encode()
            for subject in (base, base + b".>"):
                subs.append(self.client.subscribe(subject, self._on_direct, queue=b"_sys_"))
        return subs

    def _on_direct(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        if not reply:
            return
        if self._deaf:
            return  # a pull handled elsewhere, for this server's onlookers
        tokens = subject.decode(errors="replace").split(".")
        op = tuple(tokens[2:] if tokens[1] == "API" else tokens[3:])
        try:
            self._send.send_nowait(ApiRequest(subject, op, reply, hdr, body, self.client.sender))
        except trio.WouldBlock:
            log.warning("event=jsapi_queue_full subject=%r", subject)
        else:
            self.api_inflight += 1

    def _unserved(self, sub: Subscription, subject: bytes, reply: bytes | None) -> None:
        """A direct get that reached only the API catch-all: nats-server keeps
        these out of its API import, so the requester gets no-responders (503).
        """
        src = self.client.sender
        if not reply or src is None or not getattr(src, "no_responders", False):
            return
        router = self.router
        r = router.sublist.match(subject)
        if any(s is not sub for s in r.psubs) or r.qsubs:
            return
        if router.route_sublist.count:
            rr = router.route_sublist.match(subject)
            if rr.psubs or rr.qsubs:
                return
        router.no_responders(src, subject, reply)

    def _attach_republish(self, stream: Stream) -> None:
        client = self.client

        def publish(subject: bytes, payload: bytes, headers: bytes) -> None:
            client.publish(subject, payload, headers=headers)

        republish.attach(stream, publish)

    def recapture(self, stream: Stream) -> None:
        """Subscribe the stream's (changed) subjects afresh (where it leads)."""
        self.release(stream.cfg.name)
        if stream.is_leader:
            self._subscribe_stream(stream)

    def release(self, name: str) -> None:
        """Stop capturing for stream ``name``."""
        for sub in self._subs.pop(name, []) + self._graced.pop(name, []):
            self.client.unsubscribe(sub)

    def _release_lost_lead(self, stream: Stream) -> None:
        """This replica lost the lead: release the stream's subscriptions; after
        a stepdown (it handed the lead over) its capture only ``CAPTURE_GRACE_S``
        later.

        The unsubscribe reaches the other servers over routes after a while;
        a publish they routed here meanwhile found no subscription and was
        dropped (its client waited for its timeout).  Kept a little longer,
        the capture offers it to the stream, which refuses it at once as a
        follower: one with a ``Nats-Msg-Id`` goes to the new leader
        (``cluster.reroute``), the others get the late ``NOT_COMMITTED``.  A
        lead lost otherwise (no majority, a partition) releases everything at
        once, so publishes meet no responders (503) at once, as nats-server's.
        """
        name = stream.cfg.name
        subs = self._subs.pop(name, [])
        n = len(stream.cfg.subjects)  # the capture comes first (``_subscribe_stream``)
        capture, others = subs[:n], subs[n:]
        for sub in others + self._graced.pop(name, []):
            self.client.unsubscribe(sub)
        rg = stream.replicated
        if not capture or self._nursery is None or rg is None or not rg.raft.handing_over:
            for sub in capture:
                self.client.unsubscribe(sub)
            return
        self._graced[name] = capture
        self._nursery.start_soon(self._end_grace, name, capture)

    async def _end_grace(self, name: str, capture: list[Subscription]) -> None:
        await trio.sleep(CAPTURE_GRACE_S)
        if self._graced.get(name) is capture:
            del self._graced[name]
            for sub in capture:
                self.client.unsubscribe(sub)

    def _acker(self, stream: str) -> Callable[[bytes, Any], None]:
        return make_acker(self.client, self.router, stream, self.domain)

    def _reply_acker(
        self, stream: str, ack: Callable[[bytes, Any], None]
    ) -> Callable[[list[bytes], list[Any]], None]:
        return make_reply_acker(self.client, self.router, stream, self.domain, ack)

    # -- API ------------------------------------------------------------------

    def purge_account(self, *, resume: bool = False) -> None:
        """Delete every stream of the account (``$JS.API.ACCOUNT.PURGE``), in the API
        task's turn, so no request of the account runs beside it (``resume``: the
        rest of a purge another server began, ``accounts_js.purge_account``)."""
        req = ApiRequest(b"", PURGE_OP, b"", None, b"resume" if resume else b"", None)
        try:
            self._send.send_nowait(req)
        except trio.WouldBlock:
            log.warning("event=jsapi_queue_full subject=account_purge")
        else:
            self.api_inflight += 1

    async def _handle(self, req: ApiRequest) -> None:
        if req.op == PURGE_OP:
            await purge_account(self, resume=req.body == b"resume")
            return
        if req.op == ("INFO",):
            handler: Handler | None = _account_info
        else:
            handler = route(req.op)
        if handler is None:
            return
        if demands_higher_level(req.headers):  # Nats-Required-Api-Level above ours
            handler = apilevel.refuse
        elif self.meta is not None and self.meta.unavailable(req.op):
            handler = unavailable
        answer: str | bytes | None
        try:
            answer = await handler(self, req)
        except ApiAnswer as a:
            self.api_errors += 1
            answer = a.text
        if answer is None:
            return  # answered outside the API layer: neither counted nor audited
        self.api_total += 1  # after the handler: INFO reports the count before itself
        if req.reply:
            self.client.publish(req.reply, answer.encode() if isinstance(answer, str) else answer)
        self.advisories.api_audit(req, answer)

    def answer(
        self, reply: bytes, body: str | bytes, origin: Mapping[str, Any] | None = None
    ) -> None:
        """Publish an API answer decided outside the request's handler (a
        meta effect on the stream's host), audited when the request's
        ``origin`` came with it."""
        self.api_total += 1
        if reply:
            self.client.publish(reply, body.encode() if isinstance(body, str) else body)
        if origin:
            self.advisories.origin_audit(origin, body)

    def cluster_block(self, stream: Stream | None = None) -> dict[str, Any]:
        """StreamInfo ``cluster`` of a stream this server leads."""
        if self.meta is not None:
            rg = stream.replicated if stream is not None else None
            if rg is not None and (stream.cfg.num_replicas > 1 or len(rg.members) > 1):
                return self.meta.replicated_block(stream)
            return {"name": self.meta.cluster_name, "leader": self.server.server_name}
        return {"leader": self.server.server_name}

    def all_configs(self) -> dict[str, Any]:
        """Every stream's config by name (the meta state's)."""
        return self.assignments.configs()

    def _answer_internal_error(self, req: ApiRequest) -> None:
        """500/10051 for a request whose handling failed unexpectedly."""
        self.api_total += 1
        self.api_errors += 1
        if req.reply:
            err = {"code": 500, "err_code": 10051, "description": "internal error"}
            text = dumps({"type": f"{TYPE}error_response", "error": err})
            self.client.publish(req.reply, text.encode())

    def consumer_count(self, stream: str) -> int:
        """Consumers on ``stream``."""
        return self.consumers.count(stream) if self.consumers is not None else 0

    def usage(self) -> tuple[int, int]:
        """Bytes stored ``(memory, file)``."""
        view = self.stats()
        return view.memory, view.storage

    def stats(self) -> JetStreamView:
        """Figures for ``/jsz``, ``/varz`` and ``$JS.API.INFO`` (``service_stats``)."""
        return stats_view(self)


async def unavailable(svc: JetStreamService, req: ApiRequest) -> str:
    """503/10008: the meta group has had no leader for a while (quorum lost)."""
    from node.jetstream.meta import unavailable_answer

    raise ApiAnswer(unavailable_answer(req.op))


def _sync_interval_s(configured: str | float | None) -> float | None:
    """The stores' sync interval: None (each batch, before its PubAcks) unless
    the user configured a positive ``sync_interval``."""
    if isinstance(configured, int | float) and configured > 0:
        return float(configured)
    return None


def _op_of(subject: bytes) -> tuple[str, ...]:
    """An API subject's op: the tokens after ``API`` (``$JS.API.`` or ``$JS.<domain>.API.``)."""
    tokens = subject.decode(errors="replace").split(".")
    return tuple(tokens[2:] if tokens[1] == "API" else tokens[3:])
