"""``/connz``: open and closed client connections, filtered, sorted and paged.

Theory of operation: a pure function of the server's client registry
(``server.clients``), its ring of closed sessions (``server.closed_clients``)
and a :class:`~node.monitor.query.Query`.  It follows nats-server's
``Server.Connz`` step for step, quirks included, because dashboards and the
``nats`` CLI page through it: ``total`` counts candidates *before* the user
filter; ``cid=`` forces ``limit`` to 1; only ``cid``/``start`` sort ascending
besides ``uptime`` and ``reason``; ``stop``/``reason`` sorts need
``state=closed``; an unknown ``acc`` answers an empty document with
``connections: null``.  Closed connections are reported as they were when
they closed: ``uptime`` and ``idle`` are measured to ``stop``, subscriptions
are the ones held at close (``final_subs``), and their detail carries the
account like ``/subsz`` does.  Sorting is stable over cid order (Go's is not
stable; ties are unordered there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from node.monitor.gofmt import go_time, rtt_string, uptime
from node.monitor.query import ConnState, MonitorError, Query

CONN_LIST_SIZE_DEFAULT = 1024
GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"

SORT_OPTIONS = (
    "cid",
    "start",
    "subs",
    "pending",
    "msgs_to",
    "msgs_from",
    "bytes_to",
    "bytes_from",
    "last",
    "idle",
    "uptime",
    "stop",
    "reason",
    "rtt",
)


@dataclass
class _Row:
    info: dict[str, Any]
    cid: int
    start: float
    last: float
    stop: float | None
    reason: str
    rtt_s: float
    num_subs: int
    pending: int
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)


def last_activity_wall(session: Any) -> float:
    """Wall time of a session's last inbound activity.

    Sessions keep ``last_in`` on trio's clock; it is mapped onto the wall
    clock through the pair (``start``, ``start_wall``) taken together at accept.
    """
    start_wall = float(session.start_wall)
    best = float(getattr(session, "last_activity_wall", start_wall) or start_wall)
    last_in = getattr(session, "last_in", None)
    start = getattr(session, "start", None)
    if isinstance(last_in, (int, float)) and isinstance(start, (int, float)):
        best = max(best, start_wall + (last_in - start))
    return best


def raw_auth_user(server: Any, session: Any) -> str:
    """nats-server's ``getRawAuthUser``: nkey, else user name, else ``[REDACTED]`` for tokens."""
    user = getattr(session, "user", None)
    if user is None:
        return ""
    if getattr(user, "nkey", None):
        return str(user.nkey)
    if getattr(user, "name", None):
        return str(user.name)
    if getattr(server.cfg.auth, "token", None):
        return "[REDACTED]"
    return ""


def account_name(session: Any) -> str:
    """The name of the account a session is bound to."""
    acc = getattr(session, "account", None)
    if acc is None:
        return GLOBAL_ACCOUNT
    return str(getattr(acc, "name", acc))


def sub_detail(sub: Any, cid: int, *, with_account: str | None) -> dict[str, Any]:
    """One subscription as nats-server's ``SubDetail``."""
    d: dict[str, Any] = {}
    if with_account:
        d["account"] = with_account
        d["account_tag"] = with_account
    d["subject"] = _text(sub.subject)
    if sub.queue:
        d["qgroup"] = _text(sub.queue)
    d["sid"] = _text(sub.sid)
    d["msgs"] = int(getattr(sub, "delivered", 0))
    mx = getattr(sub, "max_msgs", None)
    if mx:
        d["max"] = int(mx)
    d["cid"] = cid
    return d


def _text(b: bytes | str) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else str(b)


def _session_subs(session: Any, closed: bool) -> list[Any]:
    if closed:
        final = getattr(session, "final_subs", None)
        if final is not None:
            return list(final)
    return list(session.subs.values())


