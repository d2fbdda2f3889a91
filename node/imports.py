"""Stream and service exports/imports: the only traffic that crosses accounts.

Theory of operation
-------------------
Accounts share nothing (``node.accounts``) except what one exports and another imports, as
configured (``node.confaccounts``).  Both directions are bridges made of internal clients
whose subscriptions are *local*: never announced to routes and never handed a message that
arrived on a route, so each message crosses at the server where it was published, once, and
then travels in the importing account like any other message (routes included).

* Stream import (B imports ``subject`` from A, seen as ``to``): a local subscription in A on
  ``subject``; each message is published in B on the mapped subject with its reply subject and
  headers unchanged.
* Service import (B imports A's ``subject`` as ``to``): a local subscription in B on ``to``;
  a request is published in A on the mapped subject with a fresh reply subject
  ``_R_.<server>.<token>`` and a ``Nats-Request-Info`` header (``{"acc":"B","rtt":ns}``), as
  nats-server does.  This server's catcher in A (``_R_.<server>.>``, announced, so responders
  anywhere reach it) forwards responses to the requester's reply subject in B: one for a
  ``Singleton`` export, every one until the export's response threshold for ``Stream`` and
  ``Chunked``.  The response table is bounded (``RESPONSES_MAX``): expired entries go first,
  then the oldest.  No responder in A: the requester gets no-responders (503) naming the
  subject it asked, as from nats-server.

Subject mapping keeps wildcards in order: ``to: "local.*"`` for ``subject: "ev.*"`` maps
``ev.x`` to ``local.x``; a literal ``to`` replaces the subject.  A chain of imports that loops
is cut at ``DEPTH_MAX`` crossings of one message.
"""

from __future__ import annotations

import hashlib
import json
import logging
import string
from typing import TYPE_CHECKING, Any

import trio

from node.internal import InternalClient
from node.subjects import subset

if TYPE_CHECKING:
    from node.accounts import Account
    from node.configtypes import ExportSpec, ImportSpec
    from node.server import Server
    from node.session import Subscription

log = logging.getLogger(__name__)

RESPONSES_MAX = 65536
"""Pending service-import replies kept per server."""
DEPTH_MAX = 8
"""Import crossings of one message before it is dropped (a configuration that loops)."""
_TOKEN_CHARS = string.ascii_letters + string.digits
_depth = 0


def transform(subject: bytes, src: bytes, dst: bytes) -> bytes:
    """Map ``subject`` (matching pattern ``src``) onto pattern ``dst``: ``dst``'s wildcards
    take, in order, the tokens ``src``'s wildcards matched; a literal ``dst`` is the result."""
    if src == dst:
        return subject
    toks = subject.split(b".")
    caught: list[bytes] = []
    for i, t in enumerate(src.split(b".")):
        if t == b"*":
            caught.append(toks[i])
        elif t == b">":
            caught.append(b".".join(toks[i:]))
            break
    out = []
    it = iter(caught)
    for t in dst.split(b"."):
        out.append(next(it, t) if t in (b"*", b">") else t)
    return b".".join(out)


def request_info_headers(headers: bytes | None, account: str, rtt_ns: int) -> bytes:
    """``headers`` with nats-server's ``Nats-Request-Info`` for a service import request."""
    info = json.dumps({"acc": account, "rtt": rtt_ns}, separators=(",", ":")).encode()
    line = b"Nats-Request-Info: " + info + b"\r\n"
    if not headers:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    head = headers[:-2] if headers.endswith(b"\r\n\r\n") else headers
    return head + line + b"\r\n"


def export_for(imp: ImportSpec, importer: str, exports: list[ExportSpec]) -> ExportSpec | None:
    """The export of ``imp``'s account that admits it (checked at config time)."""
    for e in exports:
        if (
            e.kind == imp.kind
            and subset(imp.subject.encode(), e.subject.encode())
            and (e.accounts is None or importer in e.accounts)
        ):
            return e
    return None


class _Hop:
    """Counts import crossings of the message being delivered (loops are cut)."""

    def __enter__(self) -> bool:
        global _depth
        _depth += 1
        return _depth <= DEPTH_MAX

    def __exit__(self, *exc: object) -> None:
        global _depth
        _depth -= 1


