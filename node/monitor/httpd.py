"""The HTTP shell: h11 over trio, routing paths to the pure endpoint functions.

Theory of operation: :class:`MonitorApp` turns ``(method, target)`` into a
:class:`Response` without any I/O — it parses the query, counts the request
in ``server.http_req_stats`` (as nats-server does, under the endpoint's path),
calls the data function and encodes the answer the way Go's ``net/http``
would (JSON with ``Access-Control-Allow-Origin: *``; plain-text 400s with
nats-server's messages; ``404 page not found``).  :func:`serve_monitor`
binds the listener and runs one task per HTTP connection, each an h11
``Connection`` loop with keep-alive.  Bounds: request head bytes
(``REQUEST_HEAD_BYTES_MAX``), request body bytes (``REQUEST_BODY_BYTES_MAX``,
bodies are read and ignored), time to receive a request
(``REQUEST_S_MAX``), of which the request head (and the wait for it on a
kept-alive connection) at most ``REQUEST_HEAD_S_MAX``, simultaneous
connections (``CONNECTIONS_MAX``).  At the cap a new connection evicts the
one that has waited longest for (or on) a request; only when every
connection is busy answering is the new one closed at once — so a crowd of
half-sent requests cannot lock operators out of ``/varz /healthz /jsz``.
Any method is answered like GET (so does nats-server); HEAD gets the
headers only.
"""

from __future__ import annotations

import http
import logging
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

from node.monitor import endpoints
from node.monitor.accstatz import accstatz
from node.monitor.connz import connz_from_options, parse_connz_options
from node.monitor.gofmt import dumps
from node.monitor.query import MonitorError, Query
from node.version import NATS_VERSION

log = logging.getLogger(__name__)

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(t: float | None = None) -> str:
    """An HTTP ``Date`` (RFC 7231 IMF-fixdate), as ``email.utils.formatdate(t,
    usegmt=True)`` writes it, without importing ``email`` (~0.6 MB resident)."""
    g = time.gmtime(t)
    return (
        f"{_DAYS[g.tm_wday]}, {g.tm_mday:02d} {_MONTHS[g.tm_mon - 1]} {g.tm_year} "
        f"{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d} GMT"
    )


REQUEST_HEAD_BYTES_MAX = 16 * 1024
REQUEST_BODY_BYTES_MAX = 64 * 1024
REQUEST_S_MAX = 30.0
REQUEST_HEAD_S_MAX = 5.0
CONNECTIONS_MAX = 128
RECV_BYTES_MAX = 16 * 1024

ROOT_PATH = "/"
VARZ_PATH = "/varz"
CONNZ_PATH = "/connz"
ROUTEZ_PATH = "/routez"
GATEWAYZ_PATH = "/gatewayz"
LEAFZ_PATH = "/leafz"
SUBSZ_PATH = "/subsz"
ACCOUNTZ_PATH = "/accountz"
ACCSTATZ_PATH = "/accstatz"
JSZ_PATH = "/jsz"
HEALTHZ_PATH = "/healthz"
RAFTZ_PATH = "/raftz"
METRICS_PATH = "/metrics"  # Prometheus text (node/monitor/metrics.py); not in nats-server

INDEX_LINKS = (
    ("General", VARZ_PATH),
    ("JetStream", JSZ_PATH),
    ("Connections", CONNZ_PATH),
    ("Accounts", ACCOUNTZ_PATH),
    ("Account Stats", ACCSTATZ_PATH),
    ("Subscriptions", SUBSZ_PATH),
    ("Routes", ROUTEZ_PATH),
    ("LeafNodes", LEAFZ_PATH),
    ("Gateways", GATEWAYZ_PATH),
    ("Health Probe", HEALTHZ_PATH),
)


@dataclass
class Response:
    """One HTTP answer: status, headers (name, value) and body bytes."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None


def json_response(doc: Any, status: int = 200, *, indent: bool = True) -> Response:
    return Response(
        status,
        dumps(doc, indent=indent),
        [("Access-Control-Allow-Origin", "*"), ("Content-Type", "application/json")],
    )


def text_response(status: int, text: str) -> Response:
    return Response(status, text.encode(), [("Content-Type", "text/plain; charset=utf-8")])


def not_found() -> Response:
    r = text_response(404, "404 page not found\n")
    r.headers.append(("X-Content-Type-Options", "nosniff"))
    return r


def index_html(base: str) -> str:
    """The ``/`` page: links to every endpoint, like nats-server's."""
    links = "\n".join(
        f'    <a href=".{path}">{label}<span class="endpoint"> {path}</span></a>'
        for label, path in INDEX_LINKS
    )
    return f"""<html lang="en">
  <head>
    <title>trijet monitoring</title>
    <style type="text/css">
      body {{ font-family: sans-serif; margin-left: 32px }}
      a {{ display: block; padding-bottom: 6px }}
      .endpoint {{ font-size: 12px; color: #999; font-family: monospace }}
    </style>
  </head>
  <body>
    <h3>trijet (nats-server v{NATS_VERSION} compatible)</h3>
{links}
    <a href=https://docs.nats.io/running-a-nats-service/nats_admin/monitoring class="help">Help</a>
  </body>
</html>
"""


