"""Origins in another JetStream domain: read through a push consumer created over its API.

Theory of operation
-------------------
A mirror or source whose ``external.api`` names another domain cannot read
the origin's store; it asks the far side for a consumer, as nats-server's
``setupMirrorConsumer``/``trySetupSourceConsumer`` do, and feeds on what
that consumer delivers.  ``ApiOrigin`` implements the ``Origin`` protocol of
``cluster.sourcing`` over a ``Messaging`` capability (subscribe, publish)
that the node layer provides; this module never imports ``node``.

*Setup* (``start``): subscribe a fresh deliver subject
(``<external.deliver>.M.<token>``/``….S.<token>``, or ``$JS.M.<token>``/
``$JS.S.<token>`` without a deliver prefix), then send
``<api>.CONSUMER.CREATE.<stream>[.<name>.<filter>]`` (with
``Nats-Required-Api-Level`` 5 and ``Nats-Stream-Identity`` for a source, 4
for a mirror, lowered on a 10185 answer as nats-server does) and nats-server's
request: ephemeral push consumer, ``ack_policy: none``, ``max_deliver`` 1,
``ack_wait`` 22 h, flow control, 1 s idle heartbeats, 10 s
``inactive_threshold``, ``direct``, the filters of the mirror/source and a
start (``by_start_sequence`` at the next needed sequence, ``by_start_time``,
or ``all``).  The name is ``JS_MIRROR_<hash>_<token>``/``JS_SRC_<hash>_<token>``
-- the unique form nats-server falls back to for origins without
server-named sourcing consumers -- so a consumer left behind by an earlier
attempt (it dies after ``inactive_threshold`` without interest) never
collides with a new one, on trijet and nats-server origins alike.  The
answer gives the consumer's name, ``delivered.stream_seq`` (the sequence
before the first delivery) and, in the ``Nats-Stream-Identity`` header, the
origin's identity; an origin that does not send it is asked with
``STREAM.INFO`` (identity = hash of ``created``).  No answer within
``CREATE_TIMEOUT_S`` raises ``OriginUnavailable`` without an error (the far
side is unreachable: ``active`` stays as it is); an error answer raises it
with that error (``StreamInfo`` shows it); nats-server's identity-mismatch
error (10225) raises ``OriginRecreated``.

*Delivery* (``read``): the subscription callback only queues (bounded by
``RECV_BYTES_MAX``, above the origin's flow-control window; beyond it a message is dropped, which the sequence check
turns into a restart).  ``read`` drains the queue in order:

* a message's ack reply ``$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.
  <ts>.<pending>`` (or the 2.10+ form with domain and account hash) gives
  the origin sequence, timestamp and pending count (``lag`` is
  ``pending - 1``, as nats-server reports it).  Messages of an older
  consumer and redeliveries are ignored; a consumer sequence that is not the
  next one means something was lost: ``OriginRetry`` (the feed recreates
  the consumer from its next needed sequence).
* ``100 Idle Heartbeat`` whose ``Nats-Last-Consumer`` is not the last
  consumer sequence seen: ``OriginRetry``; with ``Nats-Consumer-Stalled``
  the named flow-control subject is answered.
* ``100 FlowControl Request``: answered (``Nats-Last-Consumer``/
  ``Nats-Last-Stream`` headers, as nats-server) once everything delivered
  before it has been handed to the feed *and* proposed -- the batch ends
  at the request and the answer goes out at the next ``read`` -- so the
  origin's window bounds what waits here.
* nothing at all for ``STALL_S`` (ten heartbeats): ``OriginRetry``.

Every message and heartbeat counts as contact (``last_contact_ns``: the
``active`` figure of StreamInfo).  ``close`` drops the subscription; the
abandoned consumer expires on the far side.
"""

from __future__ import annotations

import json
import logging
import random
import string
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from cluster.model import StreamSource
from cluster.origins import (
    BATCH_BYTES_MAX,
    OriginRecreated,
    OriginRetry,
    OriginUnavailable,
    StartAt,
)
from cluster.source_headers import go_hash, parse_rfc3339_ns, rfc3339_ns, stream_identity
from store.api import StoredMsg