class StreamImport:
    """B's import of A's stream: A's messages on ``subject`` published in B as ``to``."""

    def __init__(self, server: Server, exporter: Account, importer: Account, imp: ImportSpec):
        self.importer = importer
        self.src = imp.subject.encode()
        self.dst = (imp.to or imp.subject).encode()
        self.client = InternalClient(server, f"import:{importer.name}<{exporter.name}", exporter)
        self.client.subscribe(self.src, self._on_msg, announce=False)

    def _on_msg(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        with _Hop() as ok:
            if not ok:
                log.warning("event=import_loop subject=%r", subject)
                return
            router = self.importer.router
            router.publish(None, transform(subject, self.src, self.dst), reply, hdr, body)
            router.flush()


class ServiceImports:
    """Every service import of one server, and the responses on their way back.

    Args:
        server: the server (accounts, rng).
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        digest = hashlib.sha256(server.server_id.encode()).digest()
        self.node_token = "".join(_TOKEN_CHARS[b % len(_TOKEN_CHARS)] for b in digest[:6])
        #: reply subject in the exporting account -> (importer router, requester's reply,
        #: forward one response only, expiry on the trio clock)
        self.pending: dict[bytes, tuple[Any, bytes, bool, float]] = {}
        self._catchers: dict[str, InternalClient] = {}
        self._clients: list[InternalClient] = []
        #: the stream imports' bridges (closed with the rest)
        self.streams: list[StreamImport] = []

    def close(self) -> None:
        """Remove every bridge (a reload installs the new configuration's)."""
        for client in [*self._clients, *self._catchers.values()]:
            client.close()
        for si in self.streams:
            si.client.close()
        self._clients.clear()
        self._catchers.clear()
        self.streams.clear()

    def add(self, exporter: Account, importer: Account, imp: ImportSpec, exp: ExportSpec) -> None:
        """Serve ``importer``'s import ``imp`` of ``exporter``'s service export ``exp``."""
        local = (imp.to or imp.subject).encode()
        target = imp.subject.encode()
        once = exp.response == "Singleton"
        threshold = exp.response_threshold_s
        client = InternalClient(
            self.server, f"service-import:{importer.name}<{exporter.name}", importer
        )
        self._clients.append(client)
        self._catcher(exporter)

        def on_request(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            with _Hop() as ok:
                if not ok:
                    log.warning("event=import_loop subject=%r", subject)
                    return
                mapped = transform(subject, local, target)
                src = client.sender
                rtt_ns = int(getattr(src, "rtt_s", 0.0) * 1e9)
                headers = request_info_headers(hdr, importer.name, rtt_ns)
                new_reply = None
                if reply:
                    new_reply = self._reply_subject()
                    expires = trio.current_time() + threshold
                    self._remember(new_reply, (importer.router, reply, once, expires))
                router = exporter.router
                n = router.publish(None, mapped, new_reply, headers, body)
                router.flush()
                if n == 0 and reply and new_reply is not None:
                    # nobody serves it in the exporting account: the requester hears
                    # no-responders for the subject it asked, as nats-server answers
                    self.pending.pop(new_reply, None)
                    if src is not None and getattr(src, "no_responders", False):
                        importer.router.no_responders(src, subject, reply)

        client.subscribe(local, on_request, announce=False)

    def _catcher(self, exporter: Account) -> None:
        if exporter.name in self._catchers:
            return
        client = InternalClient(self.server, f"service-responses:{exporter.name}", exporter)
        self._catchers[exporter.name] = client
        subject = b"_R_." + self.node_token.encode() + b".>"
        client.subscribe(subject, self._on_response)

    def _reply_subject(self) -> bytes:
        rng = self.server.rng
        while True:
            token = "".join(rng.choice(_TOKEN_CHARS) for _ in range(6))
            reply = f"_R_.{self.node_token}.{token}".encode()
            if reply not in self.pending:
                return reply

    def _remember(self, reply: bytes, entry: tuple[Any, bytes, bool, float]) -> None:
        pending = self.pending
        if len(pending) >= RESPONSES_MAX:
            now = trio.current_time()
            for key in [k for k, v in pending.items() if v[3] < now]:
                del pending[key]
            while len(pending) >= RESPONSES_MAX:
                del pending[next(iter(pending))]
        pending[reply] = entry

    def _on_response(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        entry = self.pending.get(subject)
        if entry is None:
            return
        router, to, once, expires = entry
        if once or trio.current_time() > expires:
            del self.pending[subject]
            if not once:
                return  # a stream's responses past its threshold are dropped
        with _Hop() as ok:
            if not ok:
                return
            router.publish(None, to, reply, hdr, body)
            router.flush()


def install_imports(server: Server) -> ServiceImports | None:
    """Bridge every configured import (None when there are none)."""
    cfg = server.cfg
    specs = [(spec, imp) for spec in cfg.accounts.values() for imp in spec.imports]
    if not specs:
        return None
    services = ServiceImports(server)
    accounts = server.accounts
    for spec, imp in specs:
        exporter = accounts.get(imp.account)
        importer = accounts.get(spec.name)
        exp_spec = cfg.accounts.get(imp.account)
        if exporter is None or importer is None or exp_spec is None:
            continue  # refused at config time
        exp = export_for(imp, spec.name, exp_spec.exports)
        if exp is None:
            continue  # refused at config time
        if imp.kind == "stream":
            services.streams.append(StreamImport(server, exporter, importer, imp))
        else:
            services.add(exporter, importer, imp, exp)
    return services
