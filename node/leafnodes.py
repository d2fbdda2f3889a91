"""The leaf links of one server: the listener, the solicited remotes, the interest they hear.

Theory of operation: ``LeafNodes`` owns the registry of leaf links
(``node.leaf.LeafConn``), the ``leafnodes`` listener and one task per configured remote
that keeps a link to it up (redialling with a backoff that starts at
``RECONNECT_DELAY_S_MIN`` and doubles up to the remote's ``reconnect`` delay, trying its
URLs in turn; ``LOOP_DELAY_S`` after a loop was detected).  It also keeps what each link is
told: every account counts each (subject, queue) over its local subscriptions, its routes'
interest and its leafs' interest (``Account.leaf_totals``, fed by ``Server.add_sub``/
``remove_sub`` and the routes' ``RS+``/``RS-``); a link's view is that count minus its own
interest, and a change that moves a view across zero sends ``LS+``/``LS-`` on that link
(``interest``); a new link gets the whole view and the account's loop-detection subject
(``snapshot``).  The INFO and CONNECT it builds are nats-server's (see ``node.leaf``).
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import sys
from typing import TYPE_CHECKING, Any

import trio

from node.leaf import CRLF, LOOP_DELAY_S, RECONNECT_DELAY_S_MIN, LeafConn, parse_leaf_url
from node.monitor.accstatz import retire
from node.version import NATS_VERSION

if TYPE_CHECKING:
    from node.accounts import Account
    from node.configtypes import LeafRemote, TLSConfig
    from node.server import Server

log = logging.getLogger(__name__)


class LeafNodes:
    """The leaf links of one server: the listener, the solicited remotes, the registry.

    Args:
        server: the owning server.
        rng: seeded randomness (reconnect jitter).
    """

    def __init__(self, server: Server, rng: random.Random) -> None:
        self.server = server
        self.rng = rng
        self.links: dict[int, LeafConn] = {}
        self.port = 0
        #: a ``leafnodes`` block is configured (else interest is not even counted)
        self.enabled = server.cfg.leafnodes is not None
        lcfg = server.cfg.leafnodes
        #: the listener's TLS context (``leafnodes { tls {} }``)
        self.server_ssl = _server_ssl(lcfg.tls) if lcfg is not None and lcfg.tls else None
        self._client_ssl: dict[int, ssl.SSLContext] = {}

    def client_ssl(self, tls: TLSConfig) -> ssl.SSLContext:
        """The TLS context of a remote's links (made once per remote)."""
        ctx = self._client_ssl.get(id(tls))
        if ctx is None:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            if tls.cert_file:
                ctx.load_cert_chain(tls.cert_file, tls.key_file)
            self._client_ssl[id(tls)] = ctx
        return ctx

    # -- interest ---------------------------------------------------------

    def interest(
        self,
        acc: Account,
        subject: bytes,
        queue: bytes | None,
        delta: int,
        *,
        local: bool = True,
        origin: bytes = b"",
    ) -> None:
        """The account's interest count of (subject, queue) changed by ``delta``
        (``local``: a client's, a service's or a hub-side leaf link's, else a
        route's or a spoke link's); tell the links whose view crossed zero."""
        if not self.enabled:
            return
        key = (subject, queue)
        after = _count(acc.leaf_totals, key, delta)
        local_after = _count(acc.leaf_local_totals, key, delta) if local else -1
        if origin:  # a leaf cluster's interest: never told back to links to that cluster
            _count(acc.leaf_origin_totals, (origin, key), delta)
        origins = acc.leaf_origin_totals
        if not acc.leafs:
            return
        for link in acc.leafs:
            if link.solicited:
                # a spoke link is told local interest only: each server of a leaf
                # cluster has its own link, the hub reaches the others through them
                if local_after >= 0:
                    link.announce(key, local_after)
            else:
                # less its own interest: all its cluster's when it has one (its peers'
                # links to this hub cluster bring the rest of it)
                if link.origin:
                    theirs = origins.get((link.origin, key), 0)
                else:
                    theirs = link.weights.get(key, 1) if key in link.subs else 0
                link.announce(key, after - theirs)

    def snapshot(self, link: LeafConn) -> None:
        """Send a new link the account's whole interest (and its loop subject);
        a spoke link its local interest."""
        acc = link.account
        link.announce((acc.lds, None), 1)
        if link.solicited:
            for key, n in list(acc.leaf_local_totals.items()):
                link.announce(key, n)
            return
        origins = acc.leaf_origin_totals
        for key, n in list(acc.leaf_totals.items()):
            if link.origin:
                theirs = origins.get((link.origin, key), 0)
            else:
                theirs = link.weights.get(key, 1) if key in link.subs else 0
            if n - theirs > 0:
                link.announce(key, n - theirs)

    # -- registry ---------------------------------------------------------

    def register(self, link: LeafConn) -> None:
        self.links[link.cid] = link
        link.account.leafs.append(link)
        self.snapshot(link)

    def closed(self, link: LeafConn) -> None:
        if self.links.pop(link.cid, None) is None:
            return
        if link in link.account.leafs:
            link.account.leafs.remove(link)
            retire(link.account, link, leaf=True)
        link.drop_interest()
        log.info(
            "%s:%d - lid:%d - Leafnode connection closed: %s - Account: %s",
            link.ip,
            link.port,
            link.cid,
            link.closing,
            link.account.name,
        )

    # -- wire -------------------------------------------------------------

    def info(self, link: LeafConn, *, first: bool) -> dict[str, Any]:
        """The INFO the accepting side sends (``first``: before CONNECT)."""
        server = self.server
        cfg = server.cfg
        info: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.server_name,
            "version": NATS_VERSION,
            "proto": 3,
            "go": f"python{sys.version_info.major}.{sys.version_info.minor}",
            "host": cfg.leafnodes.host if cfg.leafnodes else "",
            "port": self.port,
            "headers": not cfg.no_header_support,
            "auth_required": True,
            "max_payload": cfg.max_payload,
        }
        if server.jetstream_enabled:
            info["jetstream"] = True
        if cfg.cluster is not None and cfg.cluster.name:
            info["cluster"] = cfg.cluster.name
        info["client_id"] = link.cid
        if server.cfg.jetstream.enabled and cfg.jetstream.domain:
            info["domain"] = cfg.jetstream.domain
        if cfg.leafnodes is not None and cfg.leafnodes.tls is not None:
            info["tls_required"] = True
            if cfg.leafnodes.tls.verify:
                info["tls_verify"] = True
        if first:
            info["nonce"] = server.make_nonce()
            # no s2 codec: announced as nats-server configured ``compression: off`` does,
            # so a compressing peer settles on off (not "not supported")
            info["compression"] = "off"
            info["info_on_connect"] = True
        else:
            info["connect_info"] = True
            info["remote_account"] = link.account.name
            info["info_on_connect"] = True
        info["leafnode_urls"] = [f"{_shown_host(info['host'])}:{self.port}"]
        return info

    def connect_bytes(self, link: LeafConn) -> bytes:
        """The soliciting side's CONNECT."""
        server = self.server
        cfg = server.cfg
        fields: dict[str, Any] = {"version": NATS_VERSION, "server_id": server.server_id}
        if cfg.jetstream.enabled and cfg.jetstream.domain:
            fields["domain"] = cfg.jetstream.domain
        fields["name"] = server.server_name
        cl = cfg.cluster
        fields["cluster"] = (cl.name if cl is not None and cl.name else None) or server.server_name
        fields["headers"] = not cfg.no_header_support
        if link.account.jetstream:
            fields["jetstream"] = True
        fields["compress_mode"] = "off"
        fields["remote_account"] = link.account.name
        fields["protocol"] = 3
        if link.url:
            _, _, user, password = parse_leaf_url(link.url)
            if user is not None:
                fields["user"] = user
                fields["pass"] = password or ""
        return b"CONNECT " + json.dumps(fields, separators=(",", ":")).encode() + CRLF

    # -- serving ----------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen for leafs (when a port is configured) and keep every remote up."""
        lcfg = self.server.cfg.leafnodes
        assert lcfg is not None
        async with trio.open_nursery() as nursery:
            if lcfg.port:
                port = 0 if lcfg.port == -1 else lcfg.port
                listeners = await trio.open_tcp_listeners(port, host=lcfg.host)
                self.port = int(listeners[0].socket.getsockname()[1])
                nursery.start_soon(trio.serve_listeners, self._accepted, listeners)
                log.info(
                    "Listening for leafnode connections on %s:%d",
                    _shown_host(lcfg.host),
                    self.port,
                )
            for remote in lcfg.remotes:
                nursery.start_soon(self.solicit_forever, remote)
            task_status.started()

    async def _accepted(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            ip, port = str(peer[0]), int(peer[1])
        except OSError:
            ip, port = "", 0
        link = LeafConn(self.server, stream, remote=None, url=None, peer=(ip, port))
        try:
            await link.run()
        except Exception:  # last resort: this link ends, the server does not
            self.server.internal_error("leaf_session", peer=f"{ip}:{port}")
            await trio.aclose_forcefully(stream)

    async def solicit_forever(self, remote: LeafRemote) -> None:
        """Keep a link to one of ``remote``'s URLs up, redialling with backoff."""
        lcfg = self.server.cfg.leafnodes
        assert lcfg is not None
        delay_max = max(lcfg.reconnect_s, RECONNECT_DELAY_S_MIN)
        delay = RECONNECT_DELAY_S_MIN
        i = 0
        while True:
            url = remote.urls[i % len(remote.urls)]
            i += 1
            try:
                host, port, _, _ = parse_leaf_url(url)
                stream: trio.SocketStream | None = await trio.open_tcp_stream(host, port)
            except (OSError, ValueError):
                stream = None
            pause = delay
            if stream is not None:
                link = LeafConn(self.server, stream, remote=remote, url=url, peer=(host, port))
                try:
                    await link.run()
                except Exception:  # last resort
                    self.server.internal_error("leaf_session", url=url)
                    await trio.aclose_forcefully(stream)
                if link.registered:
                    delay = pause = RECONNECT_DELAY_S_MIN
                if link.loop_detected:
                    pause = LOOP_DELAY_S
            await trio.sleep(pause * (0.5 + self.rng.random()))
            delay = min(delay * 2, delay_max)


def _server_ssl(tls: TLSConfig) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.ca_file:
        ctx.load_verify_locations(tls.ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
    return ctx


def _count(totals: dict[Any, int], key: Any, delta: int) -> int:
    """Add ``delta`` to ``totals[key]`` (dropped at zero); the new count."""
    after = totals.get(key, 0) + delta
    if after > 0:
        totals[key] = after
        return after
    totals.pop(key, None)
    return 0


def _shown_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
