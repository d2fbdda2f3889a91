"""JetStream advisories (``$JS.EVENT.ADVISORY.>``) and API counting, seen by nats-py.

Every test runs against trijet and against the reference nats-server with the
same assertions, so the expectations written here are the reference's
observed behaviour:

* stream ``create`` (not on an idempotent re-create), ``modify`` (even an
  update that changes nothing), ``delete`` advisories with ``type, id,
  timestamp, stream, action[, domain]``;
* one ``api_audit`` per API request answered through the API layer, errors
  included: ``type, id, timestamp, server, client, subject[, request],
  response[, domain]``, the ``response`` being exactly the reply text, the
  ``subject`` the ``$JS.API`` form even under a domain prefix, ``client`` the
  requester's ClientInfo;
* a request without a reply subject is still acted on, counted and audited;
  an unknown API subject is neither answered nor counted; ``$JS.API.INFO``
  reports the counters as they were before itself.

The reference publishes some advisories from a send queue, so their order
relative to the audit advisory is not fixed: each step waits for the set it
expects.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support import KINDS, start_server
from tests.support.aio import noop_cb, run, with_client

WAIT_S = 5.0
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
ID_RE = re.compile(r"^[0-9A-Za-z]{22}$")
AUDIT = "io.nats.jetstream.advisory.v1.api_audit"
ACTION = "io.nats.jetstream.advisory.v1.stream_action"
AUDIT_SUBJECT = "$JS.EVENT.ADVISORY.API"


class Advisories:
    """Collects ``$JS.EVENT.>`` messages; ``take`` waits for the next few."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any], str]] = []
        self._cond = asyncio.Condition()
        self._seen = 0
        self.base = 0  # advisories before the scenario (``until_flowing``)

    async def cb(self, msg: Any) -> None:
        async with self._cond:
            self.got.append((msg.subject, json.loads(msg.data), msg.data.decode()))
            self._cond.notify_all()

    async def take(self, n: int, wait_s: float = WAIT_S) -> list[tuple[str, dict[str, Any], str]]:
        """The next ``n`` advisories, sorted by subject (their order is not fixed)."""
        async with self._cond:
            await asyncio.wait_for(
                self._cond.wait_for(lambda: len(self.got) >= self._seen + n), wait_s
            )
        batch = self.got[self._seen : self._seen + n]
        self._seen += n
        return sorted(batch, key=lambda a: a[0])

    async def until_flowing(self, nc: Any) -> None:
        """Send ``$JS.API.INFO`` until its audit advisory arrives, then forget
        everything seen: nats-server may drop the first advisories while a new
        subscription's interest reaches its system account (bounded)."""
        for _ in range(40):
            await nc.request("$JS.API.INFO", b"", timeout=WAIT_S)
            try:
                await self.take(1, wait_s=0.25)
            except TimeoutError:
                continue
            await nc.flush()
            self._seen = self.base = len(self.got)
            return
        raise AssertionError("no advisories arrived")


def _check_common(adv: dict[str, Any], type_: str) -> None:
    assert adv["type"] == type_
    assert ID_RE.match(adv["id"]), adv["id"]
    assert TS_RE.match(adv["timestamp"]), adv["timestamp"]


def _check_audit(
    audit: dict[str, Any], subject: str, request: str | None, response: str, domain: str = ""
) -> None:
    _check_common(audit, AUDIT)
    keys = ["type", "id", "timestamp", "server", "client", "subject"]
    keys += ["request"] if request is not None else []
    keys += ["response"] + (["domain"] if domain else [])
    assert list(audit) == keys
    assert audit["subject"] == subject
    assert audit.get("request") == request
    assert audit["response"] == response
    assert audit.get("domain", "") == domain


def _check_action(adv: dict[str, Any], stream: str, action: str, domain: str = "") -> None:
    _check_common(adv, ACTION)
    expect = {"stream": stream, "action": action} | ({"domain": domain} if domain else {})
    assert {k: v for k, v in adv.items() if k not in ("type", "id", "timestamp")} == expect
    assert list(adv)[:3] == ["type", "id", "timestamp"]


