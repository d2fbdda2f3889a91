"""Differential: pull requests, consumer API answers and consumer advisories.

Theory of operation
-------------------
Each scenario is an async function over a ``Probe`` (``test_js_consumer_api_compat``:
a nats-py connection recording a transcript).  It runs against the reference
nats-server 2.15.1 and against trijet (one fresh pair per module, every
scenario on its own streams) and the transcripts must be equal line by line.

Recorded here, beyond what that module covers:

* INFO / LIST / NAMES / DELETE / PAUSE / DURABLE.CREATE answers, including
  ``num_waiting``, ``num_redelivered`` (0 when ``max_deliver`` is 1) and
  whether ``last_active`` is present;
* consumer updates: what may change and the errors for what may not;
* pull status messages (``404 No Messages``, ``408 Request Timeout`` and
  ``408 Requests Pending``, the ``409`` family, ``400 Bad Request``) with
  their headers, for sensible and nonsense requests;
* acks for unknown or already-acked messages (whether they are answered) and
  the consumer state afterwards;
* consumer advisories and ack metrics (``Advisories``): subject and JSON with
  ``id``, ``timestamp``, ``ack_time`` and ``pause_until`` blanked, key order
  and every other field compared.

Waits are bounded and event driven: a pull waits for the messages it must
get, then ``QUIET_S`` for anything extra (the reference sends nothing more,
so that is a check, not a race).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import json
import re
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from tests.compat.test_js_consumer_api_compat import (
    Probe,
    Scenario,
    consumer_body,
    stream_body,
)
from tests.support.aio import noop_cb, run
from tests.support.servers import ServerProcess, js_pair, reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

WAIT_S = 3.0
QUIET_S = 0.3
PAUSE_UNTIL = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).isoformat().replace("+00:00", "Z")
"""One future time for both servers' transcripts."""
_ADV_VOLATILE = re.compile(r'"(id|timestamp|ack_time|pause_until)":("[^"]*"|\d+)')


class Advisories:
    """Records consumer advisories and ack metrics in arrival order."""

    def __init__(self, nc: Any, stream: str) -> None:
        self.nc = nc
        self.stream = stream
        self.got: asyncio.Queue[Any] = asyncio.Queue()

    async def start(self) -> None:
        s = self.stream
        for subject in (
            f"$JS.EVENT.ADVISORY.CONSUMER.*.{s}.*",
            f"$JS.EVENT.METRIC.CONSUMER.*.{s}.*",
        ):
            await self.nc.subscribe(subject, cb=self.got.put)
        await self.nc.flush()

    async def expect(self, p: Probe, n: int) -> None:
        """Record ``n`` advisories (bounded wait), then check nothing else came."""
        for _ in range(n):
            try:
                m = await asyncio.wait_for(self.got.get(), WAIT_S)
            except TimeoutError:
                p.note("advisory: none")
                return
            text = _ADV_VOLATILE.sub(lambda g: f'"{g.group(1)}":"<v>"', m.data.decode())
            p.note(f"advisory {m.subject} {text}")
        await asyncio.sleep(QUIET_S)
        while not self.got.empty():
            m = self.got.get_nowait()
            p.note(f"advisory (extra) {m.subject}")


async def pull_later(p: Probe, stream: str, name: str, body: str) -> asyncio.Queue[Any]:
    """Send a MSG.NEXT whose answers are collected in the background."""
    inbox = p.nc.new_inbox()
    got: asyncio.Queue[Any] = asyncio.Queue()
    await p.nc.subscribe(inbox, cb=got.put)
    await p.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", body.encode(), reply=inbox)
    await p.nc.flush()
    got.inbox = inbox  # type: ignore[attr-defined]
    return got


async def waiting(p: Probe, stream: str, name: str, n: int, asks: int = 200) -> None:
    """Ask (unrecorded) until the consumer counts ``n`` waiting requests: nats-server
    registers a MSG.NEXT after the flush that sent it has returned (one full run saw
    an INFO right after two flushed requests count one), and the turns compared
    need both waiting before the messages come."""
    subject = f"$JS.API.CONSUMER.INFO.{stream}.{name}"
    for _ in range(asks):
        reply = await p.nc.request(subject, b"", timeout=WAIT_S)
        if json.loads(reply.data).get("num_waiting") == n:
            return
    raise AssertionError(f"{stream}.{name}: never {n} waiting requests")


