"""``trijet stream add|ls|info|edit|rm|purge|get|view|report`` (natscli's stream verbs).

Requests go to ``$JS.API.STREAM.*``; reports are rendered from the API's JSON
the way natscli renders them (see :func:`render_info`).
"""

from __future__ import annotations

import argparse
import base64
import json
from typing import Any

from trijet_cli import prompt
from trijet_cli.conn import CliError, JetStreamApi, fatal
from trijet_cli.fmt import Columns, duration, f, ibytes, local_time, print_json, since_ns, table
from trijet_cli.values import (
    DISCARD,
    DISCARD_NAME,
    RETENTION,
    RETENTION_NAME,
    STORAGE,
    STORAGE_NAME,
    choice,
    duration_ns,
    size_bytes,
    split_subjects,
)

INT64_MAX = (1 << 63) - 1


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    st = sub.add_parser("stream", aliases=["str"], help="JetStream Stream management")
    ss = st.add_subparsers(dest="verb", required=True, metavar="<verb>")

    def cfg_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--subjects", action="append", help="subjects the stream consumes")
        p.add_argument("--description")
        p.add_argument("--storage", help="file or memory")
        p.add_argument("--replicas", type=int, default=0)
        p.add_argument("--retention", help="limits, interest or work")
        p.add_argument("--discard", help="old or new")
        p.add_argument("--max-msgs", type=int, default=0)
        p.add_argument("--max-msgs-per-subject", type=int, default=0)
        p.add_argument("--max-bytes")
        p.add_argument("--max-age")
        p.add_argument("--max-msg-size")
        p.add_argument("--max-consumers", type=int, default=-1)
        p.add_argument("--dupe-window")
        p.add_argument("--allow-rollup", action="store_true", default=None)
        p.add_argument("--deny-delete", action="store_true", default=None)
        p.add_argument("--deny-purge", action="store_true", default=None)
        p.add_argument("--allow-direct", action="store_true")
        p.add_argument("--no-ack", action="store_true")
        p.add_argument("--tag", action="append", dest="tags", help="placement tag")
        p.add_argument("--cluster", help="placement cluster")
        p.add_argument("--defaults", action="store_true", help="accept default values")

    p = ss.add_parser("add", aliases=["create", "new"], parents=[common], help="create a stream")
    p.add_argument("stream", nargs="?")
    cfg_flags(p)
    p.set_defaults(run=add)

    p = ss.add_parser("edit", aliases=["update"], parents=[common], help="edit a stream")
    p.add_argument("stream")
    cfg_flags(p)
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=edit)

    p = ss.add_parser("ls", aliases=["list"], parents=[common], help="list streams")
    p.add_argument("-n", "--names", action="store_true", help="names only")
    p.add_argument("--subject", help="streams consuming this subject")
    p.add_argument("-a", "--all", action="store_true", help="include system streams")
    p.set_defaults(run=ls)

    p = ss.add_parser("info", parents=[common], help="stream information")
    p.add_argument("stream", nargs="?")
    p.set_defaults(run=info)

    p = ss.add_parser("rm", aliases=["delete", "del"], parents=[common], help="remove a stream")
    p.add_argument("stream", nargs="?")
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=rm)

    p = ss.add_parser("purge", parents=[common], help="purge a stream")
    p.add_argument("stream", nargs="?")
    p.add_argument("-f", "--force", action="store_true")
    p.add_argument("--subject")
    p.add_argument("--seq", type=int, default=0)
    p.add_argument("--keep", type=int, default=0)
    p.set_defaults(run=purge)

    p = ss.add_parser("get", parents=[common], help="retrieve a message by sequence")
    p.add_argument("stream")
    p.add_argument("id", nargs="?", type=int, default=0)
    p.add_argument("-S", "--last-for", help="the last message for a subject")
    p.set_defaults(run=get)

    p = ss.add_parser("view", parents=[common], help="view messages in a stream")
    p.add_argument("stream")
    p.add_argument("--id", type=int, default=1, help="start at this sequence")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--subject")
    p.set_defaults(run=view)

    p = ss.add_parser("report", parents=[common], help="report on streams")
    p.set_defaults(run=report)


