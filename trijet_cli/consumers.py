"""``trijet consumer add|ls|info|next|rm|report`` (natscli's consumer verbs)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from typing import Any

import nats

from trijet_cli import prompt
from trijet_cli.conn import JetStreamApi, fatal
from trijet_cli.fmt import Columns, duration, f, ibytes, local_time, print_json, since_ns, table
from trijet_cli.streams import render_cluster, render_meta_api
from trijet_cli.values import (
    ACK,
    ACK_NAME,
    REPLAY,
    REPLAY_NAME,
    choice,
    duration_ns,
    split_subjects,
)

INT64_MAX = (1 << 63) - 1
ACK_WAIT_DEFAULT_NS = 30 * 10**9


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    co = sub.add_parser("consumer", aliases=["con", "obs"], help="JetStream Consumer management")
    cs = co.add_subparsers(dest="verb", required=True, metavar="<verb>")

    p = cs.add_parser("add", aliases=["create", "new"], parents=[common], help="create a consumer")
    p.add_argument("stream", nargs="?")
    p.add_argument("consumer", nargs="?")
    p.add_argument("--pull", action="store_true", help="a pull consumer")
    p.add_argument("--target", dest="delivery", default="", help="push delivery subject")
    p.add_argument("--deliver", dest="start", default="", help="all, new, last, subject, 1h, seq")
    p.add_argument("--ack", dest="ack_policy", default="", help="explicit, all or none")
    p.add_argument("--replay", default="", help="instant or original")
    p.add_argument("--filter", action="append", dest="filters", help="filter subjects")
    p.add_argument("--max-deliver", type=int, default=0)
    p.add_argument("--max-pending", type=int, default=-1)
    p.add_argument("--wait", dest="ack_wait", help="acknowledgement waiting time")
    p.add_argument("--description", default="")
    p.add_argument("--max-waiting", type=int, default=0)
    p.add_argument("--inactive-threshold")
    p.add_argument("--replicas", type=int, default=0)
    p.add_argument("--heartbeat", default="")
    p.add_argument("--flow-control", action="store_true", default=None)
    p.add_argument("--headers-only", action="store_true", default=None)
    p.add_argument("--ephemeral", action="store_true")
    p.add_argument("--defaults", action="store_true", help="accept default values")
    p.set_defaults(run=add)

    p = cs.add_parser("ls", aliases=["list"], parents=[common], help="list consumers")
    p.add_argument("stream", nargs="?")
    p.add_argument("-n", "--names", action="store_true")
    p.set_defaults(run=ls)

    p = cs.add_parser("info", parents=[common], help="consumer information")
    p.add_argument("stream", nargs="?")
    p.add_argument("consumer", nargs="?")
    p.set_defaults(run=info)

    p = cs.add_parser("next", parents=[common], help="retrieve messages from a pull consumer")
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--nak", action="store_true")
    p.add_argument("--term", action="store_true")
    p.add_argument("--raw", action="store_true")
    p.set_defaults(run=next_)

    p = cs.add_parser("rm", aliases=["delete", "del"], parents=[common], help="remove a consumer")
    p.add_argument("stream", nargs="?")
    p.add_argument("consumer", nargs="?")
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=rm)

    p = cs.add_parser("report", parents=[common], help="report on a stream's consumers")
    p.add_argument("stream", nargs="?")
    p.set_defaults(run=report)


def _start_policy(cfg: dict[str, Any], policy: str) -> None:
    """natscli's ``setStartPolicy``."""
    p = policy.strip()
    if p in ("all", ""):
        cfg["deliver_policy"] = "all"
    elif p == "last":
        cfg["deliver_policy"] = "last"
    elif p == "new" or p == "next":
        cfg["deliver_policy"] = "new"
    elif p == "subject" or p == "last_per_subject":
        cfg["deliver_policy"] = "last_per_subject"
    elif re.fullmatch(r"\d+", p):
        cfg["deliver_policy"] = "by_start_sequence"
        cfg["opt_start_seq"] = int(p)
    else:
        ago = duration_ns(p, "start delta")
        start = dt.datetime.now(dt.UTC) - dt.timedelta(microseconds=ago // 1000)
        cfg["deliver_policy"] = "by_start_time"
        cfg["opt_start_time"] = start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _prepare_config(a: argparse.Namespace) -> dict[str, Any]:
    """natscli's ``prepareConfig`` for ``consumer add``."""
    cfg: dict[str, Any] = {
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": ACK_WAIT_DEFAULT_NS,
        "replay_policy": "instant",
    }
    if a.description:
        cfg["description"] = a.description
    if not a.consumer and not a.ephemeral:
        a.consumer = prompt.ask("Consumer name", required=True)
    if a.consumer:
        if re.search(r"[.*>]", a.consumer):
            fatal("durable name can not contain '.', '*', '>'")
        cfg["name" if a.ephemeral else "durable_name"] = a.consumer
    if not a.pull and not a.delivery:
        a.delivery = prompt.ask("Delivery target (empty for Pull Consumers)")
    if a.delivery:
        cfg["deliver_subject"] = a.delivery
    if a.defaults:
        a.start = a.start or "all"
        a.ack_policy = a.ack_policy or ("explicit" if a.pull or not a.delivery else "none")
        a.max_deliver = a.max_deliver or -1
        a.max_pending = 0 if a.max_pending == -1 else a.max_pending
        a.replay = a.replay or "instant"
        a.heartbeat = a.heartbeat or "-1"
        if a.headers_only is None:
            a.headers_only = False
        if a.delivery and a.flow_control is None:
            a.flow_control = False
    if not a.start:
        a.start = prompt.ask("Start policy (all, new, last, subject, 1h, msg sequence)", "all")
    _start_policy(cfg, a.start)
    if not a.ack_policy:
        a.ack_policy = prompt.select(
            "Acknowledgment policy",
            ["explicit", "all", "none"],
            "none" if a.delivery else "explicit",
        )
    if not a.replay:
        a.replay = prompt.select("Replay policy", ["instant", "original"], "instant")
    cfg["ack_policy"] = choice(ACK, a.ack_policy, "ack policy")
    cfg["replay_policy"] = choice(REPLAY, a.replay, "replay policy")
    if cfg["ack_policy"] == "none":
        cfg["max_deliver"] = -1
    if a.ack_wait:
        cfg["ack_wait"] = duration_ns(a.ack_wait, "ack wait")
    filters = split_subjects(a.filters)
    if not filters and not a.defaults:
        filters = split_subjects([prompt.ask("Filter Stream by subjects (blank for all)")])
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    elif filters:
        cfg["filter_subjects"] = filters
    if not filters and cfg["deliver_policy"] == "last_per_subject":
        cfg["filter_subject"] = ">"
    if a.max_deliver == 0 and cfg["ack_policy"] != "none":
        a.max_deliver = prompt.ask_int("Maximum Allowed Deliveries", "-1")
    if a.max_pending == -1 and cfg["ack_policy"] != "none":
        a.max_pending = prompt.ask_int("Maximum Acknowledgments Pending", "0")
    if a.delivery:
        if a.heartbeat == "-1":
            pass
        elif a.heartbeat:
            cfg["idle_heartbeat"] = duration_ns(a.heartbeat, "heartbeat")
        else:
            hb = duration_ns(prompt.ask("Idle Heartbeat", "0s"), "heartbeat")
            if hb:
                cfg["idle_heartbeat"] = hb
        if a.flow_control is None:
            a.flow_control = prompt.confirm("Enable Flow Control, ie --flow-control", False)
        cfg["flow_control"] = bool(a.flow_control)
    elif a.heartbeat not in ("", "-1"):
        fatal("pull subscribers does not support idle heartbeats")
    if a.headers_only is None:
        a.headers_only = prompt.confirm("Deliver headers only without bodies", False)
    if a.headers_only:
        cfg["headers_only"] = True
    cfg["max_ack_pending"] = 0 if a.max_pending == -1 else a.max_pending
    if a.inactive_threshold:
        cfg["inactive_threshold"] = duration_ns(a.inactive_threshold, "inactive threshold")
    if not a.delivery and a.max_waiting:
        cfg["max_waiting"] = a.max_waiting
    if a.max_deliver != 0 and cfg["ack_policy"] != "none":
        cfg["max_deliver"] = a.max_deliver
    if a.replicas:
        cfg["num_replicas"] = a.replicas
    return cfg


async def _ask_stream(js: JetStreamApi, a: argparse.Namespace) -> str:
    if a.stream:
        return str(a.stream)
    names = await js.paged("STREAM.NAMES", "streams")
    if not names:
        fatal("no Streams are defined")
    return prompt.select("Select a Stream", sorted(names))


async def _ask_consumer(js: JetStreamApi, a: argparse.Namespace) -> str:
    if a.consumer:
        return str(a.consumer)
    names = await js.paged(f"CONSUMER.NAMES.{a.stream}", "consumers")
    if not names:
        fatal(f"no Consumers are defined for Stream {a.stream}")
    return prompt.select("Select a Consumer", sorted(names))


async def add(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    cfg = _prepare_config(a)
    name = cfg.get("durable_name") or cfg.get("name")
    subject = f"CONSUMER.CREATE.{a.stream}.{name}" if name else f"CONSUMER.CREATE.{a.stream}"
    body = {"stream_name": a.stream, "config": cfg, "action": "create"}
    doc = await js.request(subject, body, what="Consumer creation failed")
    if a.json:
        print_json(doc)
        return
    print(render_info(doc), end="")


async def info(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    a.consumer = await _ask_consumer(js, a)
    doc = await js.request(
        f"CONSUMER.INFO.{a.stream}.{a.consumer}",
        what=f"could not load Consumer {a.stream} > {a.consumer}",
    )
    if a.json:
        print_json(doc)
        return
    print(render_info(doc), end="")
    print()


async def ls(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    consumers = await js.paged(f"CONSUMER.LIST.{a.stream}", "consumers")
    names = sorted(c["name"] for c in consumers)
    if a.json:
        print_json(names or None)  # natscli prints a nil list as null
        return
    if a.names:
        print("\n".join(names))
        return
    if not consumers:
        print("No Consumers defined")
        return
    rows = []
    for c in sorted(consumers, key=lambda c: c["name"]):
        last = (c.get("delivered") or {}).get("last_active")
        ago = since_ns(last, c.get("ts")) if last else INT64_MAX
        rows.append(
            [
                c["name"],
                (c.get("config") or {}).get("description", ""),
                local_time(c.get("created")),
                int(c.get("num_ack_pending", 0)),
                int(c.get("num_pending", 0)),
                duration(ago),
            ]
        )
    hdr = ["Name", "Description", "Created", "Ack Pending", "Unprocessed", "Last Delivery"]
    print(table(hdr, rows, "Consumers"))
    print()


async def rm(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.force and (not a.stream or not a.consumer):
        fatal("--force requires a stream and consumer name")
    a.stream = await _ask_stream(js, a)
    a.consumer = await _ask_consumer(js, a)
    if not a.force and not prompt.confirm(
        f"Really delete Consumer {a.stream} > {a.consumer}", False
    ):
        return
    await js.request(f"CONSUMER.DELETE.{a.stream}.{a.consumer}", what="could not remove Consumer")


async def report(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    consumers = sorted(
        await js.paged(f"CONSUMER.LIST.{a.stream}", "consumers"), key=lambda c: c["name"]
    )
    if a.json:
        print_json(consumers)
        return
    if not consumers:
        print("No Consumers defined")
        return
    rows = []
    for c in consumers:
        cfg, cl = c.get("config") or {}, c.get("cluster") or {}
        mode = "Push" if cfg.get("deliver_subject") else "Pull"
        replicas = [f"{cl['leader']}*"] if cl.get("leader") else []
        replicas += [
            r["name"] + ("" if r.get("current") else "!") for r in cl.get("replicas") or []
        ]
        rows.append(
            [
                c["name"],
                mode,
                ACK_NAME.get(cfg.get("ack_policy", ""), ""),
                duration(cfg.get("ack_wait", 0)),
                int(c.get("num_ack_pending", 0)),
                int(c.get("num_redelivered", 0)),
                int(c.get("num_pending", 0)),
                ", ".join(sorted(replicas)),
            ]
        )
    hdr = [
        "Consumer",
        "Mode",
        "Ack Policy",
        "Ack Wait",
        "Ack Pending",
        "Redelivered",
        "Unprocessed",
        "Cluster",
    ]
    print(table(hdr, rows, f"Consumer report for {a.stream} with {len(consumers)} consumers"))
    print()


def _parse_ack_subject(reply: str) -> tuple[int, int, int, int] | None:
    """(delivered, stream seq, consumer seq, pending) from a ``$JS.ACK`` reply subject."""
    t = reply.split(".")
    if len(t) >= 12 and t[0] == "$JS" and t[1] == "ACK":
        t = t[4:]  # v2: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…
    elif len(t) >= 9 and t[0] == "$JS" and t[1] == "ACK":
        t = t[2:]
    else:
        return None
    try:
        return int(t[2]), int(t[3]), int(t[4]), int(t[6])
    except (ValueError, IndexError):
        return None


async def next_(js: JetStreamApi, a: argparse.Namespace) -> None:
    """natscli's ``consumer next``: one pull request per message, printed, then acked."""
    nc = js.nc
    for _ in range(a.count):
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, max_msgs=1)
        expires_ns = int(js.opts.timeout_s * 1e9)
        req = json.dumps({"batch": 1, "expires": expires_ns}).encode()
        await nc.publish(f"{js.prefix}.CONSUMER.MSG.NEXT.{a.stream}.{a.consumer}", req, reply=inbox)
        try:
            msg = await sub.next_msg(timeout=js.opts.timeout_s)
        except (TimeoutError, nats.errors.TimeoutError):
            fatal("no message received: nats: timeout")
        status = (msg.headers or {}).get("Status")
        if status:
            desc = (msg.headers or {}).get("Description", "")
            if status == "503":
                fatal("no message received: nats: no responders available for request")
            fatal(f"no message received: {status} {desc}".rstrip())
        if a.term:
            a.ack = False
        if not a.raw:
            meta = _parse_ack_subject(msg.reply or "")
            if meta is None:
                print(f"--- subject: {msg.subject}" + (f" reply: {msg.reply}" if msg.reply else ""))
            else:
                delivered, sseq, cseq, pending = meta
                now = dt.datetime.now().strftime("%H:%M:%S")
                print(
                    f"[{now}] subj: {msg.subject} / tries: {delivered} / cons seq: {cseq}"
                    f" / str seq: {sseq} / pending: {f(pending)}"
                )
            hdrs = {k: v for k, v in (msg.headers or {}).items()}
            if hdrs:
                print("\nHeaders:\n")
                for k, v in hdrs.items():
                    print(f"  {k}: {v}")
                print("\nData:\n")
            print()
            print(msg.data.decode(errors="replace"))
        else:
            print(msg.data.decode(errors="replace"))
        if a.term:
            await msg.term()
            await nc.flush()
            print("\nTerminated message")
        if a.ack or a.nak:
            await nc.publish(msg.reply, b"-NAK" if a.nak else b"+ACK")
            await nc.flush()
            if not a.raw:
                print(f"\n{'Negative ' if a.nak else ''}Acknowledged message")
                print()


def render_info(doc: dict[str, Any]) -> str:
    """natscli's consumer ``showInfo`` of a ConsumerInfo JSON document."""
    cfg = doc.get("config") or {}
    cols = Columns(
        f"Information for Consumer {doc['stream_name']} > {doc['name']} created {local_time(doc.get('created'))}"
    )
    cols.title("Configuration")
    cols.row_if_not_empty("Name", cfg.get("name"))
    durable = cfg.get("durable_name", "")
    cols.row_if("Durable Name", durable, bool(durable) and durable != cfg.get("name"))
    cols.row_if_not_empty("Description", cfg.get("description"))
    if cfg.get("deliver_subject"):
        cols.row("Delivery Subject", cfg["deliver_subject"])
    else:
        cols.row("Pull Mode", True)
    if cfg.get("filter_subject"):
        cols.row("Filter Subject", cfg["filter_subject"])
    elif cfg.get("filter_subjects"):
        cols.row("Filter Subjects", cfg["filter_subjects"])
    dp = cfg.get("deliver_policy", "all")
    names = {"all": "All", "last": "Last", "new": "New", "last_per_subject": "Last Per Subject"}
    if dp in names:
        cols.row("Deliver Policy", names[dp])
    elif dp == "by_start_time":
        cols.row("Deliver Policy", f"Since {cfg.get('opt_start_time', '')}")
    elif dp == "by_start_sequence":
        cols.row("Deliver Policy", f"From Sequence {cfg.get('opt_start_seq', 0)}")
    cols.row_if(
        "Deliver Queue Group",
        cfg.get("deliver_group", ""),
        bool(cfg.get("deliver_group")) and bool(cfg.get("deliver_subject")),
    )
    ack = cfg.get("ack_policy", "none")
    cols.row("Ack Policy", ACK_NAME.get(ack, ack))
    cols.row_if("Ack Wait", duration(cfg.get("ack_wait", 0)), ack != "none")
    cols.row("Replay Policy", REPLAY_NAME.get(cfg.get("replay_policy", "instant"), ""))
    cols.row_if("Maximum Deliveries", cfg.get("max_deliver", -1), cfg.get("max_deliver", -1) != -1)
    cols.row_if_not_empty("Sampling Rate", cfg.get("sample_freq"))
    rl = int(cfg.get("rate_limit_bps", 0))
    cols.row_if("Rate Limit", f"{ibytes(rl // 8)} / second", rl > 0)
    cols.row_if("Max Ack Pending", cfg.get("max_ack_pending", 0), cfg.get("max_ack_pending", 0) > 0)
    cols.row_if("Max Waiting Pulls", cfg.get("max_waiting", 0), cfg.get("max_waiting", 0) > 0)
    cols.row_if(
        "Idle Heartbeat", duration(cfg.get("idle_heartbeat", 0)), cfg.get("idle_heartbeat", 0) > 0
    )
    cols.row_if("Flow Control", bool(cfg.get("flow_control")), bool(cfg.get("deliver_subject")))
    cols.row_if("Headers Only", True, bool(cfg.get("headers_only")))
    it = cfg.get("inactive_threshold", 0)
    cols.row_if("Inactive Threshold", duration(it), it > 0 and not cfg.get("deliver_subject"))
    cols.row_if(
        "Max Pull Expire", duration(cfg.get("max_expires", 0)), cfg.get("max_expires", 0) > 0
    )
    cols.row_if("Max Pull Batch", cfg.get("max_batch", 0), cfg.get("max_batch", 0) > 0)
    cols.row_if("Max Pull MaxBytes", cfg.get("max_bytes", 0), cfg.get("max_bytes", 0) > 0)
    cols.row_if("Replicas", cfg.get("num_replicas", 0), cfg.get("num_replicas", 0) > 0)
    cols.row_if("Memory Storage", True, bool(cfg.get("mem_storage")))
    meta = {k: v for k, v in (cfg.get("metadata") or {}).items() if not k.startswith("_nats.")}
    if meta:
        cols.title("Metadata")
        for k in sorted(meta):
            cols.row(k, meta[k])
    cl = doc.get("cluster") or {}
    if cl.get("name"):
        render_cluster(cols, cl, doc.get("ts"), consumer=True)
    cols.title("State")
    render_meta_api(cols, cfg.get("metadata") or {})
    d, fl = doc.get("delivered") or {}, doc.get("ack_floor") or {}
    ts = doc.get("ts")
    text = f"Consumer sequence: {f(d.get('consumer_seq', 0))} Stream sequence: {f(d.get('stream_seq', 0))}"
    if d.get("last_active"):
        text += f" Last delivery: {duration(since_ns(d['last_active'], ts))} ago"
    cols.row("Last Delivered Message", text)
    if ack != "none":
        text = f"Consumer sequence: {f(fl.get('consumer_seq', 0))} Stream sequence: {f(fl.get('stream_seq', 0))}"
        if fl.get("last_active"):
            text += f" Last Ack: {duration(since_ns(fl['last_active'], ts))} ago"
        cols.row("Acknowledgment Floor", text)
        map_ = cfg.get("max_ack_pending", 0)
        if map_ > 0:
            cols.row(
                "Outstanding Acks", f"{f(doc.get('num_ack_pending', 0))} out of maximum {f(map_)}"
            )
        else:
            cols.row("Outstanding Acks", doc.get("num_ack_pending", 0))
        cols.row("Redelivered Messages", doc.get("num_redelivered", 0))
    cols.row("Unprocessed Messages", doc.get("num_pending", 0))
    if not cfg.get("deliver_subject"):
        mw = cfg.get("max_waiting", 0)
        of = f"maximum {f(mw)}" if mw > 0 else "unlimited"
        cols.row("Waiting Pulls", f"{f(doc.get('num_waiting', 0))} of {of}")
    elif doc.get("push_bound"):
        group = cfg.get("deliver_group")
        cols.row("Active Interest", f"Active using Queue Group {group}" if group else "Active")
    else:
        cols.row("Active Interest", "No interest")
    return cols.render()