async def collect(p: Probe, label: str, got: asyncio.Queue[Any], expect: int) -> list[Any]:
    """Record what a ``pull_later`` request received: ``expect`` messages, then quiet."""
    msgs = []
    while True:
        wait = WAIT_S if len(msgs) < expect else QUIET_S
        try:
            msgs.append(await asyncio.wait_for(got.get(), wait))
        except TimeoutError:
            break
    p.note(f"{label}: {len(msgs)} message(s)")
    for m in msgs:
        p.note("  " + p.render(m, got.inbox))  # type: ignore[attr-defined]
    return msgs


async def _run(url: str, scenario: Scenario) -> list[str]:
    nc = await nats.connect(url, error_cb=noop_cb)
    probe = Probe(nc)
    try:
        await scenario(probe)
    finally:
        await nc.close()
    return probe.lines


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with js_pair(tmp_path_factory.mktemp("consumer-pull")) as pair:
        yield pair


def compare(pair: tuple[ServerProcess, ServerProcess], scenario: Scenario) -> None:
    ref_lines = run(lambda: _run(pair[0].url, scenario))
    tj_lines = run(lambda: _run(pair[1].url, scenario))
    diff = "\n".join(difflib.unified_diff(ref_lines, tj_lines, "reference", "trijet", lineterm=""))
    assert tj_lines == ref_lines, diff


def _api(stream: str, op: str, name: str = "") -> str:
    return f"$JS.API.CONSUMER.{op}.{stream}" + (f".{name}" if name else "")


# --------------------------------------------------------------------------- API


async def info_scenario(p: Probe) -> None:
    s = "PI"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for i in range(5):
        await p.publish(f"pi.{i % 2}", b"m%d" % i)
    await p.api(
        f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.d1",
        consumer_body(s, durable_name="d1", ack_policy="explicit", max_deliver=1),
    )
    await p.api(
        f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.d2",
        consumer_body(s, durable_name="d2", ack_policy="explicit", ack_wait=100_000_000),
    )
    await p.api(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.d3", consumer_body(s, durable_name="d4"))
    await p.api(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.d3", consumer_body(s))
    await p.info(s, "d1")  # nothing delivered: no last_active
    msgs = await p.pull(s, "d1", '{"batch":3}', expect=3)
    await p.ack(msgs[0])
    await p.ack(msgs[1], b"-NAK")
    await p.info(s, "d1")  # max_deliver 1: num_redelivered reported as 0
    got = await p.pull(s, "d2", '{"batch":2}', expect=2)
    await p.ack(got[0], b"-NAK")
    again = await p.pull(s, "d2", '{"batch":1}', expect=1)
    await p.ack(again[0])
    await p.info(s, "d2")
    waiting = await pull_later(p, s, "d2", '{"batch":10,"expires":2000000000}')
    await collect(p, "d2 waiting", waiting, 2)
    await p.info(s, "d2")  # the request is still waiting: num_waiting 1
    await p.api(_api(s, "NAMES"))
    await p.api(_api(s, "NAMES"), {"offset": 1})
    await p.api(_api(s, "LIST"), {"offset": 2})
    await p.api(_api(s, "NAMES"), '{"offset":"x"}')
    await p.api(_api("NOPE", "NAMES"))
    await p.api(_api("NOPE", "LIST"))
    await p.api(_api(s, "INFO", "nope"))
    await p.api(_api(s, "DELETE", "d1"), "x")
    await p.api(_api(s, "DELETE", "d1"))
    await p.api(_api(s, "DELETE", "d1"))
    await p.api(_api(s, "NAMES"))


async def update_scenario(p: Probe) -> None:
    s = "PU"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    base = {"durable_name": "u", "ack_policy": "explicit", "filter_subject": "pu.a"}
    create = f"$JS.API.CONSUMER.CREATE.{s}.u"
    await p.api(create, consumer_body(s, **base))
    await p.api(create, consumer_body(s, **base))  # identical: no change
    changes: list[dict[str, Any]] = [
        {"description": "now described"},
        {"ack_wait": 5_000_000_000, "max_deliver": 3},
        {"max_ack_pending": 10, "max_waiting": 16},
        {"filter_subject": "pu.b"},
        {"sample_freq": "50%", "headers_only": True},
        {"max_batch": 5, "max_expires": 2_000_000_000, "max_bytes": 1024},
        {"inactive_threshold": 60_000_000_000},
        {"metadata": {"k": "v"}},
        {"ack_policy": "all"},
        {"deliver_policy": "last"},
        {"opt_start_seq": 3, "deliver_policy": "by_start_sequence"},
        {"replay_policy": "original"},
        {"deliver_subject": "push.here"},
        {"max_waiting": 1},
    ]
    for change in changes:
        await p.api(create, consumer_body(s, **{**base, **change}))
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.u",
        {"stream_name": s, "config": {**base, "description": "upd"}, "action": "update"},
    )
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.u",
        {"stream_name": s, "config": {**base, "description": "new"}, "action": "create"},
    )
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.v",
        {"stream_name": s, "config": {**base, "durable_name": "v"}, "action": "update"},
    )
    await p.info(s, "u")


