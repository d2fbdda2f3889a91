"""``/leafz`` and the leaf-node fields of ``/varz``, in nats-server's shapes.

``/leafz``: one entry per leaf link (either direction): ``id`` (the link's
connection id), ``name`` (the peer's server name), ``is_spoke`` (this side
solicited), ``account``, the peer's ``ip``/``port``, ``rtt``, message
counters, and ``subscriptions``: the interest the peer announced (with
``subs=1``, ``subscriptions_list``).  ``/varz``'s ``leaf`` block: the
listener's ``host``, ``port``, ``auth_timeout``, ``tls_timeout`` when one is
configured, and ``remotes`` (``local_account``, ``urls`` as host:port).
"""

from __future__ import annotations

from typing import Any

from node.monitor.gofmt import go_time, rtt_string

TLS_TIMEOUT_S_DEFAULT = 2


def leaf_info(link: Any, subs: bool) -> dict[str, Any]:
    """One link's ``/leafz`` entry."""
    info: dict[str, Any] = {
        "id": link.cid,
        "name": link.remote_name,
        "is_spoke": bool(link.solicited),
        "account": link.account.name,
        "ip": link.ip,
        "port": link.port,
        "rtt": rtt_string(float(link.rtt_s)),
        "in_msgs": int(link.in_msgs),
        "out_msgs": int(link.out_msgs),
        "in_bytes": int(link.in_bytes),
        "out_bytes": int(link.out_bytes),
        "subscriptions": len(link.subs),
    }
    if subs and link.subs:
        info["subscriptions_list"] = [s.decode(errors="replace") for s, _ in link.subs]
    info["compression"] = "off"
    return info


def leafz_doc(server: Any, now: float, subs: bool, account: str | None) -> dict[str, Any]:
    """The ``/leafz`` document (``acc=`` keeps one account's links)."""
    links = [
        link
        for link in server.leafnodes.links.values()
        if account is None or link.account.name == account
    ]
    return {
        "server_id": server.server_id,
        "now": go_time(now),
        "leafnodes": len(links),
        "leafs": [leaf_info(link, subs) for link in links],
    }


def leaf_varz(server: Any) -> dict[str, Any]:
    """``/varz``'s ``leaf`` block (empty without a ``leafnodes`` block)."""
    lcfg = server.cfg.leafnodes
    if lcfg is None:
        return {}
    out: dict[str, Any] = {}
    if lcfg.port:
        out["host"] = lcfg.host
        out["port"] = server.leafnodes.port or lcfg.port
        out["auth_timeout"] = lcfg.auth_timeout_s
        out["tls_timeout"] = TLS_TIMEOUT_S_DEFAULT
    if lcfg.remotes:
        out["remotes"] = [
            {
                "local_account": r.account or "$G",
                "urls": [u.split("://", 1)[-1].rsplit("@", 1)[-1] for u in r.urls],
            }
            for r in lcfg.remotes
        ]
    return out
