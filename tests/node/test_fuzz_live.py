"""Fuzz a live trijet server with random and mutated protocol bytes (hypothesis).

Theory of operation: one server per module (``max_payload: 512`` so oversized
declarations fail fast instead of leaving the parser waiting), a fresh
connection per example.  Each example is a valid CONNECT followed by a few
operations taken from a vocabulary of valid ops and mutated — truncated, a bit
flipped, a CRLF inserted, the size replaced by a huge/negative/odd value, the
verb replaced — or plain random bytes; the input always ends with a newline,
then ``PING`` follows.  The outcome is read by ``RawClient.exchange``: the PONG
(connection open), a close, or — when a mutated size left the server waiting
for payload bytes that never come — the bounded deadline ("waiting").

After every example: a fresh connection still does SUB/PUB/receive; a closed
fuzzed connection saw only fatal ``-ERR`` texts nats-server uses; an open one saw
only non-fatal ``-ERR`` texts and still answers PING.  The differential variant
sends the same inputs to the reference nats-server and compares the ``-ERR``
lines and the outcome.

Inputs never contain a PING verb of their own (so the PONG we wait for is ours).
The seed is printed; replay with ``TRIJET_FUZZ_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from tests.support import RawClient, ServerProcess, start_server
from tests.support.raw import Transcript, connect_line, normalise

SEED = int(os.environ.get("TRIJET_FUZZ_SEED", random.randrange(2**32)))
MAX_PAYLOAD = 512
EXAMPLES_LIVE = 150
EXAMPLES_DIFF = 50
WAIT_S = 1.0
CONFIG = f"max_payload: {MAX_PAYLOAD}\n"

FATAL_ERRS = {
    b"-ERR 'Unknown Protocol Operation'",
    b"-ERR 'Maximum Payload Violation'",
    b"-ERR 'maximum control line exceeded'",
    b"-ERR 'no responders requires headers support'",
}
NONFATAL_ERRS = {
    b"-ERR 'Invalid Subject'",
    b"-ERR 'Invalid Publish Subject'",
}

BASE_CONNECT = connect_line(verbose=False, pedantic=False, headers=True, protocol=1)

VOCAB: list[bytes] = [
    b'CONNECT {"verbose":true,"pedantic":true,"headers":true,"no_responders":true}\r\n',
    b'CONNECT {"echo":false,"headers":false}\r\n',
    b"PUB foo 5\r\nhello\r\n",
    b"PUB foo.bar reply.x 0\r\n\r\n",
    b"PUB foo.* 2\r\nhi\r\n",
    b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"HPUB foo r 22 24\r\nNATS/1.0\r\nA: 1\r\nB:2\r\n\r\nhi\r\n",
    b"SUB foo 1\r\n",
    b"SUB foo.* q 2\r\n",
    b"SUB > 3\r\n",
    b"SUB foo..bar 4\r\n",
    b"UNSUB 1\r\n",
    b"UNSUB 2 5\r\n",
    b"PONG\r\n",
    b"+OK\r\n",
    b"INFO {}\r\n",
]
ODD_VERBS = [
    b"FOO",
    b"P",
    b"PU",
    b"PUBX",
    b"SU",
    b"SUBB",
    b"CONNEC",
    b"HPU",
    b"MSG",
    b"-ERR",
    b"\x00",
    b"\xff\xfe",
    b"",
]
SIZES = [
    b"-1",
    b"abc",
    b"99999999999999999999",
    b"%d" % (MAX_PAYLOAD + 1),
    b"4294967296",
    b"0",
    b"+5",
    b"5.0",
]


def _replace_size(op: bytes, new: bytes) -> bytes:
    line, sep, rest = op.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) < 3:
        return op
    parts[-1] = new
    return b" ".join(parts) + sep + rest


@st.composite
def mutated_op(draw: st.DrawFn) -> bytes:
    op = draw(st.sampled_from(VOCAB))
    kind = draw(st.integers(0, 6))
    if kind == 0 or not op:
        return op
    if kind == 1:  # truncation
        return op[: draw(st.integers(0, len(op) - 1))]
    if kind == 2:  # bit flip
        i = draw(st.integers(0, len(op) - 1))
        return op[:i] + bytes([op[i] ^ (1 << draw(st.integers(0, 7)))]) + op[i + 1 :]
    if kind == 3:  # inserted CRLF
        i = draw(st.integers(0, len(op)))
        return op[:i] + b"\r\n" + op[i:]
    if kind == 4:  # huge / odd sizes
        return _replace_size(op, draw(st.sampled_from(SIZES)))
    if kind == 5:  # odd verb
        rest = op.split(b" ", 1)[1] if b" " in op else b"\r\n"
        return draw(st.sampled_from(ODD_VERBS)) + b" " + rest
    return draw(st.binary(max_size=40))


@st.composite
def fuzz_input(draw: st.DrawFn) -> bytes:
    ops = draw(st.lists(mutated_op(), min_size=1, max_size=5))
    data = BASE_CONNECT + b"".join(ops)
    if not data.endswith(b"\n"):
        data += b"\r\n"
    return data


def run_input(sp: ServerProcess, data: bytes) -> tuple[list[bytes], str, Transcript]:
    """(the -ERR lines, outcome "closed" | "open" | "waiting", transcript)."""
    with RawClient(sp.host, sp.port, timeout=5) as c:
        t = c.exchange(data, timeout=WAIT_S, pongs_owed=0)
        outcome = "closed" if t.closed else ("waiting" if t.timed_out else "open")
        if outcome == "open":
            # a second PING proves the connection still works
            assert c.ping_ok(timeout=5), (data, t)
    return [op for op in normalise(t.ops()) if op.startswith(b"-ERR")], outcome, t


def fresh_connection_works(sp: ServerProcess) -> None:
    with RawClient(sp.host, sp.port, timeout=5) as c:
        t = c.exchange(BASE_CONNECT + b"SUB fresh 1\r\nPUB fresh 2\r\nok\r\n")
    assert not t.closed and not t.timed_out, t
    assert b"MSG fresh 1 2\r\nok" in t.ops(), t


@pytest.fixture(scope="module")
def trijet() -> Iterator[ServerProcess]:
    sp = start_server("trijet", config=CONFIG)
    try:
        yield sp
    finally:
        sp.stop()
        print(sp.log_text()[-2000:])


@pytest.fixture(scope="module")
def reference() -> Iterator[ServerProcess]:
    from tests.support import reference_binary

    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    sp = start_server("reference", config=CONFIG)
    try:
        yield sp
    finally:
        sp.stop()


def test_fuzz_live(trijet: ServerProcess) -> None:
    print(f"fuzz seed: {SEED} (replay: TRIJET_FUZZ_SEED={SEED})")
    outcomes: dict[str, int] = {}

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES_LIVE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(fuzz_input())
    def check(data: bytes) -> None:
        assume(b"ping" not in data.lower())
        errs, outcome, t = run_input(trijet, data)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == "closed":
            assert set(errs) <= FATAL_ERRS | NONFATAL_ERRS, (data, t)
            assert all(e in NONFATAL_ERRS for e in errs[:-1]), (data, t)
        else:
            assert set(errs) <= NONFATAL_ERRS, (data, t)
        assert trijet.alive(), trijet.log_text()[-3000:]
        fresh_connection_works(trijet)

    check()
    print("outcomes:", outcomes)


INVALID_PUB = b"-ERR 'Invalid Publish Subject'"


def documented_exceptions(ref_errs: list[bytes], ref_outcome: str) -> list[bytes]:
    """The reference's -ERR lines with the known, accepted differences applied.

    * nats-server checks a pedantic publish subject when it parses the PUB
      control line, before the payload; trijet checks it when the whole PUB has
      arrived.  So when the payload of that PUB is itself fatally bad (overrun),
      the reference writes 'Invalid Publish Subject' before the fatal error and
      trijet does not::

          C: CONNECT {"verbose":true,"pedantic":true}\\r\\nPUB foo.* 2\\r\\nPING\\r\\n
          nats-server: +OK, -ERR 'Invalid Publish Subject', -ERR 'Unknown Protocol Operation'
          trijet:      +OK, -ERR 'Unknown Protocol Operation'

    * A bare CR (not followed by LF) inside a control line: both servers split
      arguments on spaces and tabs only, but nats-server then validates some
      arguments further (e.g. ``SUB > 3\\rCONNECT {...}\\r\\n``, a queue group
      containing CR, is closed silently by nats-server and accepted by trijet).
      Such inputs are not compared (see ``bare_cr``).
    """
    if ref_outcome == "closed" and len(ref_errs) >= 2 and ref_errs[-2] == INVALID_PUB:
        return ref_errs[:-2] + ref_errs[-1:]
    return ref_errs


def bare_cr(data: bytes) -> bool:
    return data.replace(b"\r\n", b"").find(b"\r") >= 0


def test_fuzz_differential(trijet: ServerProcess, reference: ServerProcess) -> None:
    print(f"fuzz seed: {SEED} (replay: TRIJET_FUZZ_SEED={SEED})")

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES_DIFF,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(fuzz_input())
    def check(data: bytes) -> None:
        assume(b"ping" not in data.lower())
        assume(not bare_cr(data))  # documented exception, see documented_exceptions
        ref_errs, ref_outcome, ref_t = run_input(reference, data)
        tj_errs, tj_outcome, tj_t = run_input(trijet, data)
        if (tj_errs, tj_outcome) != (ref_errs, ref_outcome):
            ref_errs = documented_exceptions(ref_errs, ref_outcome)
        assert (tj_errs, tj_outcome) == (ref_errs, ref_outcome), (data, ref_t, tj_t)

    check()
