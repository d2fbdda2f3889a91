"""``trijet object add|put|get|ls|rm|info`` (natscli's Object Store verbs), via nats-py's object store."""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

from nats.js.api import ObjectStoreConfig, StorageType

from trijet_cli import prompt
from trijet_cli.conn import JetStreamApi, fatal
from trijet_cli.fmt import Columns, duration, ibytes, local_time, print_json, table
from trijet_cli.values import duration_ns, size_bytes


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    ob = sub.add_parser("object", aliases=["obj"], help="Object Store")
    os_ = ob.add_subparsers(dest="verb", required=True, metavar="<verb>")

    p = os_.add_parser("add", parents=[common], help="create a bucket")
    p.add_argument("bucket")
    p.add_argument("--ttl", default="")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--max-bucket-size", default="-1")
    p.add_argument("--storage", default="file")
    p.add_argument("--description", default="")
    p.set_defaults(run=add)

    p = os_.add_parser("put", parents=[common], help="store a file")
    p.add_argument("bucket")
    p.add_argument("file", nargs="?", help="file to store (stdin when absent, with --name)")
    p.add_argument("--name")
    p.set_defaults(run=put)

    p = os_.add_parser("get", parents=[common], help="retrieve a file")
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument("-O", "--output", help="file to write (default: the object's name)")
    p.set_defaults(run=get)

    p = os_.add_parser(
        "ls", aliases=["list"], parents=[common], help="list buckets or a bucket's objects"
    )
    p.add_argument("bucket", nargs="?")
    p.set_defaults(run=ls)

    p = os_.add_parser("rm", aliases=["del"], parents=[common], help="remove an object or a bucket")
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--force", action="store_true")
    p.set_defaults(run=rm)

    p = os_.add_parser("info", parents=[common], help="bucket or object information")
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.set_defaults(run=info)


async def add(js: JetStreamApi, a: argparse.Namespace) -> None:
    cfg = ObjectStoreConfig(
        bucket=a.bucket,
        description=a.description or None,
        ttl=duration_ns(a.ttl, "ttl") / 1e9 if a.ttl else None,
        max_bytes=size_bytes(a.max_bucket_size, "bucket size"),
        storage=StorageType.MEMORY if a.storage.startswith("m") else StorageType.FILE,
        replicas=a.replicas,
    )
    await js.nc.jetstream(timeout=js.opts.timeout_s).create_object_store(a.bucket, config=cfg)
    await info(js, argparse.Namespace(bucket=a.bucket, name=None, json=a.json))


def _digest(d: str | None) -> str:
    if not d:
        return ""
    algo, _, b64 = d.partition("=")
    return f"{algo} {base64.urlsafe_b64decode(b64 + '=' * (-len(b64) % 4)).hex()}"


async def put(js: JetStreamApi, a: argparse.Namespace) -> None:
    store = await js.nc.jetstream(timeout=js.opts.timeout_s).object_store(a.bucket)
    if a.file:
        data = await asyncio.to_thread(Path(a.file).read_bytes)
        name = a.name or os.path.basename(a.file)
    else:
        if not a.name:
            fatal("--name is required when reading from stdin")
        data, name = sys.stdin.buffer.read(), a.name
    await store.put(name, data)
    await _show_object(store, a.bucket, name, a.json)


async def _show_object(store: Any, bucket: str, name: str, as_json: bool) -> None:
    nfo = await store.get_info(name)
    if as_json:
        print_json(
            {
                "name": nfo.name,
                "bucket": nfo.bucket,
                "size": nfo.size,
                "chunks": nfo.chunks,
                "digest": nfo.digest,
                "mtime": nfo.mtime,
                "deleted": bool(nfo.deleted),
            }
        )
        return
    cols = Columns(f"Object information for {bucket} > {name}")
    cols.row("Size", ibytes(nfo.size or 0))
    cols.row("Modification Time", local_time(nfo.mtime))
    cols.row("Chunks", int(nfo.chunks or 0))
    cols.row("Digest", _digest(nfo.digest))
    cols.row_if("Deleted", True, bool(nfo.deleted))
    print(cols.render(), end="")


