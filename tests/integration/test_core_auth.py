"""Authentication, permissions and TLS against a real trijet process, driven by nats-py."""

from __future__ import annotations

import asyncio
import os
import ssl
from typing import Any

import nats
import nats.errors
import nkeys

from tests.support import ServerProcess
from tests.support.aio import ErrorLog, run


async def connect(sp: ServerProcess, url: str | None = None, **kw: Any) -> nats.NATS:
    kw.setdefault("allow_reconnect", False)
    kw.setdefault("max_reconnect_attempts", 0)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("error_cb", ErrorLog().cb)
    return await nats.connect(url or sp.url, **kw)


async def roundtrip(nc: nats.NATS, subject: str = "rt.x") -> None:
    sub = await nc.subscribe(subject)
    await nc.publish(subject, b"ping")
    assert (await sub.next_msg(timeout=5)).data == b"ping"
    await sub.unsubscribe()


def expect_refused(sp: ServerProcess, **kw: Any) -> list[str]:
    """Connecting with ``kw`` does not give a usable connection; returns the texts seen.

    nats-py may report a refusal from ``connect`` itself or (TLS 1.3: the server
    checks the client certificate after the client's handshake finished) on the
    first round trip, so both count.
    """
    log = ErrorLog()

    async def main() -> None:
        try:
            nc = await connect(sp, error_cb=log.cb, **kw)
        except Exception as exc:
            log.errors.append(exc)
            return
        try:
            await nc.flush(timeout=3)
        except Exception as exc:
            log.errors.append(exc)
        else:
            raise AssertionError(f"connection with {kw} was usable")
        finally:
            await nc.close()

    run(main)
    assert log.errors
    return [f"{type(e).__name__}: {e}".lower() for e in log.errors]


def test_user_password(start_server: Any) -> None:
    sp = start_server("trijet", config="authorization { user: alice, password: s3cret }\n")

    async def ok() -> None:
        nc = await connect(sp, user="alice", password="s3cret")
        try:
            await roundtrip(nc)
        finally:
            await nc.close()
        nc = await connect(sp, sp.url.replace("nats://", "nats://alice:s3cret@"))
        try:
            await roundtrip(nc)
        finally:
            await nc.close()

    run(ok)
    for kw in ({"user": "alice", "password": "wrong"}, {"user": "eve", "password": "s3cret"}, {}):
        texts = expect_refused(sp, **kw)
        assert any("authorization violation" in t for t in texts), (kw, texts)


def test_token(start_server: Any) -> None:
    sp = start_server("trijet", config="authorization { token: t0k3n }\n")

    async def ok() -> None:
        nc = await connect(sp, token="t0k3n")
        try:
            await roundtrip(nc)
        finally:
            await nc.close()

    run(ok)
    texts = expect_refused(sp, token="nope")
    assert any("authorization violation" in t for t in texts), texts


def test_nkeys(start_server: Any) -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    other = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    sp = start_server("trijet", config=f"authorization {{ users: [ {{ nkey: {public} }} ] }}\n")

    async def ok() -> None:
        nc = await connect(sp, nkeys_seed_str=seed.decode())
        try:
            await roundtrip(nc)
        finally:
            await nc.close()

    run(ok)
    texts = expect_refused(sp, nkeys_seed_str=other.decode())
    assert any("authorization violation" in t for t in texts), texts


PERMS = """
authorization {
  users: [
    { user: limited, password: pw, permissions: {
        publish: { allow: ["ok.>", "_INBOX.>"], deny: ["ok.secret"] },
        subscribe: { allow: ["ok.>", "_INBOX.>"], deny: ["ok.hidden"] } } },
    { user: admin, password: pw }
  ]
}
"""


def test_permissions_errors_and_connection_stays_up(start_server: Any) -> None:
    sp = start_server("trijet", config=PERMS)

    async def main() -> None:
        log = ErrorLog()
        nc = await connect(sp, user="limited", password="pw", error_cb=log.cb)
        admin = await connect(sp, user="admin", password="pw")
        try:
            mine = await nc.subscribe("ok.>")
            await nc.flush()
            await nc.publish("nope.x", b"1")
            # nats-py lower-cases server errors (the exact case is checked in tests/compat)
            e = await log.wait_for(lambda e: "publish to" in str(e))
            assert str(e) == 'nats: permissions violation for publish to "nope.x"'
            await nc.publish("ok.secret", b"2")
            await log.wait_for(lambda e: '"ok.secret"' in str(e))
            await nc.subscribe("elsewhere")
            e = await log.wait_for(lambda e: "subscription to" in str(e))
            assert str(e) == 'nats: permissions violation for subscription to "elsewhere"'
            await nc.subscribe("ok.hidden", queue="q")
            e = await log.wait_for(lambda e: "using queue" in str(e))
            assert 'subscription to "ok.hidden" using queue "q"' in str(e)
            # still connected and working
            assert nc.is_connected
            await nc.publish("ok.fine", b"3")
            msg = await mine.next_msg(timeout=5)
            assert (msg.subject, msg.data) == ("ok.fine", b"3")
            # a denied subject inside an allowed wildcard is filtered at delivery
            await admin.publish("ok.hidden", b"no")
            await admin.publish("ok.after", b"yes")
            await admin.flush()
            msg = await mine.next_msg(timeout=5)
            assert (msg.subject, msg.data) == ("ok.after", b"yes")

            # request/reply through the allowed inbox
            async def respond(m: Any) -> None:
                await m.respond(b"pong")

            await admin.subscribe("svc", cb=respond)
            await admin.flush()
            denied = await asyncio.gather(
                nc.request("svc", b"ping", timeout=0.5), return_exceptions=True
            )
            assert isinstance(denied[0], Exception), "publish to svc is not allowed"
            assert nc.is_connected
            texts = [str(e) for e in log.errors]
            assert all(t.startswith("nats: permissions violation") for t in texts), texts
        finally:
            await nc.close()
            await admin.close()

    run(main)


def _tls_config(certs: Any, verify: bool) -> str:
    return (
        "tls {\n"
        f'  cert_file: "{certs.server_cert}"\n'
        f'  key_file: "{certs.server_key}"\n'
        f'  ca_file: "{certs.ca_cert}"\n'
        f"  verify: {'true' if verify else 'false'}\n"
        "  timeout: 2\n"
        "}\n"
    )


def _client_ctx(certs: Any, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(certs.ca_cert))
    if with_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


def test_tls(start_server: Any, tls_certs: Any) -> None:
    sp = start_server("trijet", config=_tls_config(tls_certs, verify=False))

    async def ok() -> None:
        nc = await connect(sp, tls=_client_ctx(tls_certs, with_cert=False))
        try:
            assert nc._server_info.get("tls_required") is True
            await roundtrip(nc)
        finally:
            await nc.close()

    run(ok)
    # a client that does not trust the CA fails the handshake
    texts = expect_refused(sp, tls=ssl.create_default_context())
    assert texts


def test_tls_verify(start_server: Any, tls_certs: Any) -> None:
    sp = start_server("trijet", config=_tls_config(tls_certs, verify=True))

    async def ok() -> None:
        nc = await connect(sp, tls=_client_ctx(tls_certs, with_cert=True))
        try:
            assert nc._server_info.get("tls_verify") is True
            await roundtrip(nc)
        finally:
            await nc.close()

    run(ok)
    texts = expect_refused(sp, tls=_client_ctx(tls_certs, with_cert=False))
    assert texts
    # the server is still fine afterwards
    run(ok)