def _row(server: Any, s: Any, now: float, *, closed: bool) -> _Row:
    """Build one ConnInfo (without optional sub lists / auth) and its sort keys."""
    start = float(s.start_wall)
    last = last_activity_wall(s)
    stop = float(s.stop_wall) if closed and s.stop_wall is not None else None
    ref = stop if stop is not None else now
    subs = _session_subs(s, closed)
    reason = s.closing.value if closed and s.closing is not None else ""
    info: dict[str, Any] = {
        "cid": s.cid,
        "kind": "Client",
        "type": "nats",
        "ip": s.ip,
        "port": s.port,
        "start": go_time(start),
        "last_activity": go_time(last),
    }
    if stop is not None:
        info["stop"] = go_time(stop)
    if reason:
        info["reason"] = reason
    info["rtt"] = rtt_string(float(s.rtt_s))
    info["uptime"] = uptime(ref - start)
    info["idle"] = uptime(ref - last)
    info["pending_bytes"] = int(s.pending_bytes)
    info["in_msgs"] = int(s.in_msgs)
    info["out_msgs"] = int(s.out_msgs)
    info["in_bytes"] = int(s.in_bytes)
    info["out_bytes"] = int(s.out_bytes)
    stalls = int(getattr(s, "stalls", 0))
    if stalls:
        info["stalls"] = stalls
    info["subscriptions"] = len(subs)
    for key in ("name", "lang", "version"):
        v = getattr(s, key, "")
        if v:
            info[key] = v
    tls = getattr(s, "tls_info", None)
    if tls:
        if tls.get("tls_version"):
            info["tls_version"] = tls["tls_version"]
        if tls.get("tls_cipher_suite"):
            info["tls_cipher_suite"] = tls["tls_cipher_suite"]
        tls_cfg = server.cfg.tls
        if tls_cfg is not None and tls_cfg.handshake_first:
            info["tls_first"] = True
    return _Row(
        info=info,
        cid=s.cid,
        start=start,
        last=last,
        stop=stop,
        reason=reason,
        rtt_s=float(s.rtt_s),
        num_subs=len(subs),
        pending=int(s.pending_bytes),
        in_msgs=int(s.in_msgs),
        out_msgs=int(s.out_msgs),
        in_bytes=int(s.in_bytes),
        out_bytes=int(s.out_bytes),
        extra={"subs": subs},
    )


def _sort(rows: list[_Row], sort_opt: str, now: float) -> None:
    if sort_opt in ("", "cid", "start"):
        rows.sort(key=lambda r: r.cid)
        return
    ascending = {
        "uptime": lambda r: (r.stop if r.stop is not None else now) - r.start,
        "reason": lambda r: r.reason,
    }
    descending = {
        "subs": lambda r: r.num_subs,
        "pending": lambda r: r.pending,
        "msgs_to": lambda r: r.out_msgs,
        "msgs_from": lambda r: r.in_msgs,
        "bytes_to": lambda r: r.out_bytes,
        "bytes_from": lambda r: r.in_bytes,
        "last": lambda r: r.last,
        "idle": lambda r: now - r.last,
        "stop": lambda r: r.stop or 0.0,
        "rtt": lambda r: r.rtt_s,
    }
    if sort_opt in ascending:
        rows.sort(key=ascending[sort_opt])
    else:
        rows.sort(key=descending[sort_opt], reverse=True)


def parse_connz_options(q: Query) -> dict[str, Any]:
    """Decode /connz parameters in nats-server's order (first bad one wins)."""
    sort_opt = q.get("sort")
    auth = q.bool("auth")
    subs, subs_detail = q.subs()
    offset = q.int("offset")
    limit = q.int("limit")
    cid = q.uint64("cid")
    state = q.state()
    return {
        "sort": sort_opt,
        "auth": auth,
        "subs": subs,
        "subs_detail": subs_detail,
        "offset": offset,
        "limit": limit,
        "cid": cid,
        "state": state,
        "user": q.get("user"),
        "acc": q.get("acc"),
        "mqtt_client": q.get("mqtt_client"),
    }


def connz(server: Any, query: Query | None = None, *, now: float | None = None) -> dict[str, Any]:
    """The ``/connz`` document.

    Args:
        server: the server (``clients``, ``closed_clients``, ``server_id``, ``cfg``).
        query: request parameters (see module docstring).
        now: wall time for ``now``/``uptime``/``idle``; defaults to ``server.wall_time()``.

    Raises:
        MonitorError: 400 with nats-server's text for a bad parameter or sort.
    """
    o = parse_connz_options(query or Query())
    return connz_from_options(server, o, now=now)


