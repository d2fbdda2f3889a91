"""The JetStream API in accounts without JetStream, and the system account's operator requests.

Theory of operation: JetStream runs in one account (``node.accounts``).  In every other account
of a JetStream server nats-server still answers ``$JS.API.*`` — with 503/10039 "JetStream not
enabled for account" in the response type of the request (``not_enabled_answer``, a pure
table, as observed on nats-server 2.15.1): a normal account gets each API's own type (and its
empty paging fields); the system account gets ``system_response`` for everything but
``INFO``.  Pulls and direct gets find no responder in a normal account (nats-server imports
neither), and an unknown API gets no reply.  These answers are local: the responder's
subscription is not announced to routes, so in a cluster the server a client is connected to
answers, once — unless another server of the cluster runs JetStream in that account (its
``PeerRecord`` says so): then that server answers over the route, as with nats-server when
one server's configuration lacks an account's JetStream.

The system account also carries the operator requests ``$JS.API.META.LEADER.STEPDOWN`` and
``$JS.API.SERVER.REMOVE``.  In a cluster their subscriptions are announced, every server sees
them, and the meta leader alone answers (``MetaOps``): stepdown hands the ``_meta_`` group's
lead over (placement ``preferred``/``cluster``/``tags`` as for streams), server remove takes a
peer out of the ``_meta_`` group.  On a single server, and from any other account, they get no
reply, as nats-server gives.  ``$JS.API.ACCOUNT.PURGE.<account>`` from the system account
of a single server answers ``{"initiated":true}`` for any account name (the body is ignored)
and then deletes every stream of that account, if it has JetStream, with their advisories in
the account, and its directory, as nats-server 2.15.1 does (``accounts_js.purge_account``);
from any other account or without an account token it gets no reply; in a cluster the meta
leader answers it (``MetaOps``) and deletes the account's streams through the meta log.  Removing the meta leader itself (nats-server: no reply, the
server leaves the group and another leads): the leader hands the lead over, then publishes the
request again (marked, without a reply subject) for the next leader to act on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import trio

from cluster.naming import peer_id
from cluster.placement import NoPlacement, stepdown_target
from node.internal import InternalClient
from node.jetstream.advisories import API_AUDIT_SUBJECT, API_AUDIT_TYPE, Advisories
from node.jetstream.common import ApiAnswer, dumps, error, json_object
from node.jetstream.meta_ops import remap_server
from node.jsapi.errors import (
    BAD_REQUEST,
    CLUSTER_NO_PEERS,
    CLUSTER_SERVER_NOT_MEMBER,
    INVALID_JSON,
    JSApiError,
)
from raft.errors import RaftError

if TYPE_CHECKING:
    from node.accounts import Account
    from node.server import Server
    from node.session import Subscription

log = logging.getLogger(__name__)

T = "io.nats.jetstream.api.v1."
NOT_ENABLED = {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}
CLUSTERING_REQUIRED = {
    "code": 503,
    "err_code": 10010,
    "description": "JetStream clustering support required",
}
NO_RESPONDERS = "no-responders"
UNPIN = "unpin"  # answered from the body: ``unpin_answer``
STEPDOWN = ("META", "LEADER", "STEPDOWN")
SERVER_REMOVE = ("SERVER", "REMOVE")
STEPDOWN_RESPONSE = T + "meta_leader_stepdown_response"
#: marks a SERVER.REMOVE a former meta leader hands to the next one (removing itself)
HANDOVER_HEADER = b"Trijet-Meta-Handover"
HANDOVER_TRIES_MAX = 20
HANDOVER_RETRY_S = 0.25
REMOVE_RESPONSE = T + "meta_server_remove_response"

_PAGE = {"total": 0, "offset": 0, "limit": 0}
#: (op prefix, tokens after it, response type, fields after ``error``) for a normal account
_TABLE: tuple[tuple[tuple[str, ...], int, str, dict[str, Any]], ...] = (
    (("INFO",), 0, "account_info_response", {}),
    (("STREAM", "CREATE"), 1, "stream_create_response", {}),
    (("STREAM", "UPDATE"), 1, "stream_update_response", {}),
    (("STREAM", "NAMES"), 0, "stream_names_response", {**_PAGE, "streams": None}),
    (("STREAM", "LIST"), 0, "stream_list_response", {**_PAGE, "streams": []}),
    (("STREAM", "INFO"), 1, "stream_info_response", dict(_PAGE)),
    (("STREAM", "DELETE"), 1, "stream_delete_response", {}),
    (("STREAM", "PURGE"), 1, "stream_purge_response", {"purged": 0}),
    (("STREAM", "MSG", "GET"), 1, "stream_msg_get_response", {}),
    (("STREAM", "MSG", "DELETE"), 1, "stream_msg_delete_response", {}),
    (("STREAM", "SNAPSHOT"), 1, "stream_snapshot_response", {}),
    (("STREAM", "RESTORE"), 1, "stream_restore_response", {"deliver_subject": ""}),
    (("CONSUMER", "CREATE"), 1, "consumer_create_response", {}),
    (("CONSUMER", "CREATE"), 2, "consumer_create_response", {}),
    (("CONSUMER", "CREATE"), 3, "consumer_create_response", {}),
    (("CONSUMER", "DURABLE", "CREATE"), 2, "consumer_create_response", {}),
    (("CONSUMER", "NAMES"), 1, "consumer_names_response", {**_PAGE, "consumers": []}),
    (("CONSUMER", "LIST"), 1, "consumer_list_response", {**_PAGE, "consumers": []}),
    (("CONSUMER", "INFO"), 2, "consumer_info_response", {}),
    (("CONSUMER", "DELETE"), 2, "consumer_delete_response", {}),
    (
        ("CONSUMER", "PAUSE"),
        2,
        "consumer_pause_response",
        {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    ),
)
STREAM_NOT_FOUND = {"code": 404, "err_code": 10059, "description": "stream not found"}
#: asked of the stream's or consumer's group: nats-server checks clustering first (10010 on
#: a single server); in a cluster the stepdowns look the stream up first (10059)
_CLUSTER_ONLY: tuple[tuple[tuple[str, ...], int, str, dict[str, Any]], ...] = (
    (("STREAM", "LEADER", "STEPDOWN"), 1, "stream_leader_stepdown_response", STREAM_NOT_FOUND),
    (("STREAM", "PEER", "REMOVE"), 1, "stream_remove_peer_response", NOT_ENABLED),
    (("CONSUMER", "LEADER", "STEPDOWN"), 2, "consumer_leader_stepdown_response", STREAM_NOT_FOUND),
)
_UNIMPORTED = (("CONSUMER", "MSG", "NEXT"), ("DIRECT", "GET"))


def _doc(type_: str, err: dict[str, Any], extra: dict[str, Any]) -> str:
    return dumps({"type": T + type_, "error": err, **extra})


def _doc_ok(type_: str, fields: dict[str, Any]) -> str:
    return dumps({"type": T + type_, **fields})


def not_enabled_answer(op: tuple[str, ...], *, system: bool, clustered: bool) -> str | None:
    """nats-server's answer to API request ``op`` (tokens after ``API``) in an account
    without JetStream: the JSON text, ``NO_RESPONDERS``, ``UNPIN`` (see ``unpin_answer``),
    or None (no reply at all).

    The operator requests (``STEPDOWN``, ``SERVER_REMOVE``) are not answered here.
    """
    if op[: len(STEPDOWN)] == STEPDOWN or op[: len(SERVER_REMOVE)] == SERVER_REMOVE:
        return None
    if op == ("INFO",):
        return _doc("account_info_response", NOT_ENABLED, {})
    if system:
        if op[:2] == ("ACCOUNT", "PURGE"):
            if len(op) == 3 and not clustered:  # ``AccountPurge`` acts on it
                return _doc_ok("account_purge_response", {"initiated": True})
            return None  # no account named, or a cluster (the meta leader's ``MetaOps``)
        return _doc("system_response", NOT_ENABLED, {})
    if any(op[: len(p)] == p for p in _UNIMPORTED):
        return NO_RESPONDERS
    if op[:2] == ("CONSUMER", "UNPIN") and len(op) == 4:
        if clustered:  # the stream is looked up first there
            return _doc("consumer_unpin_response", STREAM_NOT_FOUND, {})
        return UNPIN
    if clustered and op[:2] == ("STREAM", "SNAPSHOT"):
        return None  # observed: no reply in a cluster
    for prefix, n, type_, in_cluster in _CLUSTER_ONLY:
        if op[: len(prefix)] == prefix and len(op) == len(prefix) + n:
            return _doc(type_, in_cluster if clustered else CLUSTERING_REQUIRED, {})
    for prefix, n, type_, extra in _TABLE:
        if op[: len(prefix)] == prefix and len(op) == len(prefix) + n:
            return _doc(type_, NOT_ENABLED, extra)
    return None


def unpin_answer(body: bytes) -> str:
    """``CONSUMER.UNPIN`` in a normal account without JetStream: nats-server reads the
    request (a consumer group is required) before it finds JetStream disabled."""
    type_ = "consumer_unpin_response"
    text = body.strip()
    if not text:
        reason = "unexpected end of JSON input"
    else:
        try:
            req = json_object(text, T + type_, empty_ok=False)
        except ApiAnswer as answer:
            return answer.text
        group = req.get("group")
        if isinstance(group, str) and group:
            return _doc(type_, NOT_ENABLED, {})
        reason = "consumer group not specified"
    err = JSApiError(INVALID_JSON, err=reason)
    return _doc(type_, err.to_dict(), {})


class NotEnabledResponder:
    """``$JS.API`` in one account without JetStream (local answers only).

    Args:
        server: the server.
        account: the account served (never JetStream's).
    """

    def __init__(self, server: Server, account: Account) -> None:
        self.server = server
        self.account = account
        self.client = InternalClient(server, f"jetstream-disabled:{account.name}", account)
        self.clustered = server.cfg.cluster is not None
        #: what ``Advisories`` reads of a service: the account's router, the domain
        self.router = account.router
        self.domain = server.cfg.jetstream.domain or ""
        self.client.subscribe(b"$JS.API.>", self._on_api, announce=False)
        domain = server.cfg.jetstream.domain
        if domain:
            self.client.subscribe(
                b"$JS." + domain.encode() + b".API.>", self._on_api, announce=False
            )

    def _on_api(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        if not reply:
            return
        if self.clustered and self._served_elsewhere():
            return  # a server running this account's JetStream answers (over the route)
        tokens = subject.decode(errors="replace").split(".")
        op = tuple(tokens[2:] if tokens[1] == "API" else tokens[3:])
        answer = not_enabled_answer(op, system=self.account.is_system, clustered=self.clustered)
        if answer is None:
            return
        if op[:2] == ("ACCOUNT", "PURGE"):  # answered at once, acted on in the background
            self.client.publish(reply, answer.encode())
            self._audit(op, body, answer)
            svc = next((j for j in self.server.js_services if j.account.name == op[2]), None)
            if svc is not None:
                svc.purge_account()
            return
        if answer == UNPIN:
            answer = unpin_answer(body)
        elif answer == NO_RESPONDERS:
            src = self.client.sender
            if src is not None and getattr(src, "no_responders", False):
                self.account.router.no_responders(src, subject, reply)
            return
        self.client.publish(reply, answer.encode())

    def _audit(self, op: tuple[str, ...], body: bytes, answer: str) -> None:
        system_audit(self, "$JS.API." + ".".join(op), body, answer)

    def _served_elsewhere(self) -> bool:
        """Whether another server of the cluster told the meta layer it runs this
        account's JetStream (then, as on nats-server, the request is answered there)."""
        js = self.server.jetstream
        meta = getattr(js, "meta", None)
        machine = getattr(meta, "machine", None)
        if machine is None:
            return False
        name = self.account.name
        me = self.server.server_name
        return any(
            p.accounts is not None and name in p.accounts and p.name != me
            for p in machine.peers.values()
        )


def system_audit(owner: Any, subject: str, body: bytes, answer: str) -> None:
    """The API audit advisory of an operator request (an account purge, a meta
    leader stepdown, a server removal), in the system account, with an empty
    ``client`` (as nats-server 2.15.1 sends it).

    Args:
        owner: has ``server``, ``client`` (an internal client of the system
            account) and ``domain``.
    """
    adv = Advisories(cast(Any, owner))
    if not adv.interested(API_AUDIT_SUBJECT):
        return
    doc = adv.head(API_AUDIT_TYPE)
    doc["server"] = owner.server.server_name
    doc["client"] = {}
    doc["subject"] = subject
    if body:
        doc["request"] = body.decode(errors="replace")
    doc["response"] = answer
    if owner.domain:
        doc["domain"] = owner.domain
    owner.client.publish(API_AUDIT_SUBJECT, dumps(doc).encode())


class MetaOps:
    """The system account's ``META.LEADER.STEPDOWN`` and ``SERVER.REMOVE`` in a cluster,
    answered by the meta leader.

    Args:
        server: the server (its ``jetstream.meta`` is the meta layer).
        account: the system account.
        nursery: where the stepdown and membership changes run.
    """

    def __init__(self, server: Server, account: Account, nursery: Any) -> None:
        self.server = server
        self.nursery = nursery
        self.client = InternalClient(server, "jetstream-operator", account)
        self.router = account.router  # what ``system_audit``'s ``Advisories`` reads
        domain = server.cfg.jetstream.domain
        self.domain = domain or ""
        prefixes = [b"$JS.API."] + ([b"$JS." + domain.encode() + b".API."] if domain else [])
        for p in prefixes:
            self.client.subscribe(p + b"META.LEADER.STEPDOWN", self._on_stepdown)
            self.client.subscribe(p + b"SERVER.REMOVE", self._on_remove)
            self.client.subscribe(p + b"ACCOUNT.PURGE.*", self._on_purge)
        self._remove_subject = b"$JS.API.SERVER.REMOVE"

    def _meta(self) -> Any:
        js = self.server.jetstream
        meta = getattr(js, "meta", None)
        if meta is None or meta.group is None or not meta.is_leader:
            return None  # another server (the meta leader) answers
        return meta

    def _reply(self, reply: bytes, text: str, subject: str, body: bytes) -> None:
        """Answer an operator request, and audit it in the system account."""
        self.client.publish(reply, text.encode())
        system_audit(self, subject, body, text)

    def _on_purge(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """``ACCOUNT.PURGE.<account>`` on the meta leader: ``{"initiated":true}`` for
        any account name, then every stream of the account is deleted through the
        meta log (``accounts_js.purge_account``), as nats-server 2.15.1's meta leader."""
        meta = self._meta()
        if meta is None or not reply:
            return
        subj = subject.decode(errors="replace")
        self._reply(reply, _doc_ok("account_purge_response", {"initiated": True}), subj, body)
        account = subj.rsplit(".", 1)[-1]
        svc = next((j for j in self.server.js_services if j.account.name == account), None)
        if svc is not None:
            svc.purge_account()

    def _on_stepdown(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        meta = self._meta()
        if meta is None or not reply:
            return
        subj = subject.decode(errors="replace")
        try:
            self._reply(reply, self._stepdown(meta, body), subj, body)
        except ApiAnswer as answer:
            self._reply(reply, answer.text, subj, body)

    def _stepdown(self, meta: Any, body: bytes) -> str:
        req = json_object(body, STEPDOWN_RESPONSE)
        raw = req.get("placement")
        placement: dict[str, Any] = raw if isinstance(raw, dict) else {}
        raw_tags = placement.get("tags")
        tags: list[Any] = raw_tags if isinstance(raw_tags, list) else []
        target = stepdown_target(
            meta.name,
            meta.specs(meta.group.members),
            preferred=placement.get("preferred") or None,
            cluster=placement.get("cluster") or None,
            tags=tuple(str(t) for t in tags),
            rng=meta.rng,
        )
        if isinstance(target, NoPlacement):
            raise error(STEPDOWN_RESPONSE, JSApiError(CLUSTER_NO_PEERS, err=target.description))
        log.info("event=meta_leader_stepdown target=%s", target)
        self.nursery.start_soon(self._transfer, meta, target)
        return dumps({"type": STEPDOWN_RESPONSE, "success": True})

    async def _transfer(self, meta: Any, target: str | None) -> None:
        try:
            await meta.group.step_down(target=target)
        except Exception as exc:  # lost the lead meanwhile, or no follower caught up
            log.warning("event=meta_leader_stepdown_failed error=%r", exc)

    def _on_remove(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        meta = self._meta()
        if meta is None:
            return
        if not reply:  # only a former leader's hand-over (below) comes without one
            if hdr is not None and HANDOVER_HEADER in hdr:
                try:
                    name = self._removal(meta, body)
                except ApiAnswer:
                    return
                if name != meta.name:
                    self.nursery.start_soon(self._remove, meta, name, None)
            return
        subj = subject.decode(errors="replace")
        try:
            name = self._removal(meta, body)
        except ApiAnswer as answer:
            self._reply(reply, answer.text, subj, body)
            return
        if name == meta.name:
            # the meta leader itself: it hands the lead over and has the next leader remove
            # it; the requester gets no reply, as from nats-server
            self.nursery.start_soon(self._remove_self, meta, body)
            return
        self.nursery.start_soon(self._remove, meta, name, reply, (subj, body))

    async def _remove_self(self, meta: Any, body: bytes) -> None:
        try:
            await meta.group.step_down()
        except Exception as exc:
            log.warning("event=meta_server_remove_self_failed error=%r", exc)
            return
        headers = b"NATS/1.0\r\n" + HANDOVER_HEADER + b": 1\r\n\r\n"
        # until the next leader has taken it (it may not know it leads yet), bounded
        for _ in range(HANDOVER_TRIES_MAX):
            self.client.publish(self._remove_subject, body, headers=headers)
            await trio.sleep(HANDOVER_RETRY_S)
            if meta.name not in meta.group.members:
                return
        log.warning("event=meta_server_remove_self_unconfirmed")

    def _removal(self, meta: Any, body: bytes) -> str:
        """The member named by a SERVER.REMOVE body (by ``peer`` name or ``peer_id``)."""
        if not body.strip():
            raise error(REMOVE_RESPONSE, JSApiError(BAD_REQUEST))
        req = json_object(body, REMOVE_RESPONSE)
        name, pid = req.get("peer"), req.get("peer_id")
        if not name and not pid:
            raise error(REMOVE_RESPONSE, JSApiError(BAD_REQUEST))
        for member in meta.group.members:
            if (name and member == name) or (pid and peer_id(member) == pid):
                return str(member)
        raise error(REMOVE_RESPONSE, JSApiError(CLUSTER_SERVER_NOT_MEMBER))

    async def _remove(
        self,
        meta: Any,
        name: str,
        reply: bytes | None,
        request: tuple[str, bytes] = ("$JS.API.SERVER.REMOVE", b""),
    ) -> None:
        try:  # its streams first (replacements placed), then its seat
            refused = await remap_server(meta, name)
        except RaftError as exc:
            log.warning("event=meta_server_remove_not_committed peer=%s error=%r", name, exc)
            return  # not answered, as when the meta leader is lost
        if refused is not None:
            if reply:
                self._reply(reply, refused, *request)
            return
        try:
            await meta.group.remove_member(name)
        except Exception as exc:
            log.warning("event=meta_server_remove_failed peer=%s error=%r", name, exc)
            return  # not answered: the client times out, as when the meta leader is lost
        log.info("event=meta_server_removed peer=%s", name)
        if reply:
            self._reply(reply, dumps({"type": REMOVE_RESPONSE, "success": True}), *request)
