"""``$SYS.REQ.*``: the server's requests, as nats-server serves them.

Theory of operation: an internal client per account answers, with the documents the HTTP
monitor builds (``node.monitor``), wrapped as nats-server wraps them:
``{"server": {name, host, id, …, seq, time}, "data": …}`` (``"statsz"`` for the stats ping).

* System account: ``$SYS.REQ.SERVER.PING`` (stats), ``$SYS.REQ.SERVER.PING.<KIND>`` and
  ``$SYS.REQ.SERVER.<server id>.<KIND>`` for VARZ, CONNZ, SUBSZ, ROUTEZ, GATEWAYZ, LEAFZ,
  ACCOUNTZ, JSZ, HEALTHZ, RAFTZ, STATSZ, IDZ, through one subscription on
  ``$SYS.REQ.SERVER.>``.  It is announced to routes: a ping is answered by every server of the
  cluster (the requester collects the answers), a request naming a server id by that server.  A JSON body gives the endpoint's options by their query
  names (``{"acc": "A", "subs": true}``).
* System account: ``$SYS.REQ.ACCOUNT.<account>.<KIND>`` for CONNZ, SUBSZ, INFO (the
  ``/accountz`` detail), LEAFZ and JSZ (nats-server's errors for an unknown account or one
  without JetStream).
* Every account: ``$SYS.REQ.USER.INFO`` (who the requester is; answered by the server it is
  connected to, so local), ``$SYS.REQ.ACCOUNT.PING.CONNZ`` and ``$SYS.REQ.SERVER.PING.CONNZ``
  (that account's connections on every server) and ``$SYS.REQ.ACCOUNT.PING.STATZ`` (that
  account's ``AccountStat`` from every server where it has connections; from the system
  account every account's, ``accounts``/``include_unused`` as the body's options).
* System account: ``$SYS.REQ.ACCOUNT.<account>.STATZ`` (``node.monitor.accstatz``; no answer
  when the account has no connections here and ``include_unused`` was not asked for).
``$SYS.REQ.SERVER.<server id>.RELOAD`` reloads the configuration (``node.reload``) and answers
``{"server": …}``, or with ``"error": {"code": 500, "description": <why>}`` when refused.
From other accounts ``$SYS.REQ.SERVER.*`` (but ``PING.CONNZ``) finds no responder, as on
nats-server.

Events: ``ClientEvents`` publishes ``$SYS.ACCOUNT.<account>.CONNECT`` and ``.DISCONNECT``
(nats-server's client_connect / client_disconnect advisories) in the system account, and
builds them only when the system account (or a route) has interest.  Before each of them,
for every account but ``$G``, the account's connection count (``account_connections``) on
``$SYS.SERVER.ACCOUNT.<account>.CONNS`` and ``$SYS.ACCOUNT.<account>.SERVER.CONNS`` (one
event, one id, both subjects), repeated every ``ACC_CONNS_HB_S`` while the account has
connections here.  ``ClientEvents.run`` also sends the server's stats
(``$SYS.SERVER.<id>.STATSZ``, the ``STATSZ`` ping's document) on nats-server's schedule:
first after 250 ms, the interval doubling up to ``STATSZ_INTERVAL_S``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from node.internal import InternalClient
from node.monitor import endpoints
from node.monitor.accstatz import account_stat, account_statz
from node.monitor.connz import connz_from_options, parse_connz_options
from node.monitor.gofmt import go_time
from node.monitor.query import MonitorError, Query
from node.version import NATS_VERSION

if TYPE_CHECKING:
    from node.accounts import Account
    from node.server import Server
    from node.session import Subscription

log = logging.getLogger(__name__)

#: nats-server 2.15.1's feature flags, as its ServerInfo reports them
FEATURE_FLAGS = {
    "js_ack_fc_v2": False,
    "js_api_reply_v2": False,
    "js_raft_delete_range": True,
    "js_snapshot_sources": False,
}
FLAG_JETSTREAM = 1
FLAGS_ALWAYS = 2 | 4  # binary stream snapshots, account NRG
KINDS = ("VARZ", "CONNZ", "SUBSZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ", "JSZ")
KINDS_ALL = (*KINDS, "HEALTHZ", "RAFTZ", "STATSZ", "IDZ")
#: subscriptions the services hold in every account, and the system account's own
SUBS_PER_ACCOUNT = 4
#: the system account's own two, less the ``$SYS.REQ.SERVER.PING.CONNZ`` of the per-account
#: four (its ``$SYS.REQ.SERVER.>`` answers that one)
SUBS_SYSTEM = 1
ACCOUNT_KINDS = ("CONNZ", "SUBSZ", "INFO", "LEAFZ", "JSZ", "STATZ")


def options_query(body: bytes) -> Query:
    """A request body's options as monitor query parameters (``{}`` or empty: none)."""
    text = body.strip()
    if not text:
        return Query()
    try:
        doc = json.loads(text)
    except ValueError:
        return Query()
    if not isinstance(doc, dict):
        return Query()
    params = {}
    for k, v in doc.items():
        if isinstance(v, bool):
            params[str(k)] = "true" if v else "false"
        elif isinstance(v, int | float | str):
            params[str(k)] = str(v)
    if "subscriptions" in params and "subs" not in params:
        params["subs"] = params.pop("subscriptions")
    if "account" in params and "acc" not in params:
        params["acc"] = params.pop("account")
    return Query(params)