# -- configuration ------------------------------------------------------------------------------


def _prepare_config(a: argparse.Namespace) -> dict[str, Any]:
    """natscli's ``prepareConfig``: flags, then ``--defaults``, then questions for the rest."""
    if not a.stream:
        a.stream = prompt.ask("Stream Name", required=True)
    subjects = split_subjects(a.subjects)
    if not subjects:
        subjects = split_subjects([prompt.ask("Subjects", required=True)])
    if a.defaults:
        a.storage = a.storage or "file"
        a.replicas = a.replicas or 1
        a.retention = a.retention or "Limits"
        a.discard = a.discard or "Old"
        a.max_msgs = a.max_msgs or -1
        a.max_msgs_per_subject = a.max_msgs_per_subject or -1
        a.max_bytes = a.max_bytes or "-1"
        a.max_age = a.max_age or "-1"
        a.max_msg_size = a.max_msg_size or "-1"
    if not a.storage:
        a.storage = prompt.select("Storage", ["file", "memory"])
    storage = choice(STORAGE, a.storage, "storage type")
    if not a.replicas:
        a.replicas = prompt.ask_int("Replication", "1")
    if a.replicas <= 0:
        fatal("replicas should be >= 1")
    if not a.retention:
        a.retention = prompt.select(
            "Retention Policy", ["Limits", "Interest", "Work Queue"], "Limits"
        )
    if not a.discard:
        a.discard = prompt.select("Discard Policy", ["New", "Old"], "Old")
    if not a.max_msgs:
        a.max_msgs = prompt.ask_int("Stream Messages Limit", "-1")
    if not a.max_msgs_per_subject:
        a.max_msgs_per_subject = prompt.ask_int("Per Subject Messages Limit", "-1")
    if a.max_bytes is None:
        a.max_bytes = prompt.ask("Total Stream Size", "-1")
    if a.max_age is None:
        a.max_age = prompt.ask("Message TTL", "-1")
    if a.max_msg_size is None:
        a.max_msg_size = prompt.ask("Max Message Size", "-1")
    max_age = duration_ns(a.max_age, "maximum age limit")
    if a.dupe_window is None:
        dflt = "2m0s" if not (0 < max_age < 120 * 10**9) else duration(max_age)
        a.dupe_window = dflt if a.defaults else prompt.ask("Duplicate tracking time window", dflt)
    if not a.defaults:
        if a.allow_rollup is None:
            a.allow_rollup = prompt.confirm("Allow message Roll-ups", False)
        if a.deny_delete is None:
            a.deny_delete = not prompt.confirm("Allow message deletion", True)
        if a.deny_purge is None:
            a.deny_purge = not prompt.confirm("Allow purging subjects or the entire stream", True)
    max_bytes = size_bytes(a.max_bytes, "maximum bytes")
    max_msg_size = size_bytes(a.max_msg_size, "maximum message size")
    cfg: dict[str, Any] = {
        "name": a.stream,
        "subjects": subjects,
        "retention": choice(RETENTION, a.retention, "retention policy"),
        "max_consumers": a.max_consumers,
        "max_msgs": a.max_msgs if a.max_msgs > 0 else -1,
        "max_bytes": max_bytes if max_bytes > 0 else -1,
        "max_age": max_age,
        "max_msgs_per_subject": a.max_msgs_per_subject if a.max_msgs_per_subject > 0 else -1,
        "max_msg_size": max_msg_size if max_msg_size > 0 else -1,
        "discard": choice(DISCARD, a.discard, "discard policy"),
        "storage": storage,
        "num_replicas": a.replicas,
        "duplicate_window": duration_ns(a.dupe_window, "duplicate window"),
        "allow_rollup_hdrs": bool(a.allow_rollup),
        "deny_delete": bool(a.deny_delete),
        "deny_purge": bool(a.deny_purge),
        "allow_direct": bool(a.allow_direct),
        "compression": "none",
    }
    if a.description:
        cfg["description"] = a.description
    if a.no_ack:
        cfg["no_ack"] = True
    if a.tags or a.cluster:
        cfg["placement"] = {k: v for k, v in (("cluster", a.cluster), ("tags", a.tags)) if v}
    return cfg


