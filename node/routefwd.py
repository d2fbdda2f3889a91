"""Route forwarding of the router (a mixin of ``node.router.Router``).

Theory of operation: a message published on this server goes once to each
route whose peer has interest (``RMSG``, or ``HMSG`` with headers).  Plain
interest only (the common case) builds one op for every such route; with
queue groups, each group without a local member is served by one route
picked by weight, and that route's op names the groups it should serve
(``+ reply q1 q2`` / ``| q1 q2``).  A leaf's message restricts the groups to
the ones it names (``only_queues``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.nextroute import MSG_NEXT_PREFIX, to_consumer_leader

if TYPE_CHECKING:
    import random

    from node.session import Subscription
    from node.sublist import Sublist

CRLF = b"\r\n"


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
    ) -> int:
        """Send one copy to each route with interest; returns routes used
        (``only_queues``: the queue groups a leaf's message may reach; ``origin``: its
        leaf cluster, sent as ``LMSG <origin> <account> ... <hdr> <total>``, and no route
        whose interest is that cluster's own)."""
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
            local = {g[0].queue for g in local_groups}
            for group in r.qsubs:
                q = group[0].queue
                if q in local:
                    continue  # a local member takes it
                chosen = group[0]
                if len(group) > 1:
                    total = sum(max(rs.weight, 1) for rs in group)
                    pick = self.rng.randrange(total)
                    for rs in group:
                        pick -= max(rs.weight, 1)
                        if pick < 0:
                            chosen = rs
                            break
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
