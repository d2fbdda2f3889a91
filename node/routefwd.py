"""Route forwarding of the router (a mixin of ``node.router.Router``).

Theory of operation: a message published on this server goes once to each
route whose peer has interest (``RMSG``, or ``HMSG`` with headers).  Plain
interest only (the common case) builds one op for every such route; with
queue groups, a group with a local member is served here (trijet prefers
local members, as issue #7 asks; nats-server 2.15.1 draws among the local
and the routes' members); else by a route's own member, picked by the
weight its peer announced; a leaf link (local, or behind a route: a
leaf-origin ``LS+``) serves only a group with none of these, as nats-server
keeps leaf links as the fallback (``route_or_local``).  A route picked
serves the group (its op names the groups: ``+ reply q1 q2`` / ``| q1
q2``) and the caller leaves it out locally (``taken``).  A leaf's message restricts the
groups to the ones it names (``only_queues``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.jsdelivery import LEAF_LINK
from node.nextroute import MSG_NEXT_PREFIX, to_consumer_leader

if TYPE_CHECKING:
    import random

    from node.session import Subscription
    from node.sublist import Sublist

CRLF = b"\r\n"


def route_or_local(group: list[Any], local: list[Any] | None, rng: Any) -> Any:
    """The route member (a route's subscription) that serves a queue group, or None
    when a local member takes it (``local``: the group's local members, leaf links
    included, or None).

    A local member other than a leaf link comes first; then the routes' plain
    members (by the weight each route announced: the members on its server); leaf
    links -- local ones by their peer's weight, and the routes' leaf-origin members --
    are the fallback, drawn only when the group has none of the others (nats-server
    keeps a leaf as the candidate of last resort the same way)."""
    leaf_w = 0
    if local:
        for s in local:
            if s.client.deliver_filter is not LEAF_LINK:
                return None
            leaf_w += s.client.weights.get((s.subject, s.queue), 1)
    pool = [rs for rs in group if not rs.origin]
    if pool:
        leaf_w = 0
    else:
        pool = group
    pick = rng.randrange(leaf_w + sum(max(rs.weight, 1) for rs in pool))
    if pick < leaf_w:
        return None
    pick -= leaf_w
    for rs in pool:
        pick -= max(rs.weight, 1)
        if pick < 0:
            return rs
    return pool[-1]


class _Match:
    __slots__ = ("psubs", "qsubs")

    def __init__(self, psubs: Any, qsubs: Any) -> None:
        self.psubs = psubs
        self.qsubs = qsubs


class RouteForwarding:
    """The router's route-forwarding method (mixed into ``Router``)."""

    if TYPE_CHECKING:
        route_sublist: Sublist[Any]
        rng: random.Random
        account: bytes
        rt_out_msgs: int
        rt_out_bytes: int
        _rmsg: bytes
        _hmsg: bytes

    def _to_routes(
        self,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        local_groups: list[list[Subscription]],
        only_queues: tuple[bytes, ...] | None = None,
        origin: bytes = b"",
        taken: list[bytes] | None = None,
    ) -> int:
        """Send one copy to each route with interest; returns routes used
        (``only_queues``: the queue groups a leaf's message may reach; ``origin``: its
        leaf cluster, sent as ``LMSG <origin> <account> ... <hdr> <total>``, and no route
        whose interest is that cluster's own).  ``local_groups`` are the queue groups
        with local members; the names of those a route serves instead are appended
        to ``taken`` (the caller delivers them locally no more)."""
        if subject.startswith(MSG_NEXT_PREFIX):  # a pull: to its consumer's leader only
            to_leader = to_consumer_leader(self, subject, reply, headers, payload)
            if to_leader is not None:
                return to_leader
        r = self.route_sublist.match(subject)
        if origin:
            r = _Match(
                [rs for rs in r.psubs if rs.origin != origin],
                [g2 for g in r.qsubs if (g2 := [rs for rs in g if rs.origin != origin])],
            )
        if only_queues is not None and r.qsubs:
            r = _Match(r.psubs, [g for g in r.qsubs if g[0].queue in only_queues])
        if not r.qsubs and not origin:
            psubs = r.psubs
            if not psubs:
                return 0
            # common case: plain interest only, one RMSG for every such route
            mid = b" " + reply + b" " if reply else b" "
            if headers is None:
                data = (
                    self._rmsg + subject + mid + str(len(payload)).encode() + CRLF + payload + CRLF
                )
            else:
                hl = len(headers)
                data = (
                    self._hmsg
                    + subject
                    + mid
                    + str(hl).encode()
                    + b" "
                    + str(hl + len(payload)).encode()
                    + CRLF
                    + headers
                    + payload
                    + CRLF
                )
            if len(psubs) == 1:
                route = psubs[0].route
                route.send(data)
                route.out_msgs += 1
                route.out_bytes += len(payload)
                self.rt_out_msgs += 1
                self.rt_out_bytes += len(payload)
                return 1
            sent = set()
            for rs in psubs:
                route = rs.route
                if route not in sent:
                    sent.add(route)
                    route.send(data)
                    route.out_msgs += 1
                    route.out_bytes += len(payload)
            self.rt_out_msgs += len(sent)
            self.rt_out_bytes += len(payload) * len(sent)
            return len(sent)
        targets: dict[Any, list[bytes]] = {}
        for rs in r.psubs:
            targets.setdefault(rs.route, [])
        if r.qsubs:
            local = {g[0].queue: g for g in local_groups}
            for group in r.qsubs:
                q = group[0].queue
                lg = local.get(q)
                chosen = route_or_local(group, lg, self.rng)
                if chosen is None:
                    continue  # a local member takes it
                if lg is not None:
                    if taken is None:
                        continue  # the caller cannot leave it out locally
                    taken.append(q)
                targets.setdefault(chosen.route, []).append(q)
        for route, queues in targets.items():
            if origin and route.lnoc:
                self._origin_msg(route, origin, subject, reply, headers, payload, queues)
                continue
            parts = [self.account, subject]
            if queues:
                if reply:
                    parts += [b"+", reply]
                else:
                    parts.append(b"|")
                parts.extend(queues)
            elif reply:
                parts.append(reply)
            if headers is None:
                parts.append(str(len(payload)).encode())
                route.send(b"RMSG " + b" ".join(parts) + CRLF + payload + CRLF)
            else:
                hl = len(headers)
                parts += [str(hl).encode(), str(hl + len(payload)).encode()]
                route.send(b"HMSG " + b" ".join(parts) + CRLF + headers + payload + CRLF)
            route.out_msgs += 1
            route.out_bytes += len(payload)
        self.rt_out_msgs += len(targets)
        self.rt_out_bytes += len(payload) * len(targets)
        return len(targets)

    def _origin_msg(
        self,
        route: Any,
        origin: bytes,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        queues: list[bytes],
    ) -> None:
        """``LMSG <origin> <account> <subject> [reply | + reply queues | | queues] <hdr>
        <total>``: a leaf cluster's message on a route (always two sizes)."""
        parts = [origin, self.account, subject]
        if queues:
            if reply:
                parts += [b"+", reply]
            else:
                parts.append(b"|")
            parts.extend(queues)
        elif reply:
            parts.append(reply)
        hdr = headers or b""
        parts += [b"%d" % len(hdr), b"%d" % (len(hdr) + len(payload))]
        route.send(b"LMSG " + b" ".join(parts) + CRLF + hdr + payload + CRLF)
        route.out_msgs += 1
        route.out_bytes += len(payload)
