"""``trijet pub|sub|request|reply``: core NATS messaging, natscli's output.

natscli logs with Go's ``log`` package set to ``Ltime``: ``15:04:05 <text>`` on
stderr (``Published 11 bytes to "orders.new"``); received messages go to stdout
(``[#1] Received on "orders.new"``, then the body and a blank line).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from typing import Any

import nats

from trijet_cli.conn import JetStreamApi, fatal
from trijet_cli.fmt import f


def log(text: str) -> None:
    print(f"{dt.datetime.now().strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _go_quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("pub", aliases=["publish"], parents=[common], help="publish a message")
    p.add_argument("subject")
    p.add_argument("body", nargs="?")
    p.add_argument("-H", "--header", action="append", default=[], help="Key:Value header")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--sleep", help="sleep between messages")
    p.add_argument("--reply", help="reply subject")
    p.add_argument(
        "-J", "--jetstream", action="store_true", help="publish to JetStream, wait for ack"
    )
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(run=pub)

    p = sub.add_parser("sub", aliases=["subscribe"], parents=[common], help="subscribe to subjects")
    p.add_argument("subjects", nargs="+")
    p.add_argument("--queue")
    p.add_argument("--count", type=int, default=0, help="exit after this many messages")
    p.add_argument("--raw", action="store_true")
    p.set_defaults(run=subscribe)

    p = sub.add_parser(
        "request", aliases=["req"], parents=[common], help="request and wait for a reply"
    )
    p.add_argument("subject")
    p.add_argument("body", nargs="?", default="")
    p.add_argument("-H", "--header", action="append", default=[])
    p.add_argument("--raw", action="store_true")
    p.set_defaults(run=request)

    p = sub.add_parser("reply", parents=[common], help="answer requests")
    p.add_argument("subject")
    p.add_argument("body", nargs="?")
    p.add_argument("--queue", default="NATS-RPLY-22")
    p.add_argument("--count", type=int, default=0, help="exit after this many requests")
    p.set_defaults(run=reply)


def _headers(items: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for h in items:
        k, sep, v = h.partition(":")
        if not sep:
            fatal(f"invalid header {h!r}, expected Key:Value")
        out[k.strip()] = v.strip()
    return out or None


def _body(text: str | None, i: int) -> bytes:
    if text is None:
        if sys.stdin.isatty():
            log("Reading payload from STDIN")
        text = sys.stdin.read()
    for tpl in ("{{Count}}", "{{.Count}}", "{{ Count }}"):
        text = text.replace(tpl, str(i))
    return text.encode()


async def pub(js: JetStreamApi, a: argparse.Namespace) -> None:
    nc = js.nc
    hdrs = _headers(a.header)
    stdin_body = None
    if a.body is None:
        stdin_body = _body(None, 0).decode()
    sleep_s = 0.0
    if a.sleep:
        from trijet_cli.values import duration_ns

        sleep_s = duration_ns(a.sleep, "sleep") / 1e9
    for i in range(1, a.count + 1):
        body = _body(a.body if a.body is not None else stdin_body, i)
        if a.jetstream:
            try:
                resp = await nc.request(a.subject, body, timeout=js.opts.timeout_s, headers=hdrs)
            except nats.errors.NoRespondersError:
                fatal("nats: no responders available for request")
            except nats.errors.TimeoutError:
                fatal("nats: timeout")
            ack = json.loads(resp.data)
            if ack.get("error"):
                err = ack["error"]
                fatal(f"{err.get('description')} ({err.get('err_code')})")
            if not a.quiet:
                log(f"Published {len(body)} bytes to {_go_quote(a.subject)}")
                text = f"Stored in Stream: {ack['stream']} Sequence: {f(int(ack['seq']))}"
                if ack.get("domain"):
                    text += f" Domain: {_go_quote(ack['domain'])}"
                if ack.get("duplicate"):
                    text += " Duplicate: true"
                log(text)
        else:
            await nc.publish(a.subject, body, reply=a.reply or "", headers=hdrs)
            await nc.flush()
            if not a.quiet:
                log(f"Published {len(body)} bytes to {_go_quote(a.subject)}")
        if sleep_s and i < a.count:
            await asyncio.sleep(sleep_s)


def _print_msg(ctr: int, msg: Any, raw: bool) -> None:
    if raw:
        print(msg.data.decode(errors="replace"))
        return
    line = f"[#{ctr}] Received on {_go_quote(msg.subject)}"
    if msg.reply:
        line += f" with reply {_go_quote(msg.reply)}"
    print(line)
    for k, v in (msg.headers or {}).items():
        print(f"{k}: {v}")
    if msg.headers:
        print()
    if not msg.data:
        print("nil body")
    else:
        text = msg.data.decode(errors="replace")
        print(text, end="" if text.endswith("\n") else "\n")
    print()
    sys.stdout.flush()


async def subscribe(js: JetStreamApi, a: argparse.Namespace) -> None:
    nc = js.nc
    done = asyncio.Event()
    ctr = 0

    async def cb(msg: Any) -> None:
        nonlocal ctr
        ctr += 1
        _print_msg(ctr, msg, a.raw)
        if a.count and ctr >= a.count:
            done.set()

    for s in a.subjects:
        await nc.subscribe(s, queue=a.queue or "", cb=cb)
    await nc.flush()
    q = f" in queue group {a.queue}" if a.queue else ""
    log(f"Subscribing on {', '.join(a.subjects)}{q}")
    await done.wait()


async def request(js: JetStreamApi, a: argparse.Namespace) -> None:
    nc = js.nc
    body = a.body.encode()
    log(f"Sending request on {_go_quote(a.subject)}")
    start = asyncio.get_running_loop().time()
    try:
        msg = await nc.request(
            a.subject, body, timeout=js.opts.timeout_s, headers=_headers(a.header)
        )
    except nats.errors.NoRespondersError:
        fatal("nats: no responders available for request")
    except nats.errors.TimeoutError:
        fatal("nats: timeout")
    rtt = asyncio.get_running_loop().time() - start
    if a.raw:
        print(msg.data.decode(errors="replace"))
        return
    log(f"Received with rtt {rtt * 1000:.3f}ms")
    for k, v in (msg.headers or {}).items():
        log(f"{k}: {v}")
    print()
    print(msg.data.decode(errors="replace"))
    print()


async def reply(js: JetStreamApi, a: argparse.Namespace) -> None:
    nc = js.nc
    done = asyncio.Event()
    ctr = 0
    if a.body is None:
        log("No body or command supplied, enabling echo mode")

    async def cb(msg: Any) -> None:
        nonlocal ctr
        ctr += 1
        log(f"[#{ctr}] Received on subject {_go_quote(msg.subject)}:")
        for k, v in (msg.headers or {}).items():
            log(f"{k}: {v}")
        print()
        print(msg.data.decode(errors="replace"))
        sys.stdout.flush()
        await msg.respond(msg.data if a.body is None else _body(a.body, ctr))
        if a.count and ctr >= a.count:
            done.set()

    await nc.subscribe(a.subject, queue=a.queue, cb=cb)
    await nc.flush()
    await done.wait()