class SystemRequests:
    """The ``$SYS.REQ`` services of one server.

    Args:
        server: the server.
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.seq = 0
        self.sampler = endpoints.ProcSampler()
        sys_acc = server.accounts.system
        self.sys = InternalClient(server, "system-requests", sys_acc)
        self._own = f"$SYS.REQ.SERVER.{server.server_id}.".encode()
        self.sys.subscribe(b"$SYS.REQ.SERVER.>", self._on_server)
        self.sys.subscribe(b"$SYS.REQ.ACCOUNT.*.*", self._on_account)
        self._reload_handler: Any = None
        for acc in server.accounts:
            self.add_account(acc)

    def add_account(self, acc: Account) -> None:
        """Serve the requests every account has (at start, and for an account a reload adds)."""
        server = self.server
        sys_acc = server.accounts.system
        client = self.sys if acc is sys_acc else InternalClient(server, "user-info", acc)
        client.subscribe(b"$SYS.REQ.USER.INFO", self._user_info_for(client, acc), announce=False)
        connz = self._account_connz_for(client, acc)
        client.subscribe(b"$SYS.REQ.ACCOUNT.PING.CONNZ", connz)
        if acc is not sys_acc:  # nats-server imports it into every account
            client.subscribe(b"$SYS.REQ.SERVER.PING.CONNZ", connz)
        only = None if acc is sys_acc else acc.name
        client.subscribe(b"$SYS.REQ.ACCOUNT.PING.STATZ", self._account_statz_for(client, only))

    def on_reload(self, handler: Any) -> None:
        """``$SYS.REQ.SERVER.<this id>.RELOAD`` calls ``handler(done)``, which reloads (soon,
        in a task of its own) and then calls ``done`` with None or the error text."""
        self._reload_handler = handler

    # -- the envelope -------------------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        """nats-server's ServerInfo for an answer (its ``seq`` counts answers)."""
        s = self.server
        cfg = s.cfg
        self.seq += 1
        info: dict[str, Any] = {"name": s.server_name, "host": s.client_host, "id": s.server_id}
        if cfg.cluster is not None and cfg.cluster.name:
            info["cluster"] = cfg.cluster.name
        if cfg.jetstream.enabled and cfg.jetstream.domain:
            info["domain"] = cfg.jetstream.domain
        info["ver"] = NATS_VERSION
        if cfg.server_tags:
            info["tags"] = list(cfg.server_tags)
        info["feature_flags"] = dict(FEATURE_FLAGS)
        info["jetstream"] = bool(s.jetstream_enabled)
        info["flags"] = FLAGS_ALWAYS | (FLAG_JETSTREAM if s.jetstream_enabled else 0)
        info["seq"] = self.seq
        info["time"] = go_time(time.time())
        return info

    def _answer(self, client: InternalClient, reply: bytes | None, doc: dict[str, Any]) -> None:
        if reply:
            body = json.dumps(doc, separators=(",", ":")).encode()
            client.publish(reply, body)

    # -- system account -------------------------------------------------------------------------

    def _on_server(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """``$SYS.REQ.SERVER.PING[.<KIND>]`` and ``$SYS.REQ.SERVER.<this id>.<KIND>``."""
        if not reply:
            return
        if subject == b"$SYS.REQ.SERVER.PING":
            kind = "STATSZ"
        elif subject.startswith(b"$SYS.REQ.SERVER.PING."):
            kind = subject[len(b"$SYS.REQ.SERVER.PING.") :].decode(errors="replace")
            if kind not in KINDS_ALL:
                return
        elif subject.startswith(self._own):
            kind = subject[len(self._own) :].decode(errors="replace")
            if kind == "RELOAD" and self._reload_handler is not None:
                self._reload(reply, body)
                return
            if kind not in KINDS_ALL:
                return
        else:
            return  # another server's, or nothing served
        try:
            data = self.document(kind, options_query(body))
        except MonitorError as exc:
            err = {"code": exc.status, "description": exc.text}
            self._answer(self.sys, reply, {"server": self.server_info(), "error": err})
            return
        key = "statsz" if kind == "STATSZ" else "data"
        self._answer(self.sys, reply, {"server": self.server_info(), key: data})

    def _reload(self, reply: bytes, body: bytes) -> None:
        """nats-server's ``reloadConfig``: reload, answer ``{server}`` or ``{server, error}``
        (400 for a body that is not JSON options, 500 for a reload that failed)."""
        doc: dict[str, Any] = {}
        text = body.strip()
        if text:
            try:
                opts = json.loads(text)
                if not isinstance(opts, dict):
                    raise ValueError("json: cannot unmarshal into EventFilterOptions")
            except ValueError as exc:
                doc["error"] = {"code": 400, "description": str(exc)}
        if doc:
            self._answer(self.sys, reply, {"server": self.server_info(), **doc})
            return

        def done(err: str | None) -> None:
            out: dict[str, Any] = {"server": self.server_info()}
            if err is not None:
                out["error"] = {"code": 500, "description": err}
            self._answer(self.sys, reply, out)

        self._reload_handler(done)

    def _on_account(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """``$SYS.REQ.ACCOUNT.<account>.<KIND>`` (CONNZ SUBSZ INFO LEAFZ JSZ) from the system
        account: that account's view on this server."""
        parts = subject.decode(errors="replace").split(".")
        if not reply or len(parts) != 5 or parts[3] == "PING" or parts[4] not in ACCOUNT_KINDS:
            return
        name, kind = parts[3], parts[4]
        if kind == "STATZ":
            self._statz(self.sys, reply, body, name)
            return
        acc = self.server.accounts.get(name)
        data: dict[str, Any] | None = None
        err: str | None = None
        s = self.server
        if kind == "CONNZ":
            data = connz_from_options(s, parse_connz_options(Query({"acc": name})))
        elif kind == "SUBSZ":
            data = endpoints.subsz(s, Query({"acc": name, "subs": "true"}))
        elif kind == "LEAFZ":
            data = endpoints.leafz(s, Query({"acc": name}))
        elif kind == "INFO":
            if acc is None:
                err = f"Account {name} does not exist"
            else:
                data = endpoints.accountz(s, Query({"acc": name}))["account_detail"]
        else:  # JSZ
            if not s.jetstream_enabled:
                err = "jetstream not enabled"
            elif acc is None or not acc.jetstream:
                err = f'account "{name}" not jetstream enabled'
            else:
                details = endpoints.jsz(s, Query({"acc": name, "accounts": "true"}))
                found = details.get("account_details") or []
                data = dict(found[0]) if found else {"name": name, "id": name}
        doc: dict[str, Any] = {"server": self.server_info(), "data": data}
        if err is not None:
            doc["error"] = {"code": 500, "description": err}
        self._answer(self.sys, reply, doc)

    def document(self, kind: str, q: Query) -> dict[str, Any]:
        """The monitor document a ``$SYS.REQ.SERVER`` request of ``kind`` asks for."""
        s = self.server
        if kind == "VARZ":
            return endpoints.varz(s, q, proc=self.sampler.sample())
        if kind == "CONNZ":
            return connz_from_options(s, parse_connz_options(q))
        if kind == "HEALTHZ":
            return endpoints.healthz(s, q)[1]
        if kind == "STATSZ":
            return self.statsz()
        if kind == "IDZ":
            return {"name": s.server_name, "host": s.client_host, "id": s.server_id}
        fn = {
            "SUBSZ": endpoints.subsz,
            "ROUTEZ": endpoints.routez,
            "GATEWAYZ": endpoints.gatewayz,
            "LEAFZ": endpoints.leafz,
            "ACCOUNTZ": endpoints.accountz,
            "JSZ": endpoints.jsz,
            "RAFTZ": endpoints.raftz,
        }[kind]
        doc: dict[str, Any] = fn(s, q)
        return doc

    def statsz(self) -> dict[str, Any]:
        """nats-server's ServerStatsMsg ``statsz`` from the same counters as ``/varz``."""
        v = endpoints.varz(self.server, Query(), proc=self.sampler.sample())
        out: dict[str, Any] = {
            "start": v["start"],
            "mem": v["mem"],
            "cores": v["cores"],
            "cpu": v["cpu"],
            "connections": v["connections"],
            "total_connections": v["total_connections"],
            "active_accounts": sum(
                1 for a in self.server.accounts if any(True for _ in a.sublist.all())
            ),
            "subscriptions": v["subscriptions"],
            "sent": {"msgs": v["out_msgs"], "bytes": v["out_bytes"]},
            "sent_to_clients": {"msgs": v["out_client_msgs"], "bytes": v["out_client_bytes"]},
            "received": {"msgs": v["in_msgs"], "bytes": v["in_bytes"]},
            "received_from_clients": {"msgs": v["in_client_msgs"], "bytes": v["in_client_bytes"]},
            "slow_consumers": v["slow_consumers"],
            "active_servers": 1 + len(getattr(self.server.routes, "by_id", {})),
        }
        if v.get("jetstream"):
            out["jetstream"] = v["jetstream"]
        out["gomaxprocs"] = v["gomaxprocs"]
        return out

    # -- every account ----------------------------------------------------------------------------

    def _user_info_for(self, client: InternalClient, acc: Account) -> Any:
        def on_request(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            src = client.sender
            if not reply or src is None:
                return
            user = getattr(src, "user", None)
            name = ""
            if user is not None:
                name = user.name or user.nkey or ""
            data = {"user": name, "account": acc.name, "account_name": acc.name}
            self._answer(client, reply, {"server": self.server_info(), "data": data})

        return on_request

    def _statz(self, client: InternalClient, reply: bytes, body: bytes, only: str | None) -> None:
        """nats-server's account STATZ: the accounts of the body's ``accounts`` (or ``only``,
        the subject's), those without connections here only with ``include_unused``; no
        answer when none is left and unused ones were not asked for."""
        names: list[str] = []
        unused = False
        try:
            opts = json.loads(body) if body.strip() else {}
        except ValueError:
            opts = {}
        if isinstance(opts, dict):
            listed = opts.get("accounts")
            if isinstance(listed, list):
                names = [str(n) for n in listed]
            unused = opts.get("include_unused") is True
        if only is not None:
            names = [only]
        data = account_statz(self.server, names, unused=unused)
        if not data["account_statz"] and not unused:
            return
        self._answer(client, reply, {"server": self.server_info(), "data": data})

    def _account_statz_for(self, client: InternalClient, only: str | None) -> Any:
        def on_request(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            if reply:
                self._statz(client, reply, body, only)

        return on_request

    def _account_connz_for(self, client: InternalClient, acc: Account) -> Any:
        def on_request(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            if not reply:
                return
            q = options_query(body)
            params = {k: q.get(k) for k in ("sort", "offset", "limit", "state", "auth") if q.get(k)}
            params["acc"] = acc.name
            data = connz_from_options(self.server, parse_connz_options(Query(params)))
            self._answer(client, reply, {"server": self.server_info(), "data": data})

        return on_request


# -- events --------------------------------------------------------------------------------------


def _nuid(rng: Any) -> str:
    return "".join(rng.choice(_NUID_CHARS) for _ in range(22))


_NUID_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def client_event_info(session: Any, *, closed: bool) -> dict[str, Any]:
    """nats-server's ClientInfo of a connect/disconnect advisory (empty fields left out)."""
    acc = session.account.name
    user = session.user
    info: dict[str, Any] = {
        "start": go_time(session.start_wall),
        "host": session.ip,
        "id": session.cid,
    }
    info["acc"] = acc
    name = (user.name or user.nkey or "") if user is not None else ""
    if name:
        info["user"] = name
    for key, attr in (("name", "name"), ("lang", "lang"), ("ver", "version")):
        v = getattr(session, attr, "")
        if v:
            info[key] = v
    if closed:
        info["rtt"] = int(session.rtt_s * 1e9)
        info["stop"] = go_time(session.stop_wall or time.time())
    info["name_tag"] = acc
    info["kind"] = "Client"
    info["client_type"] = "nats"
    return info


#: nats-server's statsz heartbeat: the first after 250 ms, then doubling up to 10 s
STATSZ_FIRST_S = 0.25
STATSZ_INTERVAL_S = 10.0
#: nats-server's eventsHBInterval: an account's CONNS again while it has connections
ACC_CONNS_HB_S = 30.0


class ClientEvents:
    """``$SYS.ACCOUNT.<account>.CONNECT`` / ``.DISCONNECT`` advisories and the account
    connection counts before them, published in the system account as nats-server
    publishes them, built only when someone listens; ``run`` sends the periodic ones.

    Args:
        requests: the server's ``SystemRequests`` (its envelope and system client).
    """

    def __init__(self, requests: SystemRequests) -> None:
        self.req = requests
        self.router = requests.server.accounts.system.router
        #: account name -> when its CONNS heartbeat is due (trio clock), while it has
        #: connections
        self._conns_due: dict[str, float] = {}
        self._wake = trio.Event()

    async def run(self) -> None:
        """Send STATSZ and the accounts' CONNS heartbeats until cancelled."""
        server = self.req.server
        interval = STATSZ_FIRST_S
        next_statsz = trio.current_time() + interval
        statsz_subject = f"$SYS.SERVER.{server.server_id}.STATSZ".encode()
        while True:
            wake = min([next_statsz, *self._conns_due.values()])
            with trio.move_on_at(wake):
                await self._wake.wait()
            self._wake = trio.Event()
            now = trio.current_time()
            if now >= next_statsz:
                if self._wanted(statsz_subject):
                    doc = {"server": self.req.server_info(), "statsz": self.req.statsz()}
                    self.req.sys.publish(statsz_subject, _dumps(doc))
                interval = min(interval * 2, STATSZ_INTERVAL_S)
                next_statsz = now + interval
            for name, due in list(self._conns_due.items()):
                acc = server.accounts.get(name)
                if due <= now and acc is not None:
                    self._account_conns(acc)

    def _account_conns(self, acc: Any) -> None:
        """The account's ``account_connections`` event (never for ``$G``), and its next
        heartbeat while it has connections here."""
        server = self.req.server
        if acc is server.accounts.global_account:
            return
        conns = sum(1 for c in server.clients.values() if c.account is acc and c.connected)
        if conns:
            self._conns_due[acc.name] = trio.current_time() + ACC_CONNS_HB_S
        else:
            self._conns_due.pop(acc.name, None)
        subjects = [
            f"$SYS.SERVER.ACCOUNT.{acc.name}.CONNS".encode(),
            f"$SYS.ACCOUNT.{acc.name}.SERVER.CONNS".encode(),
        ]
        wanted = [subj for subj in subjects if self._wanted(subj)]
        if not wanted:
            return
        doc = {
            "type": "io.nats.server.advisory.v1.account_connections",
            "id": _nuid(server.rng),
            "timestamp": go_time(time.time()),
            "server": {},  # one envelope per subject (its seq counts messages)
            **account_stat(server, acc),
        }
        for subj in wanted:
            doc["server"] = self.req.server_info()
            self.req.sys.publish(subj, _dumps(doc))

    def _wanted(self, subject: bytes) -> bool:
        r = self.router
        if r.sublist.has_interest(subject):
            return True
        return bool(r.route_sublist.count) and r.route_sublist.has_interest(subject)

    def connected(self, session: Any) -> None:
        due = session.account.name not in self._conns_due
        self._account_conns(session.account)
        if due:
            self._wake.set()  # the run task learns of the new heartbeat
        subject = f"$SYS.ACCOUNT.{session.account.name}.CONNECT".encode()
        if not self._wanted(subject):
            return
        doc = {
            "type": "io.nats.server.advisory.v1.client_connect",
            "id": _nuid(self.req.server.rng),
            "timestamp": go_time(time.time()),
            "server": self.req.server_info(),
            "client": client_event_info(session, closed=False),
        }
        self.req.sys.publish(subject, json.dumps(doc, separators=(",", ":")).encode())

    def disconnected(self, session: Any) -> None:
        self._account_conns(session.account)
        subject = f"$SYS.ACCOUNT.{session.account.name}.DISCONNECT".encode()
        if not self._wanted(subject):
            return
        reason = session.closing.value if session.closing is not None else ""
        doc = {
            "type": "io.nats.server.advisory.v1.client_disconnect",
            "id": _nuid(self.req.server.rng),
            "timestamp": go_time(session.stop_wall or time.time()),
            "server": self.req.server_info(),
            "client": client_event_info(session, closed=True),
            # the client's view: what it sent, what it received
            "sent": {"msgs": session.in_msgs, "bytes": session.in_bytes},
            "received": {"msgs": session.out_msgs, "bytes": session.out_bytes},
            "reason": reason,
        }
        self.req.sys.publish(subject, json.dumps(doc, separators=(",", ":")).encode())


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
