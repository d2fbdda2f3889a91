"""Differential: when a message runs out of deliveries, and acks on odd subjects.

Theory of operation
-------------------
Scenarios are async functions over a ``Probe`` (see
``test_js_consumer_pull_compat``), run on the reference nats-server 2.15.1
and on trijet; the transcripts must be equal line by line.

Max deliveries (nats-server's ``getNextMsg`` / ``hasMaxDeliveries``): when
the ack wait of a message on its ``max_deliver``-th delivery runs out, the
message is queued for redelivery like any other; it is given up -- the
``MAX_DELIVERIES`` advisory, no longer pending -- when it is taken off that
queue: for a push consumer right away, for a pull consumer only when the next
pull request arrives (which then gets the next message, if any).  Until then
ConsumerInfo still counts it (``num_ack_pending``, ``num_redelivered``, the
ack floor behind it).  ``max_deliver`` 1 is the exception: the timer check
gives it up at the timeout itself.  A given-up message stays in a workqueue
or interest stream.  The transcripts record the advisories in arrival order
relative to the pulls (``Advisories.expect(p, 0)`` after the timeout shows
that nothing came then), the consumer figures and the stream state.

One deliberate difference is masked: 2.15.1 leaves the ack floor behind a
given-up message until something else moves it; trijet moves it, as
nats-server does since "[FIXED] Move ack floor if MaxDeliver exceeded"
(``_figures(floor=False)`` after a give-up; the floors agree again once the
other pending messages are acked).

Ack subjects: nats-server's consumer subscribes ``$JS.ACK.<stream>.<consumer>``
followed by exactly five tokens, so a request on any other shape (too few or
too many tokens, an empty token, an unknown stream or consumer) finds no
subscriber and gets 503 no responders (nats-py raises ``NoRespondersError``);
a non-numeric token reads as -1 (uint64 max): as the stream sequence that is
beyond anything delivered (ignored, unanswered), as the consumer sequence the
ack still acks by stream sequence.  Each case gets its own consumer with two
messages delivered, so its effect shows in the figures recorded after it.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import nats
import pytest

from tests.compat.test_js_consumer_api_compat import Probe, consumer_body, stream_body
from tests.compat.test_js_consumer_pull_compat import Advisories, compare, pair  # noqa: F401
from tests.support.servers import ServerProcess, reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

ACK_WAIT_NS = 500_000_000
PAST_ACK_WAIT_S = 0.9
"""How long a scenario lets an ack wait run out (the timer fires at 0.5 s)."""
API_TIMEOUT_S = 2.0


async def _figures(p: Probe, s: str, c: str, label: str, *, floor: bool = True) -> None:
    msg = await p.nc.request(f"$JS.API.CONSUMER.INFO.{s}.{c}", b"", timeout=API_TIMEOUT_S)
    doc: dict[str, Any] = json.loads(msg.data)
    keys = ["delivered", "num_ack_pending", "num_redelivered", "num_pending", "num_waiting"]
    if floor:
        keys.insert(1, "ack_floor")
    parts = []
    for k in keys:
        v = doc.get(k)
        if isinstance(v, dict):
            v = f"{v.get('consumer_seq')}/{v.get('stream_seq')}"
        parts.append(f"{k}={v}")
    p.note(f"{label}: " + " ".join(parts))


async def _redelivery_pull(p: Probe, retention: str) -> None:
    s = f"MD{retention[0].upper()}"
    subj = f"{s.lower()}.a"
    adv = Advisories(p.nc, s)
    await adv.start()
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s, retention=retention))
    cfg = {"durable_name": "c", "ack_policy": "explicit", "ack_wait": ACK_WAIT_NS, "max_deliver": 2}
    await p.api(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.c", consumer_body(s, **cfg))
    await adv.expect(p, 1)  # created
    for _ in range(3):
        await p.publish(subj)
    msgs = await p.pull(s, "c", '{"batch":3}', expect=3)
    # the pending counts of this first batch depend on timing on both servers
    # (nats-server counts new messages asynchronously: it has reported 1, 0, 0
    # for three just-published messages; trijet 2, 1, 0): not compared
    p.lines[-3:] = [re.sub(r"<ts>\.\d+ ", "<ts>.<pending> ", line) for line in p.lines[-3:]]
    await p.ack(msgs[1])
    await p.ack(msgs[2])
    await asyncio.sleep(PAST_ACK_WAIT_S)
    await _figures(p, s, "c", "after the first ack wait")
    await p.pull(s, "c", '{"batch":1}', expect=1)  # the second and last delivery
    await asyncio.sleep(PAST_ACK_WAIT_S)
    await adv.expect(p, 0)  # its ack wait ran out: no advisory yet
    await _figures(p, s, "c", "after the last ack wait")
    await p.state(s)
    await p.publish(subj)
    nxt = await p.pull(s, "c", '{"batch":1}', expect=1)  # gives 1 up, gets 4
    await adv.expect(p, 1)  # MAX_DELIVERIES, now
    await _figures(p, s, "c", "after the next pull", floor=False)
    await p.state(s)  # workqueue / interest: the given-up message stays
    await p.ack(nxt[0])
    await _figures(p, s, "c", "all acked")
    await p.state(s)


async def _one_delivery(p: Probe) -> None:
    s = "MDO"
    adv = Advisories(p.nc, s)
    await adv.start()
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
    cfg = {"durable_name": "c", "ack_policy": "explicit", "ack_wait": ACK_WAIT_NS, "max_deliver": 1}
    await p.api(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.c", consumer_body(s, **cfg))
    await adv.expect(p, 1)
    for _ in range(2):
        await p.publish("mdo.a")
    msgs = await p.pull(s, "c", '{"batch":2}', expect=2)
    await p.ack(msgs[1])
    await adv.expect(p, 1)  # MAX_DELIVERIES at the timeout itself, no pull needed
    await _figures(p, s, "c", "after the ack wait", floor=False)
    await p.pull(s, "c", '{"batch":1,"no_wait":true}', expect=1)  # 404: nothing left
    await adv.expect(p, 0)


async def _push(p: Probe) -> None:
    s = "MDP"
    adv = Advisories(p.nc, s)
    await adv.start()
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s, retention="workqueue"))
    got: list[Any] = []

    async def keep_first(m: Any) -> None:
        got.append(m)
        if m.reply.split(".")[5] != "1":  # stream seq 1 is never acked
            await p.nc.publish(m.reply, b"+ACK")

    await p.nc.subscribe("d.mdp", cb=keep_first)
    cfg = {
        "durable_name": "c",
        "deliver_subject": "d.mdp",
        "ack_policy": "explicit",
        "ack_wait": ACK_WAIT_NS,
        "max_deliver": 2,
    }
    for _ in range(2):
        await p.publish("mdp.a")
    await p.api(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.c", consumer_body(s, **cfg))
    await adv.expect(p, 1)  # created
    await adv.expect(p, 1)  # MAX_DELIVERIES right after the second ack wait
    p.note("deliveries (dc.sseq.dseq): " + " ".join(".".join(m.reply.split(".")[4:7]) for m in got))
    await _figures(p, s, "c", "given up", floor=False)
    await p.state(s)


@pytest.mark.parametrize("retention", ["limits", "workqueue", "interest"])
def test_max_deliveries_pull_given_up_at_the_next_pull(
    pair: tuple[ServerProcess, ServerProcess],  # noqa: F811
    retention: str,
) -> None:
    async def scenario(p: Probe) -> None:
        await _redelivery_pull(p, retention)

    compare(pair, scenario)


def test_max_deliver_1_given_up_at_the_timeout(
    pair: tuple[ServerProcess, ServerProcess],  # noqa: F811
) -> None:
    compare(pair, _one_delivery)


def test_max_deliveries_push_given_up_after_the_timeout(
    pair: tuple[ServerProcess, ServerProcess],  # noqa: F811
) -> None:
    compare(pair, _push)


# --------------------------------------------------------------------------- ack subjects

AGREE = [
    "{s}.nope.1.1.1.1.0",  # unknown consumer
    "NOPE.{c}.1.1.1.1.0",  # unknown stream
    "_.x.{s}.{c}.1.1.1.1.0",  # 11 tokens, the v2 shape with a foreign account hash
    "{s}.{c}.x.y.z.1.0",  # non-numeric sequences: beyond what was delivered
    "{s}.{c}.1.z.1.1.0",  # non-numeric stream sequence
    "{s}.{c}.z.1.1.1.0",  # non-numeric delivery count: still an ack
    "{s}.{c}.1.1.1.z.z",  # non-numeric timestamp and pending: still an ack
    "{s}.{c}.1.1.1.1.0",  # well-formed
    "{s}.{c}.1.1",  # too few tokens: no listener (503 to a request)
    "{s}.{c}.1.1.1.1",
    "{s}.{c}.1.1.1.1.0.0",  # too many
    "{s}.{c}.1.1.1.1.0.0.0.0",
    # an empty token: nats-server's sublist matches it against no subscription
    "{s}.{c}.1.1.1..0",
    "{s}.{c}.1.1.z.1.0",  # non-numeric consumer sequence: acks by stream sequence
]


async def _deliver_two(p: Probe, s: str, c: str) -> None:
    """Pull two messages without recording them (they are not the point)."""
    inbox = p.nc.new_inbox()
    sub = await p.nc.subscribe(inbox, max_msgs=2)
    await p.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{c}", b'{"batch":2}', reply=inbox)
    for _ in range(2):
        await sub.next_msg(timeout=API_TIMEOUT_S)


def _ack_subjects(cases: list[str], prefix: str) -> Any:
    async def scenario(p: Probe) -> None:
        s = f"AS{prefix}"
        await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s))
        for _ in range(2):
            await p.publish(f"{s.lower()}.a")
        n = 0
        for with_reply in (True, False):
            for case in cases:
                n += 1
                c = f"c{n}"
                cfg = {"durable_name": c, "ack_policy": "explicit"}
                await p.nc.request(
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.{c}",
                    json.dumps(consumer_body(s, **cfg)).encode(),
                    timeout=API_TIMEOUT_S,
                )
                await _deliver_two(p, s, c)
                subject = "$JS.ACK." + case.format(s=s, c=c)
                if with_reply:
                    try:
                        r = await p.nc.request(subject, b"+ACK", timeout=0.5)
                        res = f"answered {r.data!r}"
                    except nats.errors.NoRespondersError:
                        res = "no responders"
                    except nats.errors.TimeoutError:
                        res = "no answer"
                else:
                    await p.nc.publish(subject, b"+ACK")
                    await p.nc.flush()
                    res = "published"
                    await asyncio.sleep(0.1)  # an ack would be applied by then
                p.note(f"{'request' if with_reply else 'publish'} {case}: {res}")
                await _figures(p, s, c, "  then")

    return scenario


def test_ack_subjects_that_agree(pair: tuple[ServerProcess, ServerProcess]) -> None:  # noqa: F811
    compare(pair, _ack_subjects(AGREE, "A"))