def connz_from_options(
    server: Any, o: dict[str, Any], *, now: float | None = None
) -> dict[str, Any]:
    """``connz`` with already-decoded options (the handler counts the request in between)."""
    now = server.wall_time() if now is None else now
    sort_opt: str = o["sort"]
    if sort_opt and sort_opt not in SORT_OPTIONS:
        raise MonitorError(400, f"invalid sorting option: {sort_opt}")
    state: ConnState = o["state"]
    offset = max(int(o["offset"]), 0)
    limit = int(o["limit"])
    if limit <= 0:
        limit = CONN_LIST_SIZE_DEFAULT
    if sort_opt == "stop" and state is not ConnState.CLOSED:
        raise MonitorError(400, "sort by stop only valid on closed connections")
    if sort_opt == "reason" and state is not ConnState.CLOSED:
        raise MonitorError(400, "sort by reason only valid on closed connections")
    cid: int = o["cid"]
    if cid > 0:
        limit = 1
    acc: str = o["acc"]
    user: str = o["user"]
    mqtt_client: str = o["mqtt_client"]
    doc: dict[str, Any] = {
        "server_id": server.server_id,
        "now": go_time(now),
        "num_connections": 0,
        "total": 0,
        "offset": offset,
        "limit": limit,
        "connections": [],
    }
    accs = getattr(server, "accounts", None)
    known = {a.name for a in accs} if accs is not None else {GLOBAL_ACCOUNT, SYSTEM_ACCOUNT}
    if acc and acc not in known:
        # nats-server returns before filling anything in when the account is unknown
        doc["server_id"] = ""
        doc["connections"] = None
        return doc

    clist = [s for s in server.clients.values() if not acc or account_name(s) == acc]
    closed_all = list(server.closed_clients) if state is not ConnState.OPEN else []
    if acc:
        # closed sessions remember a non-global account only, as nats-server does
        closed_all = [c for c in closed_all if _closed_acc(c) == acc]
    total = (len(clist) if state is not ConnState.CLOSED else 0) + len(closed_all)
    doc["total"] = total

    open_sel: list[Any] = []
    closed_sel: list[Any] = closed_all
    if cid > 0:
        closed_sel = []
        if state is not ConnState.CLOSED:
            hit = server.clients.get(cid)
            if hit is not None and (not acc or account_name(hit) == acc):
                open_sel = [hit]
        if not open_sel and state is not ConnState.OPEN:
            closed_sel = [c for c in closed_all if c.cid == cid][:1]
    elif state is not ConnState.CLOSED:
        for s in sorted(clist, key=lambda s: s.cid):
            if acc and account_name(s) != acc:
                continue
            if user and raw_auth_user(server, s) != user:
                continue
            if mqtt_client:
                continue  # no MQTT clients here
            open_sel.append(s)
    if not open_sel and not closed_sel:
        return doc

    rows: list[_Row] = []
    for s in open_sel:
        row = _row(server, s, now, closed=False)
        _decorate(server, row, s, o, closed=False)
        rows.append(row)
    for s in closed_sel:
        if user and raw_auth_user(server, s) != user:
            continue
        if mqtt_client:
            continue
        row = _row(server, s, now, closed=True)
        _decorate(server, row, s, o, closed=True)
        rows.append(row)

    _sort(rows, sort_opt, now)
    n = len(rows)
    lo = min(offset, n)
    hi = lo + min(limit, n - lo)
    page = [r.info for r in rows[lo:hi]]
    doc["connections"] = page
    doc["num_connections"] = len(page)
    return doc


def _closed_acc(session: Any) -> str:
    name = account_name(session)
    return "" if name == GLOBAL_ACCOUNT else name


def _decorate(server: Any, row: _Row, s: Any, o: dict[str, Any], *, closed: bool) -> None:
    info = row.info
    if o["auth"]:
        au = raw_auth_user(server, s)
        if au:
            info["authorized_user"] = au
        name = account_name(s)
        if name != GLOBAL_ACCOUNT:
            info["account"] = name
    subs = row.extra["subs"]
    if subs:
        if o["subs_detail"]:
            acct = account_name(s) if closed else None
            info["subscriptions_list_detail"] = [
                sub_detail(sub, row.cid, with_account=acct) for sub in subs
            ]
        elif o["subs"]:
            info["subscriptions_list"] = [_text(sub.subject) for sub in subs]