async def pause_scenario(p: Probe) -> None:
    s = "PP"
    adv = Advisories(p.nc, s)
    await adv.start()
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    await p.publish("pp.a")
    await p.api(_api(s, "CREATE", "c"), consumer_body(s, durable_name="c", ack_policy="explicit"))
    await adv.expect(p, 1)
    until = PAUSE_UNTIL
    await p.api(_api(s, "PAUSE", "c"), {"pause_until": until})
    await adv.expect(p, 1)
    await p.info(s, "c")
    await p.pull(s, "c", '{"batch":1,"no_wait":true}', expect=1)
    await p.pull(s, "c", '{"batch":1,"expires":300000000}', expect=1)
    await p.api(_api(s, "PAUSE", "c"), {"pause_until": "2001-01-01T00:00:00Z"})
    await adv.expect(p, 1)
    await p.api(_api(s, "PAUSE", "c"), {"pause_until": until})
    await adv.expect(p, 1)
    await p.api(_api(s, "PAUSE", "c"))  # resume
    await adv.expect(p, 1)
    await p.info(s, "c")
    await p.pull(s, "c", '{"batch":1,"expires":1000000000}', expect=1)
    await p.api(_api(s, "PAUSE", "c"), {"pause_until": 5})
    await p.api(_api(s, "PAUSE", "c"), {"pause_until": "soon"})
    await p.api(_api(s, "PAUSE", "nope"), {"pause_until": until})
    await p.api(_api(s, "DELETE", "c"))
    await adv.expect(p, 1)


# --------------------------------------------------------------------------- pulls


async def status_scenario(p: Probe) -> None:
    s = "PS"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    await p.api(
        _api(s, "CREATE", "lim"),
        consumer_body(
            s,
            name="lim",
            ack_policy="explicit",
            max_batch=3,
            max_expires=1_000_000_000,
            max_bytes=100,
            max_waiting=1,
        ),
    )
    await p.pull(s, "lim", '{"batch":1,"no_wait":true}', expect=1)  # 404
    await p.pull(s, "lim", '{"batch":4}', expect=1)
    await p.pull(s, "lim", '{"batch":1,"expires":2000000000}', expect=1)
    await p.pull(s, "lim", '{"batch":1,"max_bytes":101}', expect=1)
    await p.pull(s, "lim", '{"batch":2,"expires":200000000}', expect=1)  # 408
    await p.publish("ps.big", b"x" * 200)
    await p.pull(s, "lim", '{"batch":1,"max_bytes":50,"expires":500000000}', expect=1)
    await p.pull(s, "lim", '{"batch":1,"max_bytes":100,"expires":500000000}', expect=1)
    await p.info(s, "lim")
    # max_waiting 1: one waiting request, the next is refused
    first = await pull_later(p, s, "lim", '{"batch":3,"expires":1000000000}')
    await p.pull(s, "lim", '{"batch":1,"expires":500000000}', expect=1)
    await p.pull(s, "lim", '{"batch":1,"expires":900000000,"idle_heartbeat":400000000}', expect=0)
    await p.info(s, "lim")
    await collect(p, "first", first, 1)


async def requests_pending_scenario(p: Probe) -> None:
    s = "PQ"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for _ in range(3):
        await p.publish("pq.a")
    await p.api(
        _api(s, "CREATE", "q"), consumer_body(s, name="q", ack_policy="explicit", max_ack_pending=1)
    )
    await p.pull(s, "q", '{"batch":1,"no_wait":true}', expect=1)
    waiting = await pull_later(p, s, "q", '{"batch":5,"expires":1500000000}')
    await p.pull(s, "q", '{"batch":1,"no_wait":true}', expect=1)  # 408 Requests Pending
    await p.pull(s, "q", '{"batch":1,"no_wait":true,"expires":300000000}', expect=1)
    await p.info(s, "q")
    await collect(p, "waiting", waiting, 1)
    await p.api(_api(s, "CREATE", "e"), consumer_body(s, name="e", ack_policy="explicit"))
    await p.pull(s, "e", '{"batch":5,"no_wait":true}', expect=3)
    await p.pull(s, "e", '{"batch":5,"no_wait":true,"expires":300000000}', expect=1)
    await p.api(_api(s, "CREATE", "h"), consumer_body(s, name="h", ack_policy="explicit"))
    got = await pull_later(p, s, "h", '{"batch":5,"expires":1000000000,"idle_heartbeat":400000000}')
    await collect(p, "hb", got, 5)


