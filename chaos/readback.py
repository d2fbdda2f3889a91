"""Final reads: each node's *own* replica of each stream and consumer, after the run quiesced.

Theory of operation (and why it is sound enough): the checkers must see each replica, not the
leader's answer relayed.  Two sources, both taken from one node at a time:

- state: the node's monitoring endpoint ``/jsz?accounts=true&streams=true&consumers=true``
  reports the streams and consumers *hosted on that server* with that server's local state
  (first/last seq, messages, deleted; delivered, ack floor, pending).  No forwarding is involved.
- content: a client connected to that node only (no reconnect elsewhere) sends
  ``$JS.API.DIRECT.GET.<stream>`` for every seq of the node's own first..last range.  The streams
  are created with ``allow_direct``, so every replica subscribes to direct gets in one queue group,
  and nats-server delivers a queue message to a subscriber on the publishing client's own server
  when one exists; the answer therefore comes from that node's store.  Two guards: the reply's
  ``Nats-Sequence`` must equal the asked seq, and the node's message count from ``/jsz`` must equal
  the number of messages read (else the read is marked incomplete).  For a target that lacks
  direct get the read records its error and the checkers say "unknown" rather than guess.

Reads are concurrent in bounded batches; everything has a deadline.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from chaos.checkers import StreamRead
from chaos.workload import CONSUMER, LOG, connect

BATCH = 64
REQ_TIMEOUT_S = 2.0
HTTP_TIMEOUT_S = 3.0
MSGS_MAX = 200_000


def jsz(http_port: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:{http_port}/jsz?accounts=true&streams=true&consumers=true"
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:
        return json.loads(resp.read())


def local_streams(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Stream name -> stream detail (with ``state`` and ``consumer_detail``) from a /jsz doc."""
    out: dict[str, dict[str, Any]] = {}
    for acc in doc.get("account_details") or []:
        for sd in acc.get("stream_detail") or []:
            out[sd["name"]] = sd
    return out


def consumer_state(sd: dict[str, Any] | None) -> dict[str, Any]:
    """c1's state on this node; ``{"absent": True}`` when the node hosts no c1 replica."""
    for cd in (sd or {}).get("consumer_detail") or []:
        if cd.get("name") == CONSUMER:
            return {
                "ack_floor": (cd.get("ack_floor") or {}).get("stream_seq", 0),
                "delivered": (cd.get("delivered") or {}).get("stream_seq", 0),
                "num_pending": cd.get("num_pending", 0),
                "num_ack_pending": cd.get("num_ack_pending", 0),
            }
    return {"absent": True}


async def _get(nc: Any, stream: str, seq: int) -> tuple[int, str, str] | None:
    msg = await nc.request(
        f"$JS.API.DIRECT.GET.{stream}", json.dumps({"seq": seq}).encode(), timeout=REQ_TIMEOUT_S
    )
    hdrs = msg.headers or {}
    if hdrs.get("Status"):
        return None  # 404: no message at seq (a hole, or deleted)
    got = int(hdrs.get("Nats-Sequence", "0"))
    if got != seq:
        raise RuntimeError(f"asked seq {seq}, answered {got}")
    return seq, hdrs.get("Nats-Subject", ""), msg.data.decode(errors="replace")


async def read_stream(url: str, stream: str, state: dict[str, int] | None) -> StreamRead:
    """Every message of ``stream`` in ``state``'s range, from the node at ``url`` only."""
    read = StreamRead(state=state)
    if state is None:  # every node must host an R3 stream: count it as an empty replica
        keys = ("first_seq", "last_seq", "messages", "num_deleted")
        return StreamRead(state=dict.fromkeys(keys, 0), complete=True, absent=True)
    first, last = max(1, state.get("first_seq", 1)), state.get("last_seq", 0)
    if last - first + 1 > MSGS_MAX:
        read.error = f"too many messages to read ({last - first + 1})"
        return read
    nc = None
    try:
        nc = await connect([url], 0, f"readback-{stream}", reconnect=False)
        for lo in range(first, last + 1, BATCH):
            got = await asyncio.gather(
                *(_get(nc, stream, s) for s in range(lo, min(lo + BATCH, last + 1)))
            )
            for item in got:
                if item is not None:
                    read.msgs[item[0]] = (item[1], item[2])
        read.complete = len(read.msgs) == state.get("messages", -1)
        if not read.complete:
            read.error = f"read {len(read.msgs)} messages, /jsz says {state.get('messages')}"
    except Exception as exc:
        read.error = f"direct get failed: {exc!r}"[:200]
    finally:
        if nc is not None:
            await nc.close()
    return read


def _state(sd: dict[str, Any] | None) -> dict[str, int] | None:
    if sd is None:
        return None
    st = sd.get("state") or {}
    keys = ("first_seq", "last_seq", "messages", "num_deleted")
    return {k: int(st.get(k, 0) or 0) for k in keys}


async def stream_members(
    nc: Any, streams: tuple[str, ...], every: list[str]
) -> dict[str, set[str]]:
    """Each stream's replicas by server name, from its StreamInfo (leader and
    replicas); ``every`` node when the info cannot be had (the strict default:
    a node that should hold a replica and does not counts as an empty one)."""
    js = nc.jetstream(timeout=REQ_TIMEOUT_S)
    out = {}
    for s in streams:
        try:
            cl = (await js.stream_info(s)).cluster
            names = {cl.leader, *(r.name for r in cl.replicas or [])} - {None}
        except Exception:
            names = set()
        out[s] = {str(n) for n in names} & set(every) or set(every)
    return out


async def read_node(
    url: str, http_port: int, streams: tuple[str, ...]
) -> tuple[dict[str, StreamRead], dict[str, Any] | None]:
    """One node's reads of ``streams`` and its consumer state (None when unreadable).
    ``streams`` are those this node is a replica of (a peer removed from a
    stream's group is not read for it)."""
    try:
        doc = await asyncio.to_thread(jsz, http_port)
    except Exception as exc:
        err = f"/jsz failed: {exc!r}"[:200]
        return {s: StreamRead(error=err) for s in streams}, None
    if doc.get("disabled"):  # e.g. after a write error: its replicas exist but cannot be read
        err = "JetStream disabled on this node"
        return {s: StreamRead(error=err) for s in streams}, None
    sds = local_streams(doc)
    reads = {s: await read_stream(url, s, _state(sds.get(s))) for s in streams}
    return reads, consumer_state(sds.get(LOG)) if LOG in streams else None
