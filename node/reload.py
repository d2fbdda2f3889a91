"""Configuration reload (SIGHUP, ``--signal reload``, ``$SYS.REQ.SERVER.<id>.RELOAD``).

Theory of operation: :func:`reload` reads the configuration again the way it was first read
(its defaults, the file as it is now, the command-line flags over it: ``node.config.reread``),
asks :func:`node.reloaddiff.diff` what changed, and applies the plan — all of it or, when the
file is bad or a change is one the server does not apply live, none of it: the server keeps
running with the old configuration and the caller logs nats-server's
``Failed to reload server configuration: …``.  Applying never awaits: the server is never
seen half reloaded.

Authorization is applied as nats-server's ``reloadAuthorization``: the accounts are updated
(new ones get their subject space, system requests, JetStream or its "not enabled" answers;
removed ones are dropped; JetStream limits are replaced), the imports and exports are bridged
again when they changed, then every client connection is judged again — a user that no longer
exists or now belongs to another account is closed (``Client Closed``, no error, as there), a
connection the new settings do not authenticate gets ``Authorization Violation``, and the
others take their user's new permissions at once, losing each subscription those no longer
allow with ``-ERR 'Permissions Violation for Subscription to "s" (sid "1")'``.

An account that stops enabling JetStream loses it at once, as on nats-server: its API answers
"JetStream not enabled for account" (10039), its streams stop and leave ``/jsz``, their files
stay on disk, and enabling it again recovers them.  Only the home account (the first with
JetStream, whose service the server's JetStream hangs on) and every account of a cluster keep
their service until a restart (logged).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from node.auth import AuthedUser, Authenticator, Permissions
from node.config import ConfigError, ServerConfig, reread
from node.protocol.wire import err_bytes
from node.reloaddiff import Plan, ReloadRefused, diff
from node.session import ClosedReason

if TYPE_CHECKING:
    from node.accounts import Account
    from node.server import Server
    from node.session import ClientSession

log = logging.getLogger("node.server")


class ReloadError(Exception):
    """The reload was refused; the message is nats-server's text for why."""


def reload(server: Server) -> None:
    """Reload ``server``'s configuration file and apply what changed.

    Raises:
        ReloadError: no file, a bad file, or a change not applied live (nothing changed).
    """
    old = server.cfg
    try:
        new = reread(old)
        plan = diff(old, new)
    except (ConfigError, ReloadRefused) as exc:
        raise ReloadError(str(exc)) from None
    apply(server, new, plan)


def apply(server: Server, new: ServerConfig, plan: Plan) -> None:
    """Switch ``server`` to ``new`` as ``plan`` says (no awaits)."""
    old = server.cfg
    server.cfg = new
    for line in plan.notices:
        log.info("%s", line)
    if plan.logging:
        from node.logsetup import setup_logging

        new.warnings.clear()
        setup_logging(new)
    if plan.max_payload:
        for session in list(server.clients.values()):
            session.set_max_payload(new.max_payload)
    if plan.no_fast_producer_stall:
        server.stall_gates.no_stall = new.no_fast_producer_stall
    if plan.tls:
        from node.server import build_ssl_context

        server.ssl_context = build_ssl_context(new)
    if plan.pid_file and new.pid_file:
        with open(new.pid_file, "w") as fh:
            fh.write(str(os.getpid()))
    if plan.ports_file_dir is not None:
        _move_ports_file(server, plan.ports_file_dir)
    if plan.routes_add or plan.routes_remove:
        _reload_routes(server, plan.routes_add, plan.routes_remove)
    if plan.js_store is not None:
        _raise_store_limits(server, plan.js_store)
    if plan.auth:
        _reload_authorization(server, old, new)
    server.config_load_time = server.wall_time()
    digest = f"({new.config_digest})" if new.config_digest else ""
    log.info("Reloaded server configuration %s", digest)


def _move_ports_file(server: Server, old_dir: str) -> None:
    if old_dir:
        try:
            os.unlink(os.path.join(old_dir, f"trijet-server_{os.getpid()}.ports"))
        except FileNotFoundError:
            pass
    server.write_ports_file()


def _reload_routes(server: Server, add: list[str], remove: list[str]) -> None:
    """Routes a reload added (solicited from now on) or removed (closed, not redialled)."""
    for url in remove:
        scope = server.route_solicits.pop(url, None)
        if scope is not None:
            scope.cancel()
        route = server.routes.by_id.get(server.routes.url_ids.get(url, ""))
        if route is not None:
            route.close("Client Closed")
    for url in add:
        server.solicit_route(url)


def _raise_store_limits(server: Server, limits: tuple[int | None, int | None]) -> None:
    from cluster.model import Storage

    js = server.jetstream
    if js is None:
        return
    mem, file = limits
    if mem is not None:
        js.storage.max[Storage.MEMORY] = mem
    if file is not None:
        js.storage.max[Storage.FILE] = file


