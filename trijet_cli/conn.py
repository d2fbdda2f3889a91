"""Connection options, the connection, and JetStream API requests.

Options as natscli's: ``--server/-s`` (else ``NATS_URL``, else
``nats://127.0.0.1:4222``; comma-separated lists allowed), ``--creds`` (a
credentials file), ``--user``/``--password``, ``--token``, ``--nkey`` (a seed
file), ``--timeout`` (seconds, default 5), ``--js-domain``.  Errors end the
command as natscli's do: ``trijet: error: <context>: <reason>`` on stderr and
exit status 1; a JetStream API error reads ``<description> (<err_code>)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import nats
from nats.aio.client import Client

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_TIMEOUT_S = 5.0
CLIENT_NAME = "trijet CLI"


class CliError(Exception):
    """A failure reported as ``trijet: error: <message>`` with exit status 1."""


class ApiError(CliError):
    """A JetStream API error answer: ``description (err_code)``."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"{description} ({err_code})" if description else f"JetStream {code}")


def fatal(msg: str) -> NoReturn:
    raise CliError(msg)


def add_connection_flags(p: argparse.ArgumentParser, *, top: bool) -> None:
    """The connection flags, accepted before the command (``top``) and after the verb.

    After the verb their defaults are suppressed, so a flag given before the
    command is not overwritten by the verb's parser (natscli takes them anywhere).
    """
    d: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    g = p.add_argument_group("connection")
    g.add_argument("-s", "--server", help="NATS server URLs (env NATS_URL)", **d)
    g.add_argument("--creds", help="user credentials file (env NATS_CREDS)", **d)
    g.add_argument("--user", help="username or token (env NATS_USER)", **d)
    g.add_argument("--password", help="password (env NATS_PASSWORD)", **d)
    g.add_argument("--token", help="authentication token", **d)
    g.add_argument("--nkey", help="user NKEY seed file", **d)
    g.add_argument("--timeout", type=float, help="request timeout in seconds", **d)
    g.add_argument("--js-domain", help="JetStream domain", **d)
    g.add_argument("--json", action="store_true", help="produce JSON output", **d)


@dataclass
class Options:
    servers: list[str]
    creds: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    js_domain: str | None = None

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Options:
        url = a.server or os.environ.get("NATS_URL") or DEFAULT_URL
        servers = [u.strip() for u in url.split(",") if u.strip()]
        servers = [u if "://" in u else f"nats://{u}" for u in servers]
        return cls(
            servers=servers,
            creds=a.creds or os.environ.get("NATS_CREDS") or None,
            user=a.user or os.environ.get("NATS_USER") or None,
            password=a.password or os.environ.get("NATS_PASSWORD") or None,
            token=a.token,
            nkey=a.nkey or os.environ.get("NATS_NKEY") or None,
            timeout_s=a.timeout if a.timeout is not None else DEFAULT_TIMEOUT_S,
            js_domain=a.js_domain,
        )

    def api_prefix(self) -> str:
        return f"$JS.{self.js_domain}.API" if self.js_domain else "$JS.API"


async def _quiet(*_: Any) -> None:
    return None


async def connect(opts: Options) -> Client:
    """Connect with the options; CliError when no server answers."""
    kw: dict[str, Any] = {
        "servers": opts.servers,
        "name": CLIENT_NAME,
        "connect_timeout": opts.timeout_s,
        "allow_reconnect": False,
        "max_reconnect_attempts": 0,
        "error_cb": _quiet,
    }
    if opts.creds:
        kw["user_credentials"] = opts.creds
    if opts.nkey:
        kw["nkeys_seed"] = opts.nkey
    if opts.user and opts.password:
        kw["user"], kw["password"] = opts.user, opts.password
    elif opts.user:
        kw["token"] = opts.user
    if opts.token:
        kw["token"] = opts.token
    try:
        return await asyncio.wait_for(nats.connect(**kw), opts.timeout_s)
    except TimeoutError:
        fatal("setup failed: nats: no servers available for connection")
    except Exception as exc:  # nats-py raises a variety here; all mean "could not connect"
        fatal(f"setup failed: {exc or type(exc).__name__}")


class JetStreamApi:
    """``$JS.API`` requests as JSON in, JSON out."""

    def __init__(self, nc: Client, opts: Options) -> None:
        self.nc = nc
        self.opts = opts
        self.prefix = opts.api_prefix()

    async def request(self, subject: str, body: Any = None, *, what: str = "") -> dict[str, Any]:
        """Ask ``<prefix>.<subject>``; the decoded answer, or ApiError / CliError."""
        data = b"" if body is None else json.dumps(body).encode()
        try:
            msg = await self.nc.request(
                f"{self.prefix}.{subject}", data, timeout=self.opts.timeout_s
            )
        except nats.errors.NoRespondersError:
            fatal(_ctx(what, "no responders available for request"))
        except nats.errors.TimeoutError:
            fatal(_ctx(what, "context deadline exceeded"))
        try:
            doc = json.loads(msg.data)
        except ValueError:
            fatal(_ctx(what, f"invalid JSON response: {msg.data[:200]!r}"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if err:
            e = ApiError(
                int(err.get("code", 0)), int(err.get("err_code", 0)), err.get("description", "")
            )
            raise CliError(_ctx(what, str(e))) from e
        return dict(doc)

    async def paged(self, subject: str, key: str, body: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a paged list API (``offset``/``total``)."""
        items: list[Any] = []
        while True:
            doc = await self.request(subject, {**(body or {}), "offset": len(items)})
            page = doc.get(key) or []
            items += page
            if not page or len(items) >= int(doc.get("total", 0)):
                return items


def _ctx(what: str, reason: str) -> str:
    return f"{what}: {reason}" if what else reason


def report_error(exc: CliError) -> int:
    print(f"trijet: error: {exc}", file=sys.stderr)
    return 1
