"""In-process fuzzing of every decoder that takes bytes from outside (hypothesis).

Theory of operation: each *target* is a pure function of one input that
raises ``FuzzBug`` (or lets an unexpected exception escape) when a decoder
misbehaves; the decoders' own "bad input" answers (protocol violations,
``JSApiError``, ``WireError``…) are the expected outcome, never a bug.
Targets:

* ``protocol_client`` / ``protocol_route``: ``ProtocolConnection`` in the
  server and route roles, fed the input whole and again in random chunks —
  both feedings must yield the same events (the parser is resumable).
* ``api_request``: JetStream API request decoding (stream create/update,
  consumer create, pull requests, the Go-style scanner).
* ``bounded_json``: ``node.protocol.boundedjson.loads`` agrees with
  ``json.loads`` whenever the latter can answer, and never recurses.
* ``raft_wire``: the raft frame decoder and message decoder.

Inputs come from one strategy per target that mixes raw bytes, mutated valid
inputs and generated JSON (deeply nested, huge, odd scalars).  Everything is
seeded: a run prints its seed, and ``--seed`` replays it.

CI runs a short budget (``tests/hostile/test_fuzz.py``); longer runs::

    python -m chaos.fuzz --minutes 10 [--seed N] [--target protocol_client]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from node.jetstream.pullreq import parse_pull
from node.jsapi import consumerrequest, streamconfig
from node.jsapi.errors import JSApiError
from node.jsapi.godecode import GoJSONError, scan_go
from node.protocol.boundedjson import loads as bounded_loads
from node.protocol.connection import ProtocolConnection, ProtocolViolation, Role
from raft.wire import FrameDecoder, WireError, decode_messages, encode_frame


class FuzzBug(AssertionError):
    """A decoder broke a property (not merely refused bad input)."""


# --------------------------------------------------------------------------- inputs

_OPS = [
    b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true}\r\n',
    b"PUB foo 5\r\nhello\r\n",
    b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"SUB foo.* q 1\r\n",
    b"UNSUB 1 5\r\n",
    b"PING\r\n",
    b"PONG\r\n",
    b"INFO {}\r\n",
    b"RS+ $G foo\r\n",
    b"RS- $G foo\r\n",
    b"RMSG $G foo reply 5\r\nhello\r\n",
    b"HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"-ERR 'x'\r\n",
    b"+OK\r\n",
]


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from(["S", "C", "a.b", ">", "*", "", "1s", "workqueue", "file"]),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.dictionaries(
                st.sampled_from(
                    ["name", "subjects", "config", "durable_name", "filter_subjects", "batch"]
                )
                | st.text(max_size=8),
                inner,
                max_size=5,
            ),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def deep_json(draw: st.DrawFn) -> bytes:
    depth = draw(st.sampled_from([50, 300, 999, 1001, 5000, 10_000, 10_001, 20_000]))
    opener = draw(st.sampled_from([b"[", b'{"a":']))
    closer = b"]" if opener == b"[" else b"}"
    inner = draw(st.sampled_from([b"1", b"", b'"x"', b"[]", b"{}"]))
    body = opener * depth + inner + closer * draw(st.sampled_from([depth, depth - 1, 0]))
    return draw(st.sampled_from([b"", b'{"name":"S","x":', b'{"config":'])) + body


@st.composite
def json_bytes(draw: st.DrawFn) -> bytes:
    """Valid JSON, deep JSON, or valid JSON with a byte inserted and a tail cut."""
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return json.dumps(draw(json_values())).encode()
    if choice == 1:
        return draw(deep_json())
    text = json.dumps(draw(json_values())).encode()
    i = draw(st.integers(0, len(text)))
    odd = draw(st.sampled_from([b"", b"}", b"]", b",", b'"', b"\\", b"\x00", b"\xff", b"NaN"]))
    mutated = text[:i] + odd + text[i:]
    return mutated[: draw(st.integers(0, len(mutated)))]


@st.composite
def protocol_bytes(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            parts.append(draw(st.binary(max_size=64)))
        elif kind == 1:
            op = draw(st.sampled_from(_OPS))
            i = draw(st.integers(0, len(op)))
            parts.append(op[:i] + draw(st.binary(max_size=4)) + op[i:])
        elif kind == 2:
            verb = draw(st.sampled_from([b"CONNECT ", b"INFO "]))
            parts.append(verb + draw(json_bytes())[:4000] + b"\r\n")
        elif kind == 3:
            n = draw(st.sampled_from([10, 1000, 2000]))
            tok = draw(st.sampled_from([b"*", b"a", b">"]))
            parts.append(b"SUB " + b".".join([tok] * n) + b" 1\r\n")
        elif kind == 4:
            size = draw(st.sampled_from([b"-1", b"99999999999", b"0", b"5", b"x", b""]))
            parts.append(b"PUB foo " + size + b"\r\nhello\r\n")
        else:
            parts.append(draw(st.sampled_from(_OPS)))
    return b"".join(parts)


@st.composite
def wire_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(st.binary(max_size=200))
    payload = draw(st.binary(max_size=120))
    if kind == 2:
        import cbor2

        payload = cbor2.dumps(draw(json_values(10)))
    frame = encode_frame(draw(st.sampled_from(["_meta_", "g-1", "x"])), payload)
    cut = draw(st.integers(0, len(frame)))
    return frame[:cut] + draw(st.binary(max_size=8)) + frame[cut:]


# --------------------------------------------------------------------------- targets


def _events(role: Role, chunks: list[bytes]) -> list[Any]:
    conn = ProtocolConnection(role, max_payload=1024, headers=True)
    out: list[Any] = []
    for c in chunks:
        out.extend(conn.receive_data(c))
        if conn.dead:
            break
    return out


def _protocol(role: Role, data: bytes, rng: random.Random) -> None:
    whole = _events(role, [data])
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, 8)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    pieces = _events(role, chunks)
    if not isinstance(whole[-1:][0] if whole else None, ProtocolViolation) and whole != pieces:
        raise FuzzBug(f"chunked feed differs: {whole!r} != {pieces!r}")


def protocol_client(data: bytes, rng: random.Random) -> None:
    _protocol(Role.SERVER, data, rng)


def protocol_route(data: bytes, rng: random.Random) -> None:
    _protocol(Role.ROUTE, data, rng)


def api_request(data: bytes, rng: random.Random) -> None:
    del rng
    for fn in (
        lambda: streamconfig.parse_create("S", data),
        lambda: streamconfig.parse_update("S", data),
        lambda: consumerrequest.parse_create(("CONSUMER", "CREATE", "S", "C"), data),
        lambda: parse_pull(data),
    ):
        try:
            fn()
        except JSApiError:
            pass
    try:
        scan_go(data)
    except GoJSONError:
        pass


def bounded_json(data: bytes, rng: random.Random) -> None:
    del rng
    text = data.decode("utf-8", "replace")
    try:
        want: Any = ("ok", json.loads(text))
    except RecursionError:
        want = None  # the C decoder cannot answer; ours must, without recursing
    except ValueError:
        want = ("error",)
    try:
        got: Any = ("ok", bounded_loads(data, parse_int=int))  # json.loads' int()
    except ValueError:
        got = ("error",)
    if want is not None and repr(want) != repr(got):
        raise FuzzBug(f"boundedjson {got!r} != json {want!r}")


def raft_wire(data: bytes, rng: random.Random) -> None:
    dec = FrameDecoder(frame_bytes_max=4096)
    try:
        for i in range(0, len(data), rng.randint(1, 16)):
            dec.feed(data[i : i + 16])
            for _ in range(len(data) + 1):
                frame = dec.next_frame()
                if frame is None:
                    break
                decode_messages(frame[1])
    except WireError:
        pass
    try:
        decode_messages(data)
    except WireError:
        pass


Target = Callable[[bytes, random.Random], None]
TARGETS: dict[str, tuple[Target, st.SearchStrategy[bytes]]] = {
    "protocol_client": (protocol_client, protocol_bytes()),
    "protocol_route": (protocol_route, protocol_bytes()),
    "api_request": (api_request, json_bytes()),
    "bounded_json": (bounded_json, json_bytes()),
    "raft_wire": (raft_wire, wire_bytes()),
}


def run(name: str, seconds: float, run_seed: int, *, batch: int = 100) -> int:
    """Fuzz target ``name`` for about ``seconds``, in hypothesis batches of
    ``batch`` examples seeded ``run_seed``, ``run_seed + 1``, …

    Returns:
        Examples run.

    Raises:
        FuzzBug or any unexpected exception: hypothesis's shrunk example.
    """
    fn, strategy = TARGETS[name]
    deadline = time.monotonic() + seconds
    count = 0

    def one(data: bytes, chunk_seed: int) -> None:
        nonlocal count
        count += 1
        fn(data, random.Random(chunk_seed))

    for i in range(1_000_000):
        if time.monotonic() >= deadline:
            break
        check = seed(run_seed + i)(
            settings(
                max_examples=batch,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )(given(data=strategy, chunk_seed=st.integers(0, 2**32))(one))
        )
        check()
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.fuzz", description=__doc__)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--target", choices=sorted(TARGETS), action="append")
    args = ap.parse_args(argv)
    run_seed = args.seed if args.seed is not None else random.randrange(2**32)
    names = args.target or sorted(TARGETS)
    per = args.minutes * 60.0 / len(names)
    print(f"fuzz seed: {run_seed} (replay: python -m chaos.fuzz --seed {run_seed})", flush=True)
    for name in names:
        t0 = time.monotonic()
        n = run(name, per, run_seed)
        print(f"{name}: {n} examples in {time.monotonic() - t0:.1f}s, no failure", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