def _reload_authorization(server: Server, old: ServerConfig, new: ServerConfig) -> None:
    server.authenticator = Authenticator(new.auth)
    added, removed = server.accounts.update(new)
    for acc in removed:
        for route in list(server.routes.by_id.values()):
            route.account_removed(acc)
        log.debug('event=account_removed account="%s"', acc.name)
    for acc in added:
        server.system_requests.add_account(acc)
        for route in list(server.routes.by_id.values()):
            route.account_added(acc)
    _reload_jetstream_accounts(server, old, new, added)
    if _bridges(old) != _bridges(new):
        from node.imports import install_imports

        if server.service_imports is not None:
            server.service_imports.close()
        server.service_imports = install_imports(server)
    for session in list(server.clients.values()):
        if session.connected and session.closing is None:
            _judge(server, session)


def _bridges(cfg: ServerConfig) -> list[Any]:
    return [(n, s.exports, s.imports) for n, s in cfg.accounts.items()]


def _reload_jetstream_accounts(
    server: Server, old: ServerConfig, new: ServerConfig, added: list[Account]
) -> None:
    """Limits replaced; JetStream started in the accounts that enable it now."""
    from node.confaccounts import jetstream_accounts
    from node.jetstream.acclimits import AccountLimits

    running = {svc.account.name: svc for svc in server.js_services}
    for svc in server.js_services:
        spec = new.accounts.get(svc.account.name)
        svc.limits = AccountLimits.from_config(spec.js_limits if spec else {})
    wanted = jetstream_accounts(new) if new.jetstream.enabled else []
    accounts = server.accounts
    for name, svc in list(running.items()):
        if name in wanted:
            continue
        if server.stop_account_jetstream(svc.account):
            log.info('Reloaded: JetStream disabled in account "%s"', name)
            del running[name]
        else:
            log.warning('JetStream stays enabled in account "%s" until the server restarts', name)
    for name in wanted:
        acc = accounts.get(name)
        if acc is None or name in running:
            continue
        if server.start_account_jetstream(acc):
            log.info('Reloaded: JetStream enabled in account "%s"', name)
    for acc in added:
        if not acc.jetstream:
            server.serve_account_without_jetstream(acc)


def _judge(server: Server, session: ClientSession) -> None:
    """nats-server's ``clientHasMovedToDifferentAccount`` then ``isClientAuthorized``."""
    user = session.user
    auth = server.cfg.auth
    if user is not None and (user.nkey or user.name):
        spec = None
        for u in auth.users:
            if (user.nkey and u.nkey == user.nkey) or (not user.nkey and u.user == user.name):
                spec = u
                break
        if spec is None and user.name and user.name == auth.user:
            spec_account = "$G"
        elif spec is None:
            session.close(ClosedReason.CLIENT_CLOSED)
            return
        else:
            spec_account = spec.account or "$G"
        if spec_account != session.account.name:
            session.close(ClosedReason.CLIENT_CLOSED)
            return
    fields = session.connect_fields or {}
    again = server.authenticator.check(fields, session.nonce)
    if again is None:
        log.info("cid=%d event=auth_failed_on_reload ip=%s", session.cid, session.ip)
        session.close(ClosedReason.AUTH_VIOLATION, "Authorization Violation")
        return
    if again.account != session.account.name:
        session.close(ClosedReason.CLIENT_CLOSED)
        return
    account = server.accounts.get(again.account)
    if account is not session.account:
        session.close(ClosedReason.CLIENT_CLOSED)
        return
    reauthorize(session, again)


def reauthorize(session: ClientSession, user: AuthedUser) -> None:
    """``session`` authenticated again as ``user`` (same account): its permissions apply
    from now on; each subscription they no longer allow is removed with nats-server's error
    to the client and notice in the log (``processSubsOnConfigReload``)."""
    session.user = user
    perms = Permissions(user.permissions) if user.permissions is not None else None
    session.perms = perms
    session.resp_perms = perms.allow_responses if perms is not None else None
    session.deliver_filter = None
    who = _auth_user(user)
    for sub in list(session.subs.values()):
        subject = sub.subject
        if perms is not None and not perms.sub_allowed(subject, sub.queue):
            session.remove_sub(sub)
            what = subject.decode(errors="replace")
            sid = sub.sid.decode(errors="replace")
            if sub.queue is not None:
                q = sub.queue.decode(errors="replace")
                text = (
                    f'Permissions Violation for Subscription to "{what}" using queue "{q}" '
                    f'(sid "{sid}")'
                )
                log.info(
                    'Removed sub "%s" using queue "%s" (sid "%s") for %s - not authorized',
                    what,
                    q,
                    sid,
                    who,
                )
            else:
                text = f'Permissions Violation for Subscription to "{what}" (sid "{sid}")'
                log.info('Removed sub "%s" (sid "%s") for %s - not authorized', what, sid, who)
            session.send_err(err_bytes(text))
        elif perms is not None and perms.wildcard_needs_filter(subject):
            session.deliver_filter = perms.deliver_allowed
    session.account.router.gen += 1  # permissions: retire delivery plans
    session.choose_pub_handlers()


def _auth_user(user: AuthedUser) -> str:
    """How nats-server names a connection's user in its notices (``getAuthUser``)."""
    if user.nkey:
        return f'Nkey "{user.nkey}"'
    if user.name:
        return f'User "{user.name}"'
    return 'User "N/A"'
