"""Benchmark of the file stream store.

Run: ``python -m bench.store_bench [--n 1000000] [--payload 128] [--compression]
[--reference]``.

Measures, for ``n`` messages of ``payload`` bytes:

* append throughput with ``SyncPolicy.ALWAYS`` group commit (``--batch``
  appends, then one ``sync()``), and with the ``INTERVAL`` policy (one
  ``sync()`` per ``--interval-msgs`` appends, standing in for a timer),
* sequential and random ``load(seq)`` throughput,
* reopen time and peak RSS of a *fresh process* opening the store (the
  acceptance target is 1M x 128 B in <= 1.5 s and <= 150 MB), plus the
  same process's RSS before opening (interpreter + imports) for context,
* with ``--reference``: the same data published into the reference
  nats-server (``.venv/bin/nats-server -js``) through nats-py, then the time
  from restart until the stream reports all messages, and its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from store.api import SyncPolicy
from store.file import FileStreamStore

_REOPEN_SNIPPET = r"""
import json, resource, sys, time
def hwm_kb():
    # VmHWM is per address space; ru_maxrss of a child can carry the parent's
    # peak across fork+exec, so prefer /proc when it exists.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
from store.file import FileStreamStore
t1 = time.perf_counter()
base_rss = hwm_kb()
t2 = time.perf_counter()
st = FileStreamStore(sys.argv[1], compression=sys.argv[2] == "1")
t3 = time.perf_counter()
s = st.state()
rep = st.recovery_report
st.close()
print(json.dumps({
    "import_s": t1 - t0, "open_s": t3 - t2, "msgs": s.msgs, "last_seq": s.last_seq,
    "rss_before_kb": base_rss,
    "rss_peak_kb": hwm_kb(),
    "clean": rep.clean, "rebuilt": len(rep.index_rebuilt),
}))
"""


def _fmt_rate(n: int, secs: float) -> str:
    return f"{n / secs:,.0f} msg/s" if secs > 0 else "-"


def bench_append(
    d: Path,
    n: int,
    payload: bytes,
    batch: int,
    policy: SyncPolicy,
    compression: bool,
    subjects: int,
) -> tuple[float, int]:
    st = FileStreamStore(d, compression=compression, sync_policy=policy)
    subs = [f"bench.s{i}" for i in range(subjects)]
    syncs = 0
    t0 = time.perf_counter()
    for i in range(n):
        st.append(subs[i % subjects], b"", payload, 1_700_000_000_000_000_000 + i)
        if (i + 1) % batch == 0:
            st.sync()
            syncs += 1
    st.sync()
    secs = time.perf_counter() - t0
    st.close()
    return secs, syncs + 1


def bench_load(d: Path, n: int, compression: bool) -> tuple[float, float, int]:
    st = FileStreamStore(d, compression=compression)
    t0 = time.perf_counter()
    for s in range(1, n + 1):
        st.load(s)
    seq_secs = time.perf_counter() - t0
    rng = random.Random(1)
    k = min(n, 200_000)
    picks = [rng.randrange(1, n + 1) for _ in range(k)]
    t0 = time.perf_counter()
    for s in picks:
        st.load(s)
    rnd_secs = time.perf_counter() - t0
    st.close()
    return seq_secs, rnd_secs, k


def bench_reopen(d: Path, compression: bool) -> dict[str, object]:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _REOPEN_SNIPPET, str(d), "1" if compression else "0"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_reference(n: int, payload: bytes, subjects: int) -> dict[str, float] | None:
    """Load ``n`` messages into the reference nats-server and time a restart."""
    root = Path(__file__).resolve().parent.parent
    server = root / ".venv" / "bin" / "nats-server"
    if not server.exists():
        print("reference: nats-server binary not found, skipped")
        return None
    import asyncio
    import socket

    try:
        import nats  # type: ignore[import-not-found]
    except ImportError:
        print("reference: nats-py not installed, skipped")
        return None

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    sd = Path(tempfile.mkdtemp(prefix="tjref-"))
    port = free_port()
    cmd = [str(server), "-js", "-sd", str(sd), "-a", "127.0.0.1", "-p", str(port)]

    async def load() -> float:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        js = nc.jetstream()
        await js.add_stream(name="BENCH", subjects=["bench.>"])
        t0 = time.perf_counter()
        inflight = []
        for i in range(n):
            inflight.append(js.publish(f"bench.s{i % subjects}", payload))
            if len(inflight) >= 2000:
                await asyncio.gather(*inflight)
                inflight.clear()
        await asyncio.gather(*inflight)
        secs = time.perf_counter() - t0
        await nc.close()
        return secs

    async def wait_ready() -> int:
        while True:
            try:
                nc = await nats.connect(
                    f"nats://127.0.0.1:{port}", connect_timeout=0.2, max_reconnect_attempts=0
                )
                break
            except Exception:
                await asyncio.sleep(0.005)
        js = nc.jetstream()
        while True:
            try:
                info = await js.stream_info("BENCH")
                if info.state.messages >= n:
                    await nc.close()
                    return int(info.state.messages)
            except Exception:
                pass
            await asyncio.sleep(0.005)

    def wait_port() -> None:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.01)

    try:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port()
        pub_secs = asyncio.run(load())
        p.terminate()
        p.wait()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        asyncio.run(wait_ready())
        restart_s = time.perf_counter() - t0
        rss_kb = 0
        with open(f"/proc/{p.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    rss_kb = int(line.split()[1])
        p.terminate()
        p.wait()
        return {"publish_s": pub_secs, "restart_s": restart_s, "rss_peak_kb": float(rss_kb)}
    finally:
        shutil.rmtree(sd, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=128)
    ap.add_argument("--batch", type=int, default=100, help="appends per sync (ALWAYS)")
    ap.add_argument(
        "--interval-msgs", type=int, default=100_000, help="appends per sync (INTERVAL)"
    )
    ap.add_argument("--subjects", type=int, default=16)
    ap.add_argument("--compression", action="store_true")
    ap.add_argument("--reference", action="store_true", help="also time nats-server")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    a = ap.parse_args(argv)
    payload = bytes(random.Random(0).randrange(256) for _ in range(a.payload))
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="tjbench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str]] = []
    try:
        d1 = work / "always"
        secs, syncs = bench_append(
            d1, a.n, payload, a.batch, SyncPolicy.ALWAYS, a.compression, a.subjects
        )
        rows.append(
            (
                f"append, sync=always, {a.batch}/fsync ({syncs} fsyncs)",
                f"{_fmt_rate(a.n, secs)}  ({secs:.2f} s)",
            )
        )
        d2 = work / "interval"
        secs, syncs = bench_append(
            d2, a.n, payload, a.interval_msgs, SyncPolicy.INTERVAL, a.compression, a.subjects
        )
        rows.append(
            (f"append, sync=interval ({syncs} fsyncs)", f"{_fmt_rate(a.n, secs)}  ({secs:.2f} s)")
        )
        shutil.rmtree(d2)
        seq_s, rnd_s, k = bench_load(d1, a.n, a.compression)
        rows.append(("load(seq), sequential", f"{_fmt_rate(a.n, seq_s)}  ({seq_s:.2f} s)"))
        rows.append((f"load(seq), random x{k}", f"{_fmt_rate(k, rnd_s)}  ({rnd_s:.2f} s)"))
        du = sum(p.stat().st_size for p in d1.iterdir())
        rows.append(("on disk (segments + checkpoints)", f"{du / 1e6:,.1f} MB"))
        r = bench_reopen(d1, a.compression)
        rows.append(("reopen (fresh process), open()", f"{r['open_s']:.3f} s"))
        rows.append(("reopen peak RSS (VmHWM)", f"{int(r['rss_peak_kb']) / 1024:.1f} MB"))  # type: ignore[call-overload]
        rows.append(
            ("  of which interpreter + imports", f"{int(r['rss_before_kb']) / 1024:.1f} MB")
        )  # type: ignore[call-overload]
        rows.append(("  recovered msgs / clean", f"{r['msgs']} / {r['clean']}"))
        for idx in d1.glob("*.idx"):
            idx.unlink()
        r2 = bench_reopen(d1, a.compression)
        rows.append(
            (
                "reopen without checkpoints (full scan)",
                f"{r2['open_s']:.3f} s, {int(r2['rss_peak_kb']) / 1024:.1f} MB",
            )
        )  # type: ignore[call-overload]
        if a.reference:
            ref = bench_reference(a.n, payload, a.subjects)
            if ref:
                rows.append(("nats-server: publish via nats-py", f"{ref['publish_s']:.1f} s"))
                rows.append(
                    ("nats-server: restart until stream ready", f"{ref['restart_s']:.3f} s")
                )
                rows.append(
                    ("nats-server: peak RSS (VmHWM)", f"{ref['rss_peak_kb'] / 1024:.1f} MB")
                )
                rows.append(
                    (
                        "ratio reopen trijet / nats-server",
                        f"{float(r['open_s']) / ref['restart_s']:.2f}x",
                    )
                )  # type: ignore[arg-type]
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)
    title = (
        f"store bench: n={a.n:,} payload={a.payload} B subjects={a.subjects} "
        f"compression={'lz4' if a.compression else 'none'}"
    )
    w = max(len(k) for k, _ in rows) + 2
    print(title)
    print("-" * (w + 34))
    for k, v in rows:
        print(f"{k:<{w}}{v}")


if __name__ == "__main__":
    main()