async def waiting_full_scenario(p: Probe) -> None:
    """max_waiting 1: a request nobody listens for does not hold the list;
    a live one does; a deleted consumer answers its waiting pulls."""
    s = "PW"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    cfg = consumer_body(s, durable_name="w", ack_policy="explicit", max_waiting=1)
    await p.api(_api(s, "CREATE", "w"), cfg)
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{s}.w"
    await p.nc.publish(subject, b'{"batch":1,"expires":10000000000}', reply=p.nc.new_inbox())
    await p.nc.flush()
    await p.pull(s, "w", '{"batch":1,"expires":400000000}', expect=1)  # 408
    await p.info(s, "w")
    waiting = await pull_later(p, s, "w", '{"batch":2,"expires":5000000000}')
    await p.pull(s, "w", '{"batch":1,"expires":400000000}', expect=1)  # 409
    await p.info(s, "w")
    await p.api(_api(s, "DELETE", "w"))
    await collect(p, "deleted", waiting, 1)


async def bad_requests_scenario(p: Probe) -> None:
    s = "PB"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for _ in range(3):
        await p.publish("pb.a")
    await p.api(_api(s, "CREATE", "b"), consumer_body(s, name="b", ack_policy="explicit"))
    for body in (
        '{"batch":"2"}',
        '{"batch":1.5}',
        '{"expires":"1s"}',
        '{"no_wait":"yes"}',
        '{"batch":1,"idle_heartbeat":1000000000,"expires":1000000000}',
        '{"batch":1,"idle_heartbeat":1000000000}',
        "{not json",
        "[1]",
        '{"batch":1,"unknown":true,"no_wait":true}',
        "abc",
        "2",
        '{"batch":-1,"no_wait":true}',
        '{"batch":0,"no_wait":true}',
        '{"batch":1,"expires":1,"no_wait":true}',
        '{"batch":1,"expires":-5,"no_wait":true}',
        '{"batch":1,"max_bytes":-5,"no_wait":true}',
        '{"batch":1,"max_bytes":9999999999999,"no_wait":true}',
    ):
        msgs = await p.pull(s, "b", body, expect=1)
        for m in msgs:
            if m.reply:
                await p.ack(m)
    await p.info(s, "b")
    await p.pull(s, "b", '{"batch":5,"no_wait":true}', expect=1)
    await p.info(s, "b")


async def bad_acks_scenario(p: Probe) -> None:
    s = "PA"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for _ in range(4):
        await p.publish("pa.a")
    await p.api(_api(s, "CREATE", "a"), consumer_body(s, name="a", ack_policy="explicit"))
    msgs = await p.pull(s, "a", '{"batch":2}', expect=2)
    await p.ack(msgs[0])
    await p.ack(msgs[0])  # already acked
    await p.ack(msgs[0], b"-NAK")
    await p.ack(msgs[0], b"+TERM")
    await p.ack(msgs[0], b"+WPI")
    for subj in (
        f"$JS.ACK.{s}.a.1.4.9.1700000000000000000.0",  # never delivered
        f"$JS.ACK.{s}.a.1.99.99.1700000000000000000.0",  # past the stream
        f"$JS.ACK.{s}.a.x.y.z.1.0",
        f"$JS.ACK.{s}.nope.1.1.1.1.0",
    ):
        try:
            r = await p.nc.request(subj, b"+ACK", timeout=0.5)
            p.note(f"ack {subj} -> answered {r.data!r}")
        except nats.errors.TimeoutError:
            p.note(f"ack {subj} -> no answer")
        except nats.errors.NoRespondersError:
            p.note(f"ack {subj} -> no responders")
    await p.ack(msgs[1], b"bogus")
    await p.info(s, "a")
    await p.ack(msgs[1], b"-NAK nonsense")
    again = await p.pull(s, "a", '{"batch":3}', expect=3)
    for m in again:
        await p.ack(m)
    await p.info(s, "a")


