"""Monitoring HTTP endpoints (``/varz /connz /subsz /jsz /healthz …``), as nats-server serves them.

Theory of operation: every endpoint is a pure data function
``f(server, query) -> dict`` (:mod:`node.monitor.endpoints`,
:mod:`node.monitor.connz`) that reads the server's state and returns the
document in nats-server's shape and key order, with Go's spellings of times
and durations (:mod:`node.monitor.gofmt`).  Bad parameters raise
:class:`MonitorError` with nats-server's 400 text (:mod:`node.monitor.query`).
:mod:`node.monitor.httpd` is the thin shell: h11 over trio, routing,
request counting, encoding.  ``Server.run`` starts :func:`serve_monitor`
when ``http_port`` is configured.
"""

from __future__ import annotations

from node.monitor.connz import connz
from node.monitor.endpoints import (
    ProcSampler,
    ProcStats,
    accountz,
    gatewayz,
    healthz,
    jsz,
    leafz,
    routez,
    sublist_stats,
    subsz,
    varz,
)
from node.monitor.httpd import MonitorApp, Response, serve_connection, serve_monitor
from node.monitor.query import ConnState, MonitorError, Query

__all__ = [
    "ConnState",
    "MonitorApp",
    "MonitorError",
    "ProcSampler",
    "ProcStats",
    "Query",
    "Response",
    "accountz",
    "connz",
    "gatewayz",
    "healthz",
    "jsz",
    "leafz",
    "routez",
    "serve_connection",
    "serve_monitor",
    "sublist_stats",
    "subsz",
    "varz",
]