async def get(js: JetStreamApi, a: argparse.Namespace) -> None:
    store = await js.nc.jetstream(timeout=js.opts.timeout_s).object_store(a.bucket)
    start = time.monotonic()
    res = await store.get(a.name)
    out = a.output or os.path.basename(a.name)
    if out == "-":
        sys.stdout.buffer.write(res.data or b"")
        return
    await asyncio.to_thread(Path(out).write_bytes, res.data or b"")
    elapsed = int((time.monotonic() - start) * 1e9)
    print(f"Wrote: {ibytes(len(res.data or b''))} to {out} in {duration(elapsed)}")


async def ls(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.bucket:
        store = await js.nc.jetstream(timeout=js.opts.timeout_s).object_store(a.bucket)
        try:
            items = await store.list(ignore_deletes=True)
        except Exception:  # nats-py raises NotFoundError for an empty bucket
            items = []
        if a.json:
            print_json([i.name for i in items])
            return
        if not items:
            print("No entries found")
            return
        rows = [[i.name, ibytes(i.size or 0), local_time(i.mtime)] for i in items]
        print(table(["Name", "Size", "Time"], rows, "Bucket Contents"))
        print()
        return
    streams = await js.paged("STREAM.LIST", "streams", {"subject": "$O.*.>"})
    streams = sorted(
        (s for s in streams if s["config"]["name"].startswith("OBJ_")),
        key=lambda s: s["config"]["name"],
    )
    if a.json:
        print_json([s["config"]["name"][4:] for s in streams])
        return
    if not streams:
        print("No Object Store buckets found")
        return
    rows = []
    for s in streams:
        last = s["state"].get("last_ts")
        ago = (
            (
                dt.datetime.now(dt.UTC)
                - dt.datetime.fromisoformat(last[:26].rstrip("Z") + "+00:00")
            ).total_seconds()
            if last
            else 0
        )
        rows.append(
            [
                s["config"]["name"][4:],
                s["config"].get("description", ""),
                local_time(s.get("created")),
                ibytes(s["state"]["bytes"]),
                duration(int(ago * 1e9)),
            ]
        )
    print(
        table(
            ["Bucket", "Description", "Created", "Size", "Last Update"],
            rows,
            "Object Store Buckets",
        )
    )
    print()


async def rm(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.name:
        if not a.force and not prompt.confirm(f"Delete {a.bucket} > {a.name}?", False):
            print("Skipping delete")
            return
        store = await js.nc.jetstream(timeout=js.opts.timeout_s).object_store(a.bucket)
        await store.delete(a.name)
        print(f"Removed {a.bucket} > {a.name}")
        return
    if not a.force and not prompt.confirm(f"Delete bucket {a.bucket}?", False):
        print("Skipping delete")
        return
    await js.request(f"STREAM.DELETE.OBJ_{a.bucket}", what="could not delete bucket")


async def info(js: JetStreamApi, a: argparse.Namespace) -> None:
    if a.name:
        store = await js.nc.jetstream(timeout=js.opts.timeout_s).object_store(a.bucket)
        await _show_object(store, a.bucket, a.name, a.json)
        return
    doc = await js.request(f"STREAM.INFO.OBJ_{a.bucket}", what="could not load bucket")
    if a.json:
        print_json(doc)
        return
    cfg, st = doc["config"], doc["state"]
    cols = Columns(
        f"Information for Object Store Bucket {a.bucket} created {local_time(doc.get('created'))}"
    )
    cols.title("Configuration")
    cols.row("Bucket Name", a.bucket)
    cols.row_if_not_empty("Description", cfg.get("description"))
    cols.row("Replicas", cfg.get("num_replicas", 1))
    cols.row("TTL", "unlimited" if not cfg.get("max_age") else duration(cfg["max_age"]))
    cols.row("Sealed", bool(cfg.get("sealed")))
    cols.row("Size", ibytes(st.get("bytes", 0)))
    mb = cfg.get("max_bytes", -1)
    cols.row("Maximum Bucket Size", "unlimited" if mb == -1 else ibytes(mb))
    cols.row("Storage", cfg.get("storage", "file").capitalize())
    cols.row("Backing Store Kind", "JetStream")
    cols.row("JetStream Stream", cfg["name"])
    print(cols.render(), end="")