async def advisories_scenario(p: Probe) -> None:
    s = "PV"
    adv = Advisories(p.nc, s)
    await adv.start()
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for _ in range(4):
        await p.publish("pv.a", b"<&>")
    await p.api(
        _api(s, "CREATE", "v"),
        consumer_body(
            s,
            name="v",
            ack_policy="explicit",
            max_deliver=2,
            ack_wait=2_000_000_000,
            sample_freq="100%",
        ),
    )
    await adv.expect(p, 1)
    msgs = await p.pull(s, "v", '{"batch":4}', expect=4)
    await p.ack(msgs[0])
    await adv.expect(p, 1)  # ack metric
    await p.ack(msgs[1], b"-NAK")
    await adv.expect(p, 1)
    await p.ack(msgs[2], b"+TERM a <reason> & more")
    await adv.expect(p, 1)
    await p.ack(msgs[3], b"+TERM")
    await adv.expect(p, 1)
    redo = await p.pull(s, "v", '{"batch":1,"expires":1000000000}', expect=1)
    await p.ack(redo[0], b"-NAK")
    await adv.expect(p, 1)
    await p.pull(s, "v", '{"batch":1,"expires":1000000000}', expect=1)  # nothing: max_deliver
    await adv.expect(p, 1)  # MAX_DELIVERIES at the next would-be redelivery
    await p.api(_api(s, "DELETE", "v"))
    await adv.expect(p, 1)
    await p.api(
        _api(s, "CREATE", "w"), consumer_body(s, name="w", ack_policy="all", sample_freq="100")
    )
    await adv.expect(p, 1)
    got = await p.pull(s, "w", '{"batch":2}', expect=2)
    await p.ack(got[1])
    await adv.expect(p, 0)  # ack all: no metric
    await p.api(_api(s, "DELETE", "w"))
    await adv.expect(p, 1)


def test_info_list_names_delete(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, info_scenario)


def test_update(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, update_scenario)


def test_pause(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, pause_scenario)


def test_pull_status(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, status_scenario)


def test_requests_pending(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, requests_pending_scenario)


def test_waiting_list_full(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, waiting_full_scenario)


def test_bad_pull_requests(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, bad_requests_scenario)


def test_bad_acks(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, bad_acks_scenario)


def test_advisories(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, advisories_scenario)


async def ack_runs_scenario(p: Probe) -> None:
    """Acks sent back to back in one write, as clients batch them: runs of
    reply-less acks for two consumers interleaved with a plain publish and a
    malformed ack subject, with ``+ACK``, empty and ``-NAK`` bodies; then one
    ack sync per consumer (answered once the acks before it are applied)."""
    s = "AR"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for i in range(7):
        await p.publish(f"ar.{i}", b"m%d" % i)
    for name in ("a", "b"):
        await p.api(
            _api(s, "CREATE", name),
            consumer_body(s, name=name, ack_policy="explicit", ack_wait=30_000_000_000),
        )
    got = {name: await p.pull(s, name, '{"batch":7}', expect=7) for name in ("a", "b")}
    plain: asyncio.Queue[Any] = asyncio.Queue()
    await p.nc.subscribe("ar_plain.*", cb=plain.put)
    await p.nc.flush()
    a, b = got["a"], got["b"]
    await p.nc.publish(f"$JS.ACK.{s}.a.1.-1.1.0.0", b"+ACK")  # alone: the one-ack path
    await p.nc.flush()
    for m in (a[0], b[0], a[1]):
        await p.nc.publish(m.reply, b"+ACK")
    await p.nc.publish("ar_plain.1", b"+ACK")
    await p.nc.publish(f"$JS.ACK.{s}.a.1.4.4", b"+ACK")  # too few tokens: nothing acked
    for bad in ("-5", "99999999999999999999999", "1_0", "+1", "x"):  # not sequences
        await p.nc.publish(f"$JS.ACK.{s}.a.1.{bad}.1.0.0", b"+ACK")
        await p.nc.publish(f"$JS.ACK.{s}.b.1.1.{bad}.0.0", b"+ACK")
    for m in (b[1], a[2], b[2]):
        await p.nc.publish(m.reply, b"+ACK")
    for m in (a[3], b[3], a[4]):
        await p.nc.publish(m.reply, b"")  # an empty body acks too
    for m in (b[4], a[5], b[5]):
        await p.nc.publish(m.reply, b"-NAK")
    await p.ack(a[6])
    await p.ack(b[6])
    seen = await asyncio.wait_for(plain.get(), WAIT_S)
    p.note(f"plain {seen.subject} {seen.data!r}")
    for name in ("a", "b"):
        await p.info(s, name)
    await p.pull(s, "a", '{"batch":7,"expires":500000000}', expect=1)
    await p.pull(s, "b", '{"batch":7,"expires":500000000}', expect=2)


