"""JetStream advisories on ``$JS.EVENT.ADVISORY.>``, as nats-server publishes them.

Theory of operation: the service calls ``api_audit`` once for every API
request answered through the API layer (success or error, with or without a
reply subject; not for answers a handler sends itself, such as a successful
MSG.GET or a DIRECT.GET) and ``stream_action`` when a stream is created
(not on an idempotent re-create), updated (even when nothing changed) or
deleted.  Each advisory is encoded only when someone listens on its subject
(the sublist answers that from its cache; remote interest counts too), as
nats-server skips the work without interest.  The JSON is Go's: compact,
``<``/``>``/``&`` escaped, keys in the Go struct's order, empty optional
fields left out:

* ``api_audit``: ``type, id, timestamp, server, client, subject, [request],
  response, [domain]`` — ``subject`` is the ``$JS.API.…`` form even when the
  request came in under a domain prefix; ``request`` is the body without
  headers; ``client`` is the requester's ClientInfo (``null`` when the
  request did not come from a client connection).
* ``stream_action``: ``type, id, timestamp, stream, action, [domain]``.

``id`` is a NUID (22 base-62 characters: a random 12-character prefix and a
10-character sequence with a random increment) drawn from the server's
seeded RNG; ``timestamp`` is RFC3339 UTC with nanoseconds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from node.jetstream.common import dumps
from node.jsapi.render import rfc3339_ns
from node.monitor.connz import account_name, raw_auth_user
from node.monitor.gofmt import go_time

if TYPE_CHECKING:
    from node.jetstream.common import ApiRequest
    from node.jetstream.service import JetStreamService

ADVISORY_PREFIX = "io.nats.jetstream.advisory.v1."
API_AUDIT_TYPE = ADVISORY_PREFIX + "api_audit"
STREAM_ACTION_TYPE = ADVISORY_PREFIX + "stream_action"
API_AUDIT_SUBJECT = b"$JS.EVENT.ADVISORY.API"
STREAM_ACTION_SUBJECTS = {
    "create": "$JS.EVENT.ADVISORY.STREAM.CREATED.",
    "modify": "$JS.EVENT.ADVISORY.STREAM.UPDATED.",
    "delete": "$JS.EVENT.ADVISORY.STREAM.DELETED.",
}

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = 62
_PREFIX_LEN = 12
_SEQ_LEN = 10
_SEQ_MAX = _BASE**_SEQ_LEN
_INC_MIN = 33
_INC_MAX = 333


class Nuid:
    """NATS unique ids (the ``nuid`` scheme nats-server uses for event ids).

    Args:
        rng: seeded randomness for prefixes, starting sequences and increments.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._reset()

    def _reset(self) -> None:
        rng = self._rng
        self._prefix = "".join(_DIGITS[rng.randrange(_BASE)] for _ in range(_PREFIX_LEN))
        self._seq = rng.randrange(_SEQ_MAX)
        self._inc = rng.randrange(_INC_MIN, _INC_MAX)

    def next(self) -> str:
        """The next id: 22 characters, unique for this generator."""
        self._seq += self._inc
        if self._seq >= _SEQ_MAX:
            self._reset()
        n = self._seq
        out = []
        for _ in range(_SEQ_LEN):
            n, d = divmod(n, _BASE)
            out.append(_DIGITS[d])
        return self._prefix + "".join(reversed(out))


def client_info(server: Any, session: Any) -> dict[str, Any]:
    """nats-server's detailed ClientInfo of a client connection (omitempty rules).

    Args:
        server: the server (name, cluster name, auth config).
        session: the client session.

    Returns:
        ``start, host, id, acc, [user], [name], [lang], [ver], [rtt], server,
        [cluster], kind, client_type``.
    """
    ci: dict[str, Any] = {"start": go_time(session.start_wall)}
    if session.ip:
        ci["host"] = session.ip
    if session.cid:
        ci["id"] = session.cid
    ci["acc"] = account_name(session)
    user = raw_auth_user(server, session)
    if user:
        ci["user"] = user
    for key, value in (("name", session.name), ("lang", session.lang), ("ver", session.version)):
        if value:
            ci[key] = value
    rtt_ns = round(float(session.rtt_s) * 1e9)
    if rtt_ns:
        ci["rtt"] = rtt_ns
    ci["server"] = server.server_name
    cluster = server.cfg.cluster
    if cluster is not None and cluster.name:
        ci["cluster"] = cluster.name
    ci["kind"] = "Client"
    ci["client_type"] = "nats"
    return ci