__all__ = [
    "AckInfo",
    "ApiOrigin",
    "Messaging",
    "MsgHandler",
    "OriginRecreated",
    "OriginRetry",
    "OriginUnavailable",
    "consumer_request",
    "parse_ack_reply",
]

log = logging.getLogger(__name__)

#: handler(subject, reply, headers, payload); called synchronously, must not block
MsgHandler = Callable[[str, str | None, bytes | None, bytes], None]

CREATE_TIMEOUT_S = 5.0
"""Wait for a consumer create answer (nats-server waits 30 s)."""
HEARTBEAT_NS = 1_000_000_000
"""Idle heartbeat asked of the origin's consumer (nats-server ``sourceHealthHB``)."""
STALL_S = 10.0
"""Silence after which the consumer is recreated (``sourceHealthCheckInterval``)."""
INACTIVE_THRESHOLD_NS = 10_000_000_000
"""An abandoned consumer is removed by the origin after this."""
ACK_WAIT_NS = 22 * 3600 * 1_000_000_000
RECV_BYTES_MAX = 2 * 32 * 1024 * 1024
"""Bytes (subject, reply, headers, payload) queued between the subscription and the feed:
twice the largest flow-control window an origin keeps unanswered (nats-server's
``JsFlowControlMaxPending``, 32 MiB), so a feed slower than its origin is held back by flow
control, never by a drop; beyond it a message is dropped and the gap restarts."""
ERR_IDENTITY_MISMATCH = 10225
ERR_API_LEVEL = 10185
_TOKEN_ALPHABET = string.ascii_letters + string.digits
_CONTROL = b"NATS/1.0 100 "


class Messaging(Protocol):
    """Core NATS inside the server: what a remote origin needs of the node."""

    def subscribe(self, subject: str, handler: MsgHandler) -> object:
        """Subscribe ``subject``; returns a handle for ``unsubscribe``."""
        ...

    def unsubscribe(self, handle: object) -> None:
        """Drop a subscription made by ``subscribe``."""
        ...

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: bytes | None = None,
    ) -> None:
        """Publish a message on the server's behalf."""
        ...


@dataclass(frozen=True, slots=True)
class AckInfo:
    """What a JetStream ack reply subject says about a delivery."""

    stream: str
    consumer: str
    delivered: int
    stream_seq: int
    consumer_seq: int
    ts_ns: int
    pending: int


def parse_ack_reply(reply: str) -> AckInfo | None:
    """Parse ``$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>``
    or the form with ``<domain>.<account hash>`` after ``ACK`` and a token at
    the end; None if it is neither."""
    t = reply.split(".")
    if len(t) < 9 or t[0] != "$JS" or t[1] != "ACK":
        return None
    off = 0 if len(t) == 9 else 2
    if len(t) != 9 and len(t) < 11:
        return None
    try:
        nums = [int(x) for x in t[4 + off : 9 + off]]
    except ValueError:
        return None
    if len(nums) != 5:
        return None
    return AckInfo(t[2 + off], t[3 + off], *nums)


def _token(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choice(_TOKEN_ALPHABET) for _ in range(n))


def consumer_request(
    src: StreamSource,
    *,
    mirror: bool,
    name: str,
    deliver: str,
    at: StartAt,
    metadata: dict[str, str],
) -> tuple[str, dict[str, Any]]:
    """The consumer create request nats-server sends for a mirror/source.

    Returns ``(subject after the API prefix, body)``; the subject is
    ``CONSUMER.CREATE.<stream>.<name>.<filter>`` when there is one filter.
    """
    cfg: dict[str, Any] = {"name": name}
    if at.seq:
        cfg["deliver_policy"] = "by_start_sequence"
        cfg["opt_start_seq"] = at.seq
    elif at.time_ns:
        cfg["deliver_policy"] = "by_start_time"
        cfg["opt_start_time"] = rfc3339_ns(at.time_ns)
    else:
        cfg["deliver_policy"] = "all"
    cfg["ack_policy"] = "none"
    cfg["ack_wait"] = ACK_WAIT_NS
    cfg["max_deliver"] = 1
    filt = src.filter_subject
    filts = [t.src or ">" for t in src.subject_transforms]
    if not filt and len(filts) == 1:
        filt, filts = filts[0], []
    if filt:
        cfg["filter_subject"] = filt
    if filts:
        cfg["filter_subjects"] = filts
    cfg["replay_policy"] = "instant"
    cfg["flow_control"] = True
    cfg["deliver_subject"] = deliver
    cfg["idle_heartbeat"] = HEARTBEAT_NS
    cfg["inactive_threshold"] = INACTIVE_THRESHOLD_NS
    cfg["num_replicas"] = 0
    cfg["direct"] = True
    cfg["metadata"] = dict(sorted(metadata.items()))
    subject = f"CONSUMER.CREATE.{src.name}"
    if filt:
        subject += f".{name}.{filt}"
    return subject, {"stream_name": src.name, "config": cfg, "action": ""}