def _normalize_base(base: str) -> str:
    base = base.strip()
    if not base or base == "/":
        return ""
    return "/" + base.strip("/")


class MonitorApp:
    """Routing and encoding for one server's monitor (no I/O).

    Args:
        server: the monitored server.
        sampler: process sampler for ``/varz`` (``mem``, ``cpu``, ``cores``).
    """

    def __init__(self, server: Any, sampler: endpoints.ProcSampler | None = None) -> None:
        self.server = server
        self.sampler = sampler or endpoints.ProcSampler()
        self.base = _normalize_base(getattr(server.cfg, "http_base_path", "") or "")
        self._routes: dict[str, Callable[[Query], Response]] = {
            VARZ_PATH: self._varz,
            CONNZ_PATH: self._connz,
            ROUTEZ_PATH: self._simple(ROUTEZ_PATH, endpoints.routez),
            GATEWAYZ_PATH: self._simple(GATEWAYZ_PATH, endpoints.gatewayz),
            LEAFZ_PATH: self._simple(LEAFZ_PATH, endpoints.leafz),
            SUBSZ_PATH: self._simple(SUBSZ_PATH, endpoints.subsz),
            "/subscriptionsz": self._simple(SUBSZ_PATH, endpoints.subsz),
            ACCOUNTZ_PATH: self._simple(ACCOUNTZ_PATH, endpoints.accountz),
            ACCSTATZ_PATH: self._simple(ACCSTATZ_PATH, accstatz),
            JSZ_PATH: self._simple(JSZ_PATH, endpoints.jsz),
            HEALTHZ_PATH: self._healthz,
            RAFTZ_PATH: self._simple(RAFTZ_PATH, endpoints.raftz),
            METRICS_PATH: self._metrics,
        }
        self._metrics_registry: Any = None  # built on first scrape

    def handle(self, method: str, target: str) -> Response:
        """Answer one request (``target`` is the raw request target)."""
        del method  # every method is served like GET; the shell drops HEAD bodies
        parts = urllib.parse.urlsplit(target)
        path = urllib.parse.unquote(parts.path) or "/"
        if self.base:
            if path == self.base or path == self.base + "/":
                return self._root()
            if not path.startswith(self.base + "/"):
                return not_found()
            path = path[len(self.base) :]
        elif path == ROOT_PATH:
            return self._root()
        route = self._routes.get(path)
        if route is None:
            return not_found()
        try:
            return route(Query.parse(parts.query))
        except MonitorError as exc:
            return text_response(exc.status, exc.text)

    def _count(self, path: str) -> None:
        self.server.http_req_stats[path] = self.server.http_req_stats.get(path, 0) + 1

    def _root(self) -> Response:
        self._count(ROOT_PATH)
        return Response(
            200, index_html(self.base).encode(), [("Content-Type", "text/html; charset=utf-8")]
        )

    def _simple(self, path: str, fn: Callable[..., dict[str, Any]]) -> Callable[[Query], Response]:
        def route(q: Query) -> Response:
            self._count(path)
            return json_response(fn(self.server, q))

        return route

    def _varz(self, q: Query) -> Response:
        self._count(VARZ_PATH)
        return json_response(endpoints.varz(self.server, q, proc=self.sampler.sample()))

    def _connz(self, q: Query) -> Response:
        opts = parse_connz_options(q)
        self._count(CONNZ_PATH)
        return json_response(connz_from_options(self.server, opts))

    def _metrics(self, q: Query) -> Response:
        del q
        self._count(METRICS_PATH)
        # imported at the first scrape: prometheus_client is ~3 MB resident,
        # which a server nobody scrapes need not hold
        from node.monitor import metrics

        if self._metrics_registry is None:
            self._metrics_registry = metrics.make_registry(self.server, self.sampler)
        body = metrics.render(self._metrics_registry)
        return Response(200, body, [("Content-Type", metrics.CONTENT_TYPE)])

    def _healthz(self, q: Query) -> Response:
        self._count(HEALTHZ_PATH)
        status, body = endpoints.healthz(self.server, q)
        return json_response(body, status, indent=False)


# -- the trio/h11 shell -----------------------------------------------------------------------