STREAM_LEADER_ELECTED_SUBJECT = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."
STREAM_LEADER_ELECTED_TYPE = "io.nats.jetstream.advisory.v1.stream_leader_elected"


class Advisories:
    """Publishes JetStream advisories for one service.

    Args:
        svc: the JetStream service (server, internal client, domain).
    """

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc
        self.nuid = Nuid(svc.server.rng)

    def interested(self, subject: bytes) -> bool:
        """Whether a local subscriber or a route wants ``subject``."""
        router = self.svc.router
        if router.sublist.has_interest(subject):
            return True
        remote = router.route_sublist
        return bool(remote.count) and remote.has_interest(subject)

    def _publish(self, subject: bytes, body: dict[str, Any]) -> None:
        self.svc.client.publish(subject, dumps(body).encode())

    def head(self, type_: str) -> dict[str, Any]:
        """An advisory's first fields: ``type``, a fresh ``id``, ``timestamp``."""
        return {"type": type_, "id": self.nuid.next(), "timestamp": rfc3339_ns(time.time_ns())}

    _head = head

    def api_audit(self, req: ApiRequest, response: str | bytes) -> None:
        """``$JS.EVENT.ADVISORY.API`` for a request answered through the API layer.

        Args:
            req: the request (its subject, body and requesting client).
            response: the answer as sent.
        """
        if not self.interested(API_AUDIT_SUBJECT):
            return
        client = None if req.client is None else client_info(self.svc.server, req.client)
        self._audit("$JS.API." + ".".join(req.op), req.body, client, response)

    def origin_audit(self, origin: Mapping[str, Any], response: str | bytes) -> None:
        """The same for a request answered by a meta effect: its ``origin``
        (``cluster.meta.origin_doc``) came with the meta entry."""
        if not self.interested(API_AUDIT_SUBJECT):
            return
        request = str(origin.get("request") or "").encode()
        client = origin.get("client")
        self._audit(str(origin.get("subject")), request, client, response)

    def _audit(self, subject: str, request: bytes, client: Any, response: str | bytes) -> None:
        svc = self.svc
        body = self._head(API_AUDIT_TYPE)
        body["server"] = svc.server.server_name
        body["client"] = client
        body["subject"] = subject
        if request:
            body["request"] = request.decode(errors="replace")
        body["response"] = (
            response.decode(errors="replace") if isinstance(response, bytes) else response
        )
        if svc.domain:
            body["domain"] = svc.domain
        self._publish(API_AUDIT_SUBJECT, body)

    def stream_action(self, action: str, name: str, cfg: Any = None) -> None:
        """``$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<name>``.

        Args:
            action: ``"create"``, ``"modify"`` or ``"delete"``.
            name: the stream.
            cfg: the stream's config (unused on the wire; kept for callers).
        """
        subject = (STREAM_ACTION_SUBJECTS[action] + name).encode()
        if not self.interested(subject):
            return
        body = self._head(STREAM_ACTION_TYPE)
        body["stream"] = name
        body["action"] = action
        if self.svc.domain:
            body["domain"] = self.svc.domain
        self._publish(subject, body)

    def stream_leader_elected(self, name: str, leader: str, replicas: list[dict[str, Any]]) -> None:
        """``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<name>`` (replicated
        streams; ``replicas`` include the leader, as nats-server lists them)."""
        subject = (STREAM_LEADER_ELECTED_SUBJECT + name).encode()
        if not self.interested(subject):
            return
        body = self._head(STREAM_LEADER_ELECTED_TYPE)
        body["stream"] = name
        body["leader"] = leader
        body["replicas"] = replicas
        if self.svc.domain:
            body["domain"] = self.svc.domain
        self._publish(subject, body)
