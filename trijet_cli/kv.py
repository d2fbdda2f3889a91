"""``trijet kv add|put|get|del|ls|watch|history|info|rm`` (natscli's Key-Value verbs).

A bucket is the stream ``KV_<bucket>`` on subjects ``$KV.<bucket>.>``: created
with the configuration every NATS client library uses (history as
``max_msgs_per_subject``, discard new, roll-ups allowed, deletes denied, direct
get allowed, duplicate window 2m or the TTL when shorter).  Values are read with
``STREAM.MSG.GET`` (last by subject); a ``KV-Operation`` of ``DEL`` or ``PURGE``
means the key is gone.  ``watch`` uses nats-py's KV watcher.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import sys
from typing import Any

from trijet_cli import prompt
from trijet_cli.conn import CliError, JetStreamApi, fatal
from trijet_cli.fmt import Columns, duration, f, ibytes, local_time, print_json, since_ns, table
from trijet_cli.streams import render_cluster
from trijet_cli.values import STORAGE, STORAGE_NAME, choice, duration_ns, size_bytes

DUPE_WINDOW_NS = 120 * 10**9
NO_MESSAGE = "(10037)"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    kv = sub.add_parser("kv", help="Key-Value store")
    ks = kv.add_subparsers(dest="verb", required=True, metavar="<verb>")

    p = ks.add_parser("add", aliases=["new"], parents=[common], help="create a bucket")
    p.add_argument("bucket")
    p.add_argument("--history", type=int, default=1)
    p.add_argument("--ttl", default="")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--max-value-size", default="-1")
    p.add_argument("--max-bucket-size", default="-1")
    p.add_argument("--storage", default="file")
    p.add_argument("--description", default="")
    p.set_defaults(run=add)

    p = ks.add_parser("put", parents=[common], help="put a value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?")
    p.set_defaults(run=put)

    p = ks.add_parser("create", parents=[common], help="put a value only if the key is new")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?")
    p.set_defaults(run=create)

    p = ks.add_parser("get", parents=[common], help="get a value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--raw", action="store_true")
    p.set_defaults(run=get)

    p = ks.add_parser("del", aliases=["delete"], parents=[common], help="delete a key")
    p.add_argument("bucket")
    p.add_argument("key", nargs="?")
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=delete)

    p = ks.add_parser(
        "ls", aliases=["list"], parents=[common], help="list buckets, or keys of a bucket"
    )
    p.add_argument("bucket", nargs="?")
    p.add_argument("-n", "--names", action="store_true")
    p.set_defaults(run=ls)

    p = ks.add_parser("history", parents=[common], help="a key's history")
    p.add_argument("bucket")
    p.add_argument("key")
    p.set_defaults(run=history)

    p = ks.add_parser("watch", parents=[common], help="watch a bucket or key")
    p.add_argument("bucket")
    p.add_argument("key", nargs="?", default=">")
    p.add_argument("--count", type=int, default=0, help="exit after this many updates")
    p.set_defaults(run=watch)

    p = ks.add_parser("info", aliases=["status"], parents=[common], help="bucket information")
    p.add_argument("bucket")
    p.set_defaults(run=info)

    p = ks.add_parser("rm", parents=[common], help="remove a bucket")
    p.add_argument("bucket")
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=rm)


def _value(v: str | None) -> bytes:
    if v is None:
        return sys.stdin.buffer.read()
    return v.encode()


async def add(js: JetStreamApi, a: argparse.Namespace) -> None:
    ttl = duration_ns(a.ttl, "ttl") if a.ttl else 0
    cfg: dict[str, Any] = {
        "name": f"KV_{a.bucket}",
        "subjects": [f"$KV.{a.bucket}.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": size_bytes(a.max_bucket_size, "bucket size"),
        "max_age": ttl,
        "max_msgs_per_subject": a.history,
        "max_msg_size": size_bytes(a.max_value_size, "value size"),
        "discard": "new",
        "storage": choice(STORAGE, a.storage, "storage type"),
        "num_replicas": a.replicas,
        "duplicate_window": min(ttl, DUPE_WINDOW_NS) if ttl else DUPE_WINDOW_NS,
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "compression": "none",
    }
    if a.description:
        cfg["description"] = a.description
    doc = await js.request(f"STREAM.CREATE.KV_{a.bucket}", cfg, what="could not create bucket")
    if a.json:
        print_json(doc)
        return
    print(render_status(a.bucket, doc), end="")


async def info(js: JetStreamApi, a: argparse.Namespace) -> None:
    doc = await js.request(f"STREAM.INFO.KV_{a.bucket}", what="could not load bucket")
    if a.json:
        print_json(doc)
        return
    print(render_status(a.bucket, doc), end="")


async def rm(js: JetStreamApi, a: argparse.Namespace) -> None:
    if not a.force and not prompt.confirm(f"Deleted bucket {a.bucket}?", False):
        print("Skipping delete")
        return
    await js.request(f"STREAM.DELETE.KV_{a.bucket}", what="could not delete bucket")


async def _publish(
    js: JetStreamApi, subject: str, data: bytes, hdrs: dict[str, str] | None
) -> dict[str, Any]:
    try:
        msg = await js.nc.request(subject, data, timeout=js.opts.timeout_s, headers=hdrs)
    except Exception as exc:  # timeouts and no responders both mean the bucket did not answer
        fatal(f"nats: {exc or type(exc).__name__}")
    ack = json.loads(msg.data)
    if ack.get("error"):
        e = ack["error"]
        fatal(f"{e.get('description')} ({e.get('err_code')})")
    return dict(ack)


async def put(js: JetStreamApi, a: argparse.Namespace) -> None:
    data = _value(a.value)
    await _publish(js, f"$KV.{a.bucket}.{a.key}", data, None)
    print(a.value if a.value is not None else data.decode(errors="replace"))


async def create(js: JetStreamApi, a: argparse.Namespace) -> None:
    cur = await _last(js, a.bucket, a.key)
    data = _value(a.value)
    expect = str(cur["seq"]) if cur is not None and _op(cur) != "PUT" else "0"
    await _publish(
        js, f"$KV.{a.bucket}.{a.key}", data, {"Nats-Expected-Last-Subject-Sequence": expect}
    )
    print(a.value if a.value is not None else data.decode(errors="replace"))


def _headers(m: dict[str, Any]) -> dict[str, str]:
    if not m.get("hdrs"):
        return {}
    out = {}
    for line in base64.b64decode(m["hdrs"]).decode(errors="replace").split("\r\n")[1:]:
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _op(m: dict[str, Any]) -> str:
    return _headers(m).get("KV-Operation", "PUT")


async def _last(js: JetStreamApi, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        doc = await js.request(
            f"STREAM.MSG.GET.KV_{bucket}", {"last_by_subj": f"$KV.{bucket}.{key}"}
        )
    except CliError as exc:
        if NO_MESSAGE in str(exc):
            return None
        raise
    return dict(doc["message"])


async def get(js: JetStreamApi, a: argparse.Namespace) -> None:
    m = await _last(js, a.bucket, a.key)
    if m is None or _op(m) != "PUT":
        fatal("nats: key not found")
    data = base64.b64decode(m.get("data") or "")
    if a.json:
        print_json(
            {
                "bucket": a.bucket,
                "key": a.key,
                "value": data.decode(errors="replace"),
                "revision": m["seq"],
                "created": m.get("time"),
                "operation": "PUT",
            }
        )
        return
    if a.raw:
        print(data.decode(errors="replace"))
        return
    print(f"{a.bucket} > {a.key} revision: {m['seq']} created @ {local_time(m.get('time'))}")
    print()
    print(data.decode(errors="replace"))
    print()


async def delete(js: JetStreamApi, a: argparse.Namespace) -> None:
    if not a.key:
        a.key = prompt.ask("Key", required=True)
    if not a.force and not prompt.confirm(f"Delete key {a.bucket} > {a.key}?", False):
        print("Skipping delete")
        return
    await _publish(js, f"$KV.{a.bucket}.{a.key}", b"", {"KV-Operation": "DEL"})


async def _keys(js: JetStreamApi, bucket: str) -> list[str]:
    prefix = f"$KV.{bucket}."
    doc = await js.request(
        f"STREAM.INFO.KV_{bucket}", {"subjects_filter": f"{prefix}>"}, what="could not load bucket"
    )
    keys = []
    for subj in sorted((doc.get("state") or {}).get("subjects") or {}):
        m = await _last(js, bucket, subj[len(prefix) :])
        if m is not None and _op(m) == "PUT":
            keys.append(subj[len(prefix) :])
    return keys


async def ls(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.bucket:
        keys = await _keys(js, a.bucket)
        if a.json:
            print_json(keys)
        elif keys:
            print("\n".join(keys))
        else:
            print("No keys found in bucket")
        return
    streams = await js.paged("STREAM.LIST", "streams", {"subject": "$KV.*.>"})
    streams = [s for s in streams if s["config"]["name"].startswith("KV_")]
    names = sorted(s["config"]["name"][3:] for s in streams)
    if a.json:
        print_json(names)
        return
    if a.names:
        print("\n".join(names))
        return
    if not streams:
        print("No Key-Value buckets found")
        return
    rows = []
    for s in sorted(streams, key=lambda s: s["config"]["name"]):
        st = s["state"]
        rows.append(
            [
                s["config"]["name"][3:],
                s["config"].get("description", ""),
                local_time(s.get("created")),
                ibytes(st["bytes"]),
                f(st["messages"]),
                duration(since_ns(st.get("last_ts")) if st.get("last_seq") else (1 << 63) - 1),
            ]
        )
    print(
        table(
            ["Bucket", "Description", "Created", "Size", "Values", "Last Update"],
            rows,
            "Key-Value Buckets",
        )
    )
    print()


async def history(js: JetStreamApi, a: argparse.Namespace) -> None:
    subject = f"$KV.{a.bucket}.{a.key}"
    seq, entries = 1, []
    while True:
        try:
            doc = await js.request(
                f"STREAM.MSG.GET.KV_{a.bucket}", {"seq": seq, "next_by_subj": subject}
            )
        except CliError as exc:
            if NO_MESSAGE in str(exc):
                break
            raise
        m = doc["message"]
        entries.append(m)
        seq = int(m["seq"]) + 1
    if not entries:
        fatal("nats: key not found")
    if a.json:
        print_json(entries)
        return
    rows = []
    for m in entries:
        data = base64.b64decode(m.get("data") or "")
        rows.append(
            [
                a.key,
                int(m["seq"]),
                _op(m),
                local_time(m.get("time")),
                f(len(data)),
                data.decode(errors="replace"),
            ]
        )
    print(
        table(
            ["Key", "Revision", "Op", "Created", "Length", "Value"],
            rows,
            f"History for {a.bucket} > {a.key}",
        )
    )
    print()


async def watch(js: JetStreamApi, a: argparse.Namespace) -> None:
    kv = await js.nc.jetstream(timeout=js.opts.timeout_s).key_value(a.bucket)
    w: Any = await kv.watch(a.key)  # nats-py's watcher is untyped
    seen = 0
    while not a.count or seen < a.count:
        e = await w.updates(timeout=None)
        if e is None:
            continue  # the initial values are all delivered
        seen += 1
        op = e.operation or "PUT"
        created = local_time(e.created if isinstance(e.created, dt.datetime) else None)
        if op in ("DEL", "PURGE"):
            print(f"[{created}] {op} {a.bucket} > {e.key}")
        else:
            print(
                f"[{created}] {op} {a.bucket} > {e.key}: {(e.value or b'').decode(errors='replace')}"
            )
        sys.stdout.flush()
    await w.stop()


def render_status(bucket: str, doc: dict[str, Any]) -> str:
    """natscli's KV ``showStatus`` of the bucket's StreamInfo."""
    cfg, st = doc["config"], doc["state"]
    cols = Columns(
        f"Information for Key-Value Store Bucket {bucket} created {local_time(doc.get('created'))}"
    )
    cols.title("Configuration")
    cols.row("Bucket Name", bucket)
    cols.row("History Kept", int(cfg.get("max_msgs_per_subject", 1)))
    cols.row("Values Stored", int(st.get("messages", 0)))
    cols.row("Compressed", (cfg.get("compression") or "none") != "none")
    marker = int(cfg.get("subject_delete_marker_ttl") or 0)
    cols.row("Per-Key TTL Supported", marker > 0)
    cols.row_if("Limit Marker TTL", duration(marker), marker > 0)
    cols.row("Backing Store Kind", "JetStream")
    cols.row_if_not_empty("Description", cfg.get("description"))
    cols.row("Bucket Size", ibytes(st.get("bytes", 0)))
    mb = cfg.get("max_bytes", -1)
    cols.row("Maximum Bucket Size", "unlimited" if mb == -1 else ibytes(mb))
    ms = cfg.get("max_msg_size", -1)
    cols.row("Maximum Value Size", "unlimited" if ms == -1 else ibytes(ms))
    age = cfg.get("max_age", 0)
    cols.row("Maximum Age", "unlimited" if age <= 0 else duration(age))
    cols.row("JetStream Stream", cfg["name"])
    cols.row("Storage", STORAGE_NAME.get(cfg["storage"], cfg["storage"]))
    cl = doc.get("cluster") or {}
    if cl.get("name"):
        render_cluster(cols, cl, doc.get("ts"))
    return cols.render()