def _hostport(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


async def _send(conn: h11.Connection, stream: trio.abc.Stream, event: Any) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _next_event(conn: h11.Connection, stream: trio.abc.Stream) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(RECV_BYTES_MAX)
        conn.receive_data(data)


async def _respond(
    conn: h11.Connection, stream: trio.abc.Stream, resp: Response, *, head: bool
) -> None:
    headers = [
        *resp.headers,
        ("Date", http_date()),
        ("Content-Length", str(len(resp.body))),
    ]
    try:
        reason = http.HTTPStatus(resp.status).phrase.encode()
    except ValueError:
        reason = b""
    await _send(conn, stream, h11.Response(status_code=resp.status, headers=headers, reason=reason))
    if not head and resp.body:
        await _send(conn, stream, h11.Data(data=resp.body))
    await _send(conn, stream, h11.EndOfMessage())


async def _read_request(
    conn: h11.Connection, stream: trio.abc.Stream, slot: _Slot | None = None
) -> h11.Request | None:
    """The next request with its body drained, or None when the peer is done.

    Raises:
        trio.TooSlowError: the head took over ``REQUEST_HEAD_S_MAX``.
    """
    with trio.fail_after(REQUEST_HEAD_S_MAX):
        event = await _next_event(conn, stream)
    if slot is not None:
        slot.idle_since = None  # a request has arrived: not evictable now
    if isinstance(event, h11.ConnectionClosed):
        return None
    if not isinstance(event, h11.Request):
        raise h11.RemoteProtocolError("expected a request", error_status_hint=400)
    body = 0
    while True:
        ev = await _next_event(conn, stream)
        if isinstance(ev, h11.EndOfMessage):
            return event
        if isinstance(ev, h11.Data):
            body += len(ev.data)
            if body > REQUEST_BODY_BYTES_MAX:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        elif isinstance(ev, h11.ConnectionClosed):
            return None


class _Slot:
    """One monitor connection in the table: its cancel scope, and since when
    it waits for (or on) a request (None while a request is being answered)."""

    __slots__ = ("idle_since", "scope")

    def __init__(self, now: float) -> None:
        self.scope = trio.CancelScope()
        self.idle_since: float | None = now


class ConnectionTable:
    """At most ``limit`` monitor connections; oldest-idle eviction.

    Pure bookkeeping on the event loop (no awaits): ``admit`` returns a slot
    for a new connection, evicting (cancelling) the one idle longest when
    full, or None when every connection is busy answering.
    """

    def __init__(self, limit: int = CONNECTIONS_MAX) -> None:
        self.limit = limit
        self.slots: set[_Slot] = set()
        self.evicted = 0

    def admit(self, now: float) -> _Slot | None:
        if len(self.slots) >= self.limit:
            idle = [s for s in self.slots if s.idle_since is not None]
            if not idle:
                return None
            victim = min(idle, key=lambda s: s.idle_since or 0.0)
            self.slots.discard(victim)
            victim.scope.cancel()
            self.evicted += 1
        slot = _Slot(now)
        self.slots.add(slot)
        return slot

    def release(self, slot: _Slot) -> None:
        self.slots.discard(slot)


async def serve_connection(
    app: MonitorApp, stream: trio.abc.Stream, slot: _Slot | None = None
) -> None:
    """Serve HTTP/1.1 requests on one connection until it closes or misbehaves.

    Cancellation: the connection is closed; a response may be cut short.
    """
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=REQUEST_HEAD_BYTES_MAX)
    try:
        while True:
            if slot is not None:
                slot.idle_since = trio.current_time()
            try:
                with trio.fail_after(REQUEST_S_MAX):
                    req = await _read_request(conn, stream, slot)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    status = exc.error_status_hint or 400
                    await _respond(
                        conn, stream, text_response(status, f"{status} Bad Request\n"), head=False
                    )
                return
            except trio.TooSlowError:
                return
            if req is None:
                return
            method = req.method.decode("ascii", "replace").upper()
            target = req.target.decode("utf-8", "replace")
            try:
                resp = app.handle(method, target)
            except Exception:  # last resort: one request's failure ends no more than it
                log.exception("event=monitor_request_failed target=%r", target)
                app.server.stats.internal_errors += 1
                resp = text_response(500, "500 Internal Server Error\n")
            await _respond(conn, stream, resp, head=method == "HEAD")
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        return
    finally:
        await trio.aclose_forcefully(stream)


async def serve_monitor(server: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Bind the monitor (``cfg.monitor_host``, ``cfg.http_port``; -1 = random) and serve forever.

    Sets ``server.http_host``/``server.http_port`` to what was bound, logs
    nats-server's "Starting http monitor on host:port", then reports started.

    Cancellation: stops accepting and closes every monitor connection.
    """
    cfg = server.cfg
    host = cfg.monitor_host
    port = 0 if cfg.http_port in (-1, 0) else cfg.http_port
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    server.http_port = int(listeners[0].socket.getsockname()[1])
    server.http_host = host
    log.info("Starting http monitor on %s", _hostport(host, server.http_port))
    app = MonitorApp(server)
    table = ConnectionTable(CONNECTIONS_MAX)

    async def handler(stream: trio.SocketStream) -> None:
        slot = table.admit(trio.current_time())
        if slot is None:
            await trio.aclose_forcefully(stream)
            return
        try:
            with slot.scope:
                await serve_connection(app, stream, slot)
        finally:
            table.release(slot)
            await trio.aclose_forcefully(stream)

    task_status.started()
    await trio.serve_listeners(handler, listeners)