async def add(js: JetStreamApi, a: argparse.Namespace) -> None:
    cfg = _prepare_config(a)
    doc = await js.request(f"STREAM.CREATE.{a.stream}", cfg, what="could not create Stream")
    if a.json:
        print_json(doc)
        return
    print(f"Stream {a.stream} was created\n")
    print(render_info(doc), end="")


async def edit(js: JetStreamApi, a: argparse.Namespace) -> None:
    cur = await js.request(f"STREAM.INFO.{a.stream}", what="could not request Stream info")
    cfg = dict(cur["config"])
    if a.subjects:
        cfg["subjects"] = split_subjects(a.subjects)
    if a.description is not None:
        cfg["description"] = a.description
    if a.replicas:
        cfg["num_replicas"] = a.replicas
    if a.max_msgs:
        cfg["max_msgs"] = a.max_msgs
    if a.max_msgs_per_subject:
        cfg["max_msgs_per_subject"] = a.max_msgs_per_subject
    if a.max_bytes is not None:
        cfg["max_bytes"] = size_bytes(a.max_bytes, "maximum bytes")
    if a.max_age is not None:
        cfg["max_age"] = duration_ns(a.max_age, "maximum age limit")
    if a.max_msg_size is not None:
        cfg["max_msg_size"] = size_bytes(a.max_msg_size, "maximum message size")
    if a.discard:
        cfg["discard"] = choice(DISCARD, a.discard, "discard policy")
    if a.dupe_window:
        cfg["duplicate_window"] = duration_ns(a.dupe_window, "duplicate window")
    for flag, key in (("allow_rollup", "allow_rollup_hdrs"), ("deny_delete", "deny_delete")):
        if getattr(a, flag) is not None:
            cfg[key] = getattr(a, flag)
    if a.deny_purge is not None:
        cfg["deny_purge"] = a.deny_purge
    if cfg == cur["config"]:
        fatal("could not update Stream: no changes made")
    if not a.force and not prompt.confirm(f"Really edit Stream {a.stream}", False):
        return
    doc = await js.request(f"STREAM.UPDATE.{a.stream}", cfg, what="could not edit Stream")
    if a.json:
        print_json(doc)
        return
    print(f"Stream {a.stream} was updated\n")
    print(render_info(doc), end="")


async def _ask_stream(js: JetStreamApi, a: argparse.Namespace) -> str:
    if a.stream:
        return str(a.stream)
    names = await js.paged("STREAM.NAMES", "streams")
    if not names:
        fatal("no Streams are defined")
    return prompt.select("Select a Stream", sorted(names))