def _header(hdr: bytes, key: bytes) -> str | None:
    """Value of header ``key`` in a raw header block (first occurrence)."""
    for line in hdr.split(b"\r\n")[1:]:
        k, sep, v = line.partition(b":")
        if sep and k.strip().lower() == key.lower():
            return v.strip().decode("utf-8", "replace")
    return None


def _api_subject(api: str, rest: str) -> str:
    return f"{api}.{rest}".replace("..", ".")


class ApiOrigin:
    """An origin stream in another domain, read through a push consumer.

    Args:
        messaging: core NATS inside the server.
        src: the ``mirror``/``sources`` entry (with ``external``).
        target: the mirror/sourcing stream's name (consumer metadata).
        mirror: feeding a mirror (``JS_MIRROR_``, ``.M.``) or a source.
        domain: this server's JetStream domain (consumer metadata).
        identity: the origin identity the feed's position belongs to ("" if
            none); sent as ``Nats-Stream-Identity`` for sources.
        rng: randomness for tokens.
    """

    def __init__(
        self,
        messaging: Messaging,
        src: StreamSource,
        *,
        target: str,
        mirror: bool,
        domain: str = "",
        identity: str = "",
        rng: random.Random | None = None,
    ) -> None:
        assert src.external is not None
        self._msg = messaging
        self._src = src
        self._api = src.external.api
        self._deliver_prefix = src.external.deliver
        self._target = target
        self._mirror = mirror
        self._domain = domain
        self._rng = rng or random.Random()
        self._known_identity = identity
        kind = "mirror" if mirror else "src"
        self._metadata = {f"_nats.{kind}.stream": target, f"_nats.{kind}.acc": "$G"}
        if domain:
            self._metadata[f"_nats.{kind}.domain"] = domain
        self._base_name = ("JS_MIRROR_" if mirror else "JS_SRC_") + go_hash(
            f"{domain}:{target}:{src.name}:{self._api}:{src.filter_subject}"
        )
        #: the origin's identity (known once ``start`` returned)
        self.identity = ""
        #: wall clock of the last message or heartbeat received (ns; 0 = none)
        self.last_contact_ns = 0
        self.consumer = ""
        self._sub: object | None = None
        self._queue: deque[tuple[str, str | None, bytes | None, bytes]] = deque()
        self._qbytes = 0  # the queue's size (RECV_BYTES_MAX)
        self._wake = trio.Event()
        self._dseq = 0
        self._sseq = 0
        self._lag = 0
        self._fc_reply: str | None = None
        self._retry_next = False

    # -- setup ------------------------------------------------------------------

    async def start(self, at: StartAt) -> int:
        """Create a consumer starting at ``at``; returns the origin sequence
        before its first delivery.

        Raises:
            OriginUnavailable, OriginRecreated.

        Cancellation: the subscription is dropped; a consumer created on the
        far side expires there.
        """
        self.close()
        deliver = self._deliver_subject()
        self._clear()
        self._dseq = self._sseq = 0
        self._fc_reply = None
        self._retry_next = False
        name = f"{self._base_name}_{_token(self._rng)}"
        rest, body = consumer_request(
            self._src,
            mirror=self._mirror,
            name=name,
            deliver=deliver,
            at=at,
            metadata=self._metadata,
        )
        self._sub = self._msg.subscribe(deliver, self._on_delivery)
        try:
            rhdr, info = await self._create(
                _api_subject(self._api, rest), json.dumps(body).encode()
            )
            identity = _header(rhdr, b"Nats-Stream-Identity") if rhdr else None
            if not identity:
                identity = await self._identity_from_info()
        except BaseException:
            self.close()
            raise
        self.identity = identity
        self.consumer = str(info.get("name", name))
        delivered = info.get("delivered") or {}
        sseq = int(delivered.get("stream_seq", 0))
        self._sseq = sseq
        self.last_contact_ns = time.time_ns()
        log.info(
            "event=remote_consumer_created stream=%s origin=%s api=%s consumer=%s start=%d",
            self._target,
            self._src.name,
            self._api,
            self.consumer,
            sseq + 1,
        )
        return sseq

    async def _create(self, subject: str, body: bytes) -> tuple[bytes | None, dict[str, Any]]:
        """Send the create request at the highest API level the origin takes.

        Like nats-server: a source states level 5 with the identity its
        position belongs to, a mirror level 4; an origin that answers
        10185 (level not supported) is asked again one level lower, last
        without the header.
        """
        levels: list[str | None] = [None, "4"]
        if not self._mirror:
            levels.append("5")
        while True:
            level = levels.pop()
            hdr = None
            if level is not None:
                text = f"NATS/1.0\r\nNats-Required-Api-Level: {level}\r\n"
                if level == "5":
                    text += f"Nats-Stream-Identity: {self._known_identity}\r\n"
                hdr = (text + "\r\n").encode()
            rhdr, answer = await self._request(subject, body, hdr)
            try:
                return rhdr, self._check_answer(answer)
            except OriginUnavailable as e:
                if not levels or e.error is None or e.error["err_code"] != ERR_API_LEVEL:
                    raise

    def _deliver_subject(self) -> str:
        tag = ".M" if self._mirror else ".S"
        if self._deliver_prefix:
            base = (self._deliver_prefix + tag).replace("..", ".")
        else:
            base = "$JS" + tag
        return f"{base}.{_token(self._rng)}"

    def _check_answer(self, answer: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(answer)
        except (ValueError, RecursionError):  # an origin's answer is untrusted input
            raise OriginUnavailable(
                {"code": 500, "err_code": 10025, "description": "invalid JSON"}
            ) from None
        if not isinstance(doc, dict):
            raise OriginUnavailable(None)
        err = doc.get("error")
        if isinstance(err, dict):
            if err.get("err_code") == ERR_IDENTITY_MISMATCH:
                raise OriginRecreated(err.get("description", ""))
            raise OriginUnavailable(
                {
                    "code": err.get("code", 500),
                    "err_code": err.get("err_code", 0),
                    "description": err.get("description", ""),
                }
            )
        if not isinstance(doc.get("config"), dict):
            raise OriginUnavailable(None)
        return doc

    async def _identity_from_info(self) -> str:
        """The origin's identity from ``STREAM.INFO`` (``created``), "" if unknown."""
        try:
            _, answer = await self._request(
                _api_subject(self._api, f"STREAM.INFO.{self._src.name}"), b"", None
            )
            created = json.loads(answer).get("created", "")
            return stream_identity(parse_rfc3339_ns(created)) if created else ""
        except (OriginUnavailable, ValueError, AttributeError, RecursionError):
            return ""

    async def _request(
        self, subject: str, body: bytes, headers: bytes | None
    ) -> tuple[bytes | None, bytes]:
        """One request/answer through a fresh inbox.

        Raises:
            OriginUnavailable: no answer in ``CREATE_TIMEOUT_S``.
        """
        inbox = f"$JSC.R.{_token(self._rng)}"
        got: list[tuple[bytes | None, bytes]] = []
        done = trio.Event()

        def on_answer(subject: str, reply: str | None, hdr: bytes | None, payload: bytes) -> None:
            if not got:
                got.append((hdr, payload))
                done.set()

        sub = self._msg.subscribe(inbox, on_answer)
        try:
            self._msg.publish(subject, body, reply=inbox, headers=headers)
            with trio.move_on_after(CREATE_TIMEOUT_S):
                await done.wait()
        finally:
            self._msg.unsubscribe(sub)
        if not got:
            raise OriginUnavailable(None)
        return got[0]

    # -- delivery -----------------------------------------------------------------

    def _on_delivery(
        self, subject: str, reply: str | None, hdr: bytes | None, payload: bytes
    ) -> None:
        size = len(subject) + len(payload) + (len(reply) if reply else 0) + (len(hdr) if hdr else 0)
        if self._qbytes + size > RECV_BYTES_MAX:
            self._retry_next = True  # lost: the sequence check restarts the consumer
            return
        self._qbytes += size
        self._queue.append((subject, reply, hdr, payload))
        self._wake.set()

    async def read(self, after: int, max_msgs: int) -> list[StoredMsg]:
        """See ``Origin.read``: the next deliveries (at least one; at most ``max_msgs``
        and, past the first, ``BATCH_BYTES_MAX`` bytes: one proposal).

        Raises:
            OriginRetry: a gap, a silent consumer or an overflow.
        """
        self._answer_fc()
        out: list[StoredMsg] = []
        size = 0
        queue = self._queue
        while True:
            if self._retry_next and not queue:
                raise OriginRetry("delivery lost")
            if queue:
                self.last_contact_ns = time.time_ns()  # every message and heartbeat counts
            while queue and len(out) < max_msgs and size < BATCH_BYTES_MAX:
                subject, reply, hdr, payload = queue.popleft()
                n = len(subject) + len(payload) + (len(reply) if reply else 0)
                if hdr:
                    n += len(hdr)
                self._qbytes -= n
                if not payload and hdr and hdr.startswith(_CONTROL):
                    if reply:  # flow control: answer once the batch is proposed
                        self._fc_reply = reply
                        if out:
                            return out
                        self._answer_fc()
                        continue
                    self._heartbeat(hdr)
                    continue
                m = self._message(subject, reply, hdr, payload) if reply else None
                if m is not None:
                    out.append(m)
                    size += n
            if out:
                return out
            if self._retry_next:
                raise OriginRetry("delivery lost")
            self._wake = trio.Event()
            if queue:
                continue
            with trio.move_on_after(STALL_S) as cs:
                await self._wake.wait()
            if cs.cancelled_caught:
                raise OriginRetry("stalled")

    def _message(
        self, subject: str, reply: str, hdr: bytes | None, payload: bytes
    ) -> StoredMsg | None:
        # parse_ack_reply inlined (once per message): the consumer and the delivery
        # count are checked before the numbers are converted
        t = reply.split(".")
        k = len(t)
        off = 0 if k == 9 else 2
        if (k != 9 and k < 11) or t[0] != "$JS" or t[1] != "ACK":
            return None
        if t[3 + off] != self.consumer:
            return None  # not ours, an older consumer's
        try:
            delivered, sseq, dseq, ts_ns, pending = map(int, t[4 + off : 9 + off])
        except ValueError:
            return None
        if delivered > 1:
            return None  # a redelivery
        if sseq <= self._sseq:
            if dseq == self._dseq + 1:
                self._dseq += 1
            return None
        if dseq != self._dseq + 1:
            self._retry_next = True
            self._clear()
            return None
        self._dseq = dseq
        self._sseq = sseq
        self._lag = pending - 1 if pending > 0 else 0
        return StoredMsg(sseq, subject, hdr or b"", payload, ts_ns)

    def _clear(self) -> None:
        self._queue.clear()
        self._qbytes = 0

    def _heartbeat(self, hdr: bytes) -> None:
        last = _header(hdr, b"Nats-Last-Consumer")
        if last is not None and last.isdigit() and int(last) > 0 and int(last) != self._dseq:
            self._retry_next = True
            self._clear()
            return
        stalled = _header(hdr, b"Nats-Consumer-Stalled")
        if stalled:
            self._msg.publish(stalled, b"")

    def _answer_fc(self) -> None:
        reply, self._fc_reply = self._fc_reply, None
        if reply:
            hdr = (
                f"NATS/1.0\r\nNats-Last-Consumer: {self._dseq}\r\n"
                f"Nats-Last-Stream: {self._sseq}\r\n\r\n"
            )
            self._msg.publish(reply, b"", headers=hdr.encode())

    def lag(self, after: int) -> int:
        """The pending count of the last delivery, minus one (nats-server's ``lag``)."""
        return self._lag

    def close(self) -> None:
        """Drop the deliver subscription (the far consumer then expires)."""
        if self._sub is not None:
            self._msg.unsubscribe(self._sub)
            self._sub = None