@pytest.mark.parametrize("kind", KINDS)
def test_stream_actions_and_api_audit(kind: Any, tmp_path: Path) -> None:
    server = start_server(kind, ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path / "srv")

    async def main() -> None:
        watcher = await nats.connect(server.url, error_cb=noop_cb)
        nc = await nats.connect(server.url, name="actor", error_cb=noop_cb)
        advs = Advisories()
        await watcher.subscribe("$JS.EVENT.>", cb=advs.cb)
        await watcher.flush()
        await advs.until_flowing(nc)
        server_name = nc._server_info["server_name"]
        try:

            async def call(subject: str, body: str = "") -> str:
                return (await nc.request(subject, body.encode(), timeout=WAIT_S)).data.decode()

            info = await call("$JS.API.INFO")
            ((subj, audit, raw),) = await advs.take(1)
            assert subj == AUDIT_SUBJECT
            _check_audit(audit, "$JS.API.INFO", None, info)
            assert audit["server"] == server_name
            client = audit["client"]
            assert list(client) == [
                "start", "host", "id", "acc", "name", "lang", "ver", "rtt", "server", "kind",
                "client_type",
            ]  # fmt: skip
            assert TS_RE.match(client["start"])
            assert (client["host"], client["id"], client["acc"]) == (
                "127.0.0.1",
                nc._client_id,
                "$G",
            )
            assert (client["name"], client["lang"], client["kind"], client["client_type"]) == (
                "actor",
                "python3",
                "Client",
                "nats",
            )
            assert client["server"] == server_name and client["rtt"] > 0
            assert '"response":"{\\"type\\":' in raw  # the reply embedded as a JSON string

            body = '{"name":"S1","subjects":["s1.>"]}'
            created = await call("$JS.API.STREAM.CREATE.S1", body)
            (a1, a2) = await advs.take(2)
            assert [a1[0], a2[0]] == [AUDIT_SUBJECT, "$JS.EVENT.ADVISORY.STREAM.CREATED.S1"]
            _check_audit(a1[1], "$JS.API.STREAM.CREATE.S1", body, created)
            assert "\\u003e" in a1[2]  # Go escapes '>' in the embedded request
            _check_action(a2[1], "S1", "create")

            again = await call("$JS.API.STREAM.CREATE.S1", body)  # idempotent: audit only
            ((subj, audit, _),) = await advs.take(1)
            _check_audit(audit, "$JS.API.STREAM.CREATE.S1", body, again)

            updated = await call("$JS.API.STREAM.UPDATE.S1", body)  # no change: still "modify"
            (a1, a2) = await advs.take(2)
            assert [a1[0], a2[0]] == [AUDIT_SUBJECT, "$JS.EVENT.ADVISORY.STREAM.UPDATED.S1"]
            _check_audit(a1[1], "$JS.API.STREAM.UPDATE.S1", body, updated)
            _check_action(a2[1], "S1", "modify")

            bad = '{"name":"S1","subjects":["s1.>"],"storage":"memory"}'
            refused = await call("$JS.API.STREAM.UPDATE.S1", bad)
            assert json.loads(refused)["error"]["err_code"] == 10052
            ((subj, audit, _),) = await advs.take(1)
            _check_audit(audit, "$JS.API.STREAM.UPDATE.S1", bad, refused)

            missing = await call("$JS.API.STREAM.INFO.NOPE")
            ((subj, audit, _),) = await advs.take(1)
            _check_audit(audit, "$JS.API.STREAM.INFO.NOPE", None, missing)

            deleted = await call("$JS.API.STREAM.DELETE.S1")
            (a1, a2) = await advs.take(2)
            assert [a1[0], a2[0]] == [AUDIT_SUBJECT, "$JS.EVENT.ADVISORY.STREAM.DELETED.S1"]
            _check_audit(a1[1], "$JS.API.STREAM.DELETE.S1", None, deleted)
            _check_action(a2[1], "S1", "delete")

            # a last request flushes anything unexpected (a create advisory for the re-create)
            await call("$JS.API.STREAM.NAMES")
            ((subj, audit, _),) = await advs.take(1)
            assert audit["subject"] == "$JS.API.STREAM.NAMES"
            assert len(advs.got) - advs.base == 11  # nothing beyond the scenario's
            ids = [a["id"] for _, a, _ in advs.got]
            assert len(set(ids)) == len(ids)
        finally:
            await nc.close()
            await watcher.close()

    try:
        run(main)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_api_counting(kind: Any, tmp_path: Path) -> None:
    server = start_server(kind, ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path / "srv")

    async def main(nc: Any) -> None:
        advs = Advisories()
        await nc.subscribe(AUDIT_SUBJECT, cb=advs.cb)
        await nc.flush()

        async def call(subject: str, body: str = "") -> dict[str, Any]:
            msg = await nc.request(subject, body.encode(), timeout=WAIT_S)
            return json.loads(msg.data)  # type: ignore[no-any-return]

        first = await call("$JS.API.INFO")
        assert first["api"]["total"] == 0 and first["api"]["errors"] == 0
        await advs.take(1)
        # no reply subject: acted on, counted and audited all the same
        await nc.publish("$JS.API.STREAM.CREATE.Q", b'{"name":"Q","subjects":["q"]}')
        ((_, audit, _),) = await advs.take(1)
        assert audit["subject"] == "$JS.API.STREAM.CREATE.Q"
        assert json.loads(audit["response"])["did_create"] is True
        names = await call("$JS.API.STREAM.NAMES")
        assert names["streams"] == ["Q"]
        await advs.take(1)
        # errors are counted; an unknown API subject is neither answered nor counted
        await call("$JS.API.STREAM.INFO.NOPE")
        await call("$JS.API.STREAM.CREATE.Q", '{"name":"Q","subjects":["other"]}')
        await advs.take(2)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.API.BOGUS", b"", timeout=0.3)
        info = await call("$JS.API.INFO")
        assert info["api"]["total"] == 5 and info["api"]["errors"] == 2
        assert info["streams"] == 1

    with_client(server, main)