async def info(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    doc = await js.request(f"STREAM.INFO.{a.stream}", what="could not request Stream info")
    if a.json:
        print_json(doc)
        return
    print(render_info(doc), end="")
    print()


async def ls(js: JetStreamApi, a: argparse.Namespace) -> None:
    body = {"subject": a.subject} if a.subject else {}
    streams = await js.paged("STREAM.LIST", "streams", body)
    if not a.all:
        streams = [s for s in streams if not s["config"]["name"].startswith(("KV_", "OBJ_"))]
    names = sorted(s["config"]["name"] for s in streams)
    if a.json:
        print_json(names or None)  # natscli prints a nil list as null
        return
    if a.names:
        print("\n".join(names))
        return
    if not streams:
        print("No Streams defined")
        return
    streams.sort(key=lambda s: s["state"]["bytes"])
    rows = []
    for s in streams:
        st = s["state"]
        last = since_ns(st.get("last_ts"), s.get("ts")) if st.get("last_seq") else INT64_MAX
        rows.append(
            [
                s["config"]["name"],
                s["config"].get("description", ""),
                local_time(s.get("created")),
                f(st["messages"]),
                ibytes(st["bytes"]),
                duration(last),
            ]
        )
    title = f"Streams matching {a.subject}" if a.subject else "Streams"
    hdr = ["Name", "Description", "Created", "Messages", "Size", "Last Message"]
    print(table(hdr, rows, title))
    print()


async def rm(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.force and not a.stream:
        fatal("--force requires a stream name")
    a.stream = await _ask_stream(js, a)
    if not a.force and not prompt.confirm(f"Really delete Stream {a.stream}", False):
        return
    await js.request(f"STREAM.DELETE.{a.stream}", what="could not remove Stream")


async def purge(js: JetStreamApi, a: argparse.Namespace) -> None:
    a.stream = await _ask_stream(js, a)
    if not a.force and not prompt.confirm(f"Really purge Stream {a.stream}", False):
        return
    if a.seq and a.keep:
        fatal("sequence and keep cannot be combined when purging")
    body = {k: v for k, v in (("filter", a.subject), ("seq", a.seq), ("keep", a.keep)) if v}
    doc = await js.request(f"STREAM.PURGE.{a.stream}", body or None, what="could not purge Stream")
    if a.json:
        print_json(doc)
        return
    print(f"Purged {doc.get('purged', 0)} messages from {a.stream}\n")
    info_doc = await js.request(f"STREAM.INFO.{a.stream}", what="could not request Stream info")
    print(render_info(info_doc, state_only=True), end="")


def _decode_msg(m: dict[str, Any]) -> tuple[bytes, str]:
    data = base64.b64decode(m.get("data") or "")
    hdrs = base64.b64decode(m["hdrs"]).decode(errors="replace") if m.get("hdrs") else ""
    return data, hdrs


def _print_stored(m: dict[str, Any], stream: str) -> None:
    data, hdrs = _decode_msg(m)
    print(
        f"Item: {stream}#{m['seq']} received {local_time(m.get('time'))} on Subject {m['subject']}"
    )
    print()
    if hdrs:
        print("Headers:")
        for line in hdrs.split("\r\n")[1:]:
            if line:
                name, _, value = line.partition(":")
                print(f"  {name}: {value.strip()}")
        print()
    print(data.decode(errors="replace"))
    print()


async def get(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.last_for:
        body: dict[str, Any] = {"last_by_subj": a.last_for}
    else:
        if not a.id:
            a.id = prompt.ask_int("Message Sequence to retrieve", "")
        body = {"seq": a.id}
    doc = await js.request(f"STREAM.MSG.GET.{a.stream}", body, what="could not retrieve message")
    if a.json:
        print_json(doc["message"])
        return
    _print_stored(doc["message"], a.stream)


async def view(js: JetStreamApi, a: argparse.Namespace) -> None:
    seq, shown = a.id, 0
    while shown < a.count:
        body: dict[str, Any] = {"seq": seq, "next_by_subj": a.subject or ">"}
        try:
            doc = await js.request(f"STREAM.MSG.GET.{a.stream}", body, what="could not view Stream")
        except CliError as exc:
            if "(10037)" in str(exc):  # no message found: the end of the stream
                break
            raise
        m = doc["message"]
        if a.json:
            print(json.dumps(m))
        else:
            data, _ = _decode_msg(m)
            print(f"[{m['seq']}] Subject: {m['subject']} Received: {local_time(m.get('time'))}")
            print()
            print(data.decode(errors="replace"))
            print()
        seq, shown = int(m["seq"]) + 1, shown + 1
    if shown == 0 and not a.json:
        print("No messages")


async def report(js: JetStreamApi, a: argparse.Namespace) -> None:
    streams = await js.paged("STREAM.LIST", "streams")
    streams.sort(key=lambda s: s["config"]["name"])
    if a.json:
        print_json(streams)
        return
    if not streams:
        print("No Streams defined")
        return
    rows = []
    for s in streams:
        cfg, st, cl = s["config"], s["state"], s.get("cluster") or {}
        replicas = []
        if cl.get("leader"):
            replicas.append(f"{cl['leader']}*")
        for r in cl.get("replicas") or []:
            mark = "" if r.get("current") else "!"
            replicas.append(f"{r['name']}{mark}")
        rows.append(
            [
                cfg["name"],
                STORAGE_NAME.get(cfg["storage"], cfg["storage"]),
                st.get("consumer_count", 0),
                st["messages"],
                ibytes(st["bytes"]),
                st.get("num_deleted", 0),
                ", ".join(sorted(replicas)),
            ]
        )
    hdr = ["Stream", "Storage", "Consumers", "Messages", "Bytes", "Deleted", "Replicas"]
    print(table(hdr, rows, "Stream Report"))
    print()


# -- rendering ----------------------------------------------------------------------------------


def _unlimited(v: int, render: Any = f) -> str:
    return "unlimited" if v is None or v <= 0 else render(v)


def render_meta_api(cols: Columns, meta: dict[str, str]) -> None:
    ver, level, req = (
        meta.get("_nats.ver", ""),
        meta.get("_nats.level", ""),
        meta.get("_nats.req.level", ""),
    )
    if ver:
        cols.row("Host Version", ver)
    if level or req:
        cols.row("Required API Level", f"{req or '0'} hosted at level {level}")


def render_cluster(
    cols: Columns, cl: dict[str, Any], ts: str | None, *, consumer: bool = False
) -> None:
    """natscli's "Cluster Information" section (a consumer's says Raft Group, no lag)."""
    cols.title("Cluster Information")
    cols.row("Name", cl["name"])
    cols.row_if_not_empty("Raft Group" if consumer else "Cluster Group", cl.get("raft_group"))
    if cl.get("leader_since"):
        cols.row("Leader", f"{cl.get('leader', '')} ({duration(since_ns(cl['leader_since'], ts))})")
    else:
        cols.row("Leader", cl.get("leader", ""))
    for r in cl.get("replicas") or []:
        state = [r["name"], "current" if r.get("current") else "outdated"]
        if r.get("offline") and not consumer:
            state.append("OFFLINE")
        active = int(r.get("active") or 0)
        state.append(f"seen {duration(active)} ago" if 0 < active < INT64_MAX else "not seen")
        lag = 0 if consumer else int(r.get("lag") or 0)
        if lag > 1:
            state.append(f"{f(lag)} operations behind")
        elif lag == 1:
            state.append("1 operation behind")
        cols.row("Replica", state)


def render_info(doc: dict[str, Any], *, state_only: bool = False) -> str:
    """natscli's ``showStreamInfo`` of a StreamInfo JSON document."""
    cfg, st = doc["config"], doc["state"]
    name, created = cfg["name"], local_time(doc.get("created"))
    if state_only:
        cols = Columns(f"State for Stream {name} created {created}")
    else:
        cols = Columns(f"Information for Stream {name} created {created}")
        _render_config(cols, cfg)
    cl = doc.get("cluster") or {}
    if cl.get("name"):
        render_cluster(cols, cl, doc.get("ts"))
        cols.line()
    cols.title("State")
    render_meta_api(cols, cfg.get("metadata") or {})
    cols.row("Messages", st["messages"])
    cols.row("Bytes", ibytes(st["bytes"]))
    for label, seq_key, ts_key in (
        ("First Sequence", "first_seq", "first_ts"),
        ("Last Sequence", "last_seq", "last_ts"),
    ):
        t = st.get(ts_key)
        if not t or t.startswith(("0001-01-01", "1970-01-01T00:00:00Z")):
            cols.row(label, st[seq_key])
        else:
            cols.row(label, f"{f(st[seq_key])} @ {local_time(t)}")
    if st.get("num_deleted"):
        cols.row("Deleted Messages", st["num_deleted"])
    cols.row("Active Consumers", st.get("consumer_count", 0))
    if st.get("num_subjects"):
        cols.row("Number of Subjects", st["num_subjects"])
    return cols.render()


def _render_config(cols: Columns, cfg: dict[str, Any]) -> None:
    cols.row_if_not_empty("Description", cfg.get("description"))
    cols.row_if("Subjects", cfg.get("subjects") or [], bool(cfg.get("subjects")))
    cols.row("Replicas", cfg.get("num_replicas", 1))
    cols.row_if("Sealed", True, bool(cfg.get("sealed")))
    cols.row("Storage", STORAGE_NAME.get(cfg["storage"], cfg["storage"]))
    comp = cfg.get("compression") or "none"
    cols.row_if("Compression", comp, comp != "none")
    if cfg.get("first_seq"):
        cols.row("First Sequence", cfg["first_seq"])
    pl = cfg.get("placement") or {}
    cols.row_if_not_empty("Placement Cluster", pl.get("cluster"))
    cols.row_if("Placement Tags", pl.get("tags") or [], bool(pl.get("tags")))
    cols.title("Options")
    st_ = cfg.get("subject_transform") or {}
    if st_.get("dest"):
        cols.row("Subject Transform", f"{st_.get('src') or '>'} to {st_['dest']}")
    rp = cfg.get("republish")
    if rp:
        label = "Republishing Headers" if rp.get("headers_only") else "Republishing"
        cols.row(label, f"{rp.get('src', '')} to {rp.get('dest', '')}")
    cols.row("Retention", RETENTION_NAME.get(cfg["retention"], cfg["retention"]))
    cols.row("Acknowledgments", not cfg.get("no_ack", False))
    dnp = (
        "New Per Subject"
        if cfg.get("discard_new_per_subject")
        else DISCARD_NAME.get(cfg["discard"], cfg["discard"])
    )
    cols.row("Discard Policy", dnp)
    cols.row("Duplicate Window", duration(cfg.get("duplicate_window", 0)))
    cols.row_if("Direct Get", True, bool(cfg.get("allow_direct")))
    cols.row_if("Mirror Direct Get", True, bool(cfg.get("mirror_direct")))
    cols.row("Allows Atomic Batch Publish", bool(cfg.get("allow_atomic")))
    cols.row("Allows Fast Batch Publish", bool(cfg.get("allow_batched")))
    cols.row("Allows Counters", bool(cfg.get("allow_msg_counter")))
    cols.row("Allows Msg Delete", not cfg.get("deny_delete", False))
    cols.row("Allows Per-Message TTL", bool(cfg.get("allow_msg_ttl")))
    cols.row("Allows Purge", not cfg.get("deny_purge", False))
    cols.row("Allows Schedules", bool(cfg.get("allow_msg_schedules")))
    if cfg.get("allow_msg_ttl") and cfg.get("subject_delete_marker_ttl"):
        cols.row("Subject Delete Markers TTL", duration(cfg["subject_delete_marker_ttl"]))
    cols.row("Allows Rollups", bool(cfg.get("allow_rollup_hdrs")))
    cols.title("Limits")
    cols.row(
        "Maximum Messages", "unlimited" if cfg.get("max_msgs", -1) == -1 else f(cfg["max_msgs"])
    )
    cols.row("Maximum Per Subject", _unlimited(cfg.get("max_msgs_per_subject", -1)))
    cols.row(
        "Maximum Bytes", "unlimited" if cfg.get("max_bytes", -1) == -1 else ibytes(cfg["max_bytes"])
    )
    cols.row("Maximum Age", _unlimited(cfg.get("max_age", 0), duration))
    mms = cfg.get("max_msg_size", -1)
    cols.row("Maximum Message Size", "unlimited" if mms == -1 else ibytes(mms))
    mc = cfg.get("max_consumers", -1)
    cols.row("Maximum Consumers", "unlimited" if mc == -1 else f(mc))
    cl = cfg.get("consumer_limits") or {}
    if cl.get("inactive_threshold"):
        cols.row("Consumer Inactive Threshold", duration(cl["inactive_threshold"]))
    if cl.get("max_ack_pending"):
        cols.row("Consumer Max Ack Pending", cl["max_ack_pending"])
    meta = {k: v for k, v in (cfg.get("metadata") or {}).items() if not k.startswith("_nats.")}
    if meta:
        cols.title("Metadata")
        for k in sorted(meta):
            cols.row(k, meta[k])
    if cfg.get("mirror") or cfg.get("sources"):
        cols.title("Replication")
    if cfg.get("mirror"):
        cols.row("Mirror", cfg["mirror"].get("name", ""))
    for i, s in enumerate(sorted(cfg.get("sources") or [], key=lambda s: s.get("name", ""))):
        cols.row("Sources" if i == 0 else "", s.get("name", ""))
    cols.line()