def test_ack_runs(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, ack_runs_scenario)


async def pull_headers_scenario(p: Probe) -> None:
    """A pull batch mixing messages with and without headers (HMSG and MSG
    ops in one delivery), subjects repeating and not."""
    s = "PH"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for i in range(6):
        headers = {"Nats-Msg-Id": f"id{i}", "X-K": "v" * i} if i % 2 else None
        msg = await p.nc.request(f"ph.{i % 3}", b"m%d" % i, headers=headers, timeout=WAIT_S)
        p.note(f"pub -> {msg.data.decode()}")
    await p.api(_api(s, "CREATE", "c"), consumer_body(s, name="c", ack_policy="explicit"))
    await p.pull(s, "c", '{"batch":6}', expect=6)


def test_pull_headers(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, pull_headers_scenario)


async def turns_scenario(p: Probe) -> None:
    """Requests waiting together take turns, one message each (nats-server's
    ``waitQueue.pop``), not one request's batch after the other's.  (Messages
    arriving together are handed out in the same turns -- ``test_pullturns``
    -- but not comparably: their ack subjects' pending counts depend on what
    was stored when; and nats-server does not serve the requests that waited
    on a paused consumer when it resumes.)"""
    s = "PT"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    await p.api(_api(s, "CREATE", "c"), consumer_body(s, durable_name="c", ack_policy="explicit"))
    a = await pull_later(p, s, "c", '{"batch":4,"expires":5000000000}')
    b = await pull_later(p, s, "c", '{"batch":2,"expires":5000000000}')
    await waiting(p, s, "c", 2)
    await p.info(s, "c")  # num_waiting 2
    for i in range(6):
        await p.publish("pt.a", b"one%d" % i)
    for label, got, n in (("a", a, 4), ("b", b, 2)):
        msgs = await collect(Probe(p.nc), label, got, n)  # pending counts race: left out
        p.note(f"{label}: " + " ".join(m.data.decode() for m in msgs))
    await p.info(s, "c")


def test_waiting_requests_take_turns(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, turns_scenario)


async def one_inbox_scenario(p: Probe) -> None:
    """Two requests answered on one wildcard inbox subscription (how a range
    reader keeps fetches outstanding), for an ack-none and an explicit-ack
    consumer: the subscription sees every message once, in stream order, with
    its pending count -- the six stored ones, then two published one at a time
    while both requests (or the second alone: whether the reference serves two
    requests sent together in turns races, so ``num_waiting`` is only read at
    the end) still wait."""
    s = "PO"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    for i in range(6):
        await p.publish(f"po.{i % 2}", b"s%d" % i)
    queues: dict[str, asyncio.Queue[Any]] = {}
    for name, policy in (("n", "none"), ("e", "explicit")):
        await p.api(_api(s, "CREATE", name), consumer_body(s, durable_name=name, ack_policy=policy))
        prefix = p.nc.new_inbox()
        queues[name] = asyncio.Queue()
        await p.nc.subscribe(prefix + ".*", cb=queues[name].put)
        nxt = f"$JS.API.CONSUMER.MSG.NEXT.{s}.{name}"
        body = b'{"batch":4,"expires":3000000000}'
        await p.nc.publish(nxt, body, reply=prefix + ".1")
        await p.nc.publish(nxt, body, reply=prefix + ".2")
        await p.nc.flush()

    async def take(label: str, want: int) -> None:
        for name, got in queues.items():
            msgs = []
            for _ in range(want):
                try:
                    msgs.append(await asyncio.wait_for(got.get(), WAIT_S))
                except TimeoutError:
                    break
            p.note(f"{name} {label}: {len(msgs)} message(s)")
            for m in msgs:
                p.note("  " + p.render(m, ""))

    await take("stored", 6)
    for i in range(2):
        await p.publish(f"po.{i}", b"late%d" % i)
        await take(f"late{i}", 1)
    for name in queues:
        await p.info(s, name)


def test_one_inbox_two_requests(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, one_inbox_scenario)