@pytest.mark.parametrize("kind", KINDS)
def test_domain_and_user_in_advisories(kind: Any, tmp_path: Path) -> None:
    conf = """
    server_name: advsrv
    jetstream { store_dir: "{workdir}/store", domain: hub }
    authorization { users = [ { user: alice, password: pw } ] }
    """
    server = start_server(kind, config=conf, workdir=tmp_path / "srv")

    async def main() -> None:
        url = server.url.replace("nats://", "nats://alice:pw@")
        nc = await nats.connect(url, error_cb=noop_cb)
        advs = Advisories()
        await nc.subscribe("$JS.EVENT.>", cb=advs.cb)
        await nc.flush()
        try:
            reply = await nc.request("$JS.hub.API.STREAM.CREATE.D", b"", timeout=WAIT_S)
            assert json.loads(reply.data)["error"]["err_code"] == 10056  # empty body
            ((_, audit, _),) = await advs.take(1)
            _check_audit(audit, "$JS.API.STREAM.CREATE.D", None, reply.data.decode(), "hub")
            assert audit["server"] == "advsrv"
            assert audit["client"]["user"] == "alice" and "name" not in audit["client"]
            assert list(audit["client"])[3:5] == ["acc", "user"]
            body = b'{"name":"D"}'
            await nc.request("$JS.hub.API.STREAM.CREATE.D", body, timeout=WAIT_S)
            (a1, a2) = await advs.take(2)
            assert a1[1]["domain"] == "hub"
            _check_action(a2[1], "D", "create", "hub")
        finally:
            await nc.close()

    try:
        run(main)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_stream_delete_announces_its_consumers_first(kind: Any, tmp_path: Path) -> None:
    server = start_server(kind, ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path / "srv")

    async def main(nc: Any) -> None:
        # one subscription, flowing before the scenario (nats-server may drop the
        # first advisories while a new subscription's interest reaches it)
        advs = Advisories()
        await nc.subscribe("$JS.EVENT.ADVISORY.>", cb=advs.cb)
        await advs.until_flowing(nc)
        js = nc.jetstream(timeout=WAIT_S)
        await js.add_stream(name="SD", subjects=["sd"])
        await js.add_consumer("SD", durable_name="D1")
        await js.add_consumer("SD", durable_name="D2")
        await js.delete_stream("SD")

        def deleted() -> list[tuple[str, dict[str, Any], str]]:
            return [a for a in advs.got[advs.base :] if ".DELETED." in a[0]]

        stream_deleted = "$JS.EVENT.ADVISORY.STREAM.DELETED.SD"

        def done() -> bool:
            subjects = [a[0] for a in deleted()]
            # nats-server 2.15.1 was seen (once in ~10 runs) not to deliver its consumers'
            # advisories within the wait; trijet must send all three, consumers first
            return len(subjects) >= 3 or (kind == "reference" and stream_deleted in subjects)

        try:
            async with advs._cond:
                await asyncio.wait_for(advs._cond.wait_for(done), WAIT_S)
        except TimeoutError:
            if kind != "reference":
                raise
            # nats-server 2.15.1 was also seen under load to deliver none of the
            # three, or only consumers' ones, within the wait: its stream advisory
            # never came, so there is no order of the reference's to compare
            pytest.skip(
                f"nats-server delivered {len(deleted())} of the 3 DELETED advisories,"
                " not the stream's, within the wait"
            )
        order = [a[0] for a in deleted()]
        assert order[-1] == stream_deleted, order  # the consumers' come first
        got = sorted(deleted(), key=lambda a: a[0])
        want = [
            "$JS.EVENT.ADVISORY.CONSUMER.DELETED.SD.D1",
            "$JS.EVENT.ADVISORY.CONSUMER.DELETED.SD.D2",
            stream_deleted,
        ]
        if kind == "reference":
            assert set(a[0] for a in got) <= set(want), got
        else:
            assert [s for s, _, _ in got] == want
        for subject, doc, _ in got:
            if ".CONSUMER." not in subject:
                continue
            assert list(doc) == ["type", "id", "timestamp", "stream", "consumer", "action"]
            assert doc["action"] == "delete"

    with_client(server, main)
