"""The report of one run: an HTML page with matplotlib PNG plots, from ``result.json`` and
``history.jsonl`` in the run directory.

Theory of operation: the report is derived only from files in the run directory, so
``python -m chaos report DIR`` can redo it at any time.  Two plots share one time axis (seconds
since the run started): operations per second (completed ok per operation kind, plus info/fail in
grey) and latency of ok operations (log scale).  Fault windows (``nemesis`` start/end records) are
shaded and labelled; leader changes of LOG (``leader`` records) are dashed vertical lines; the
heal, quiet and drain points are marked.  Below: each checker's verdict with its counts and its
first offending items.  matplotlib runs with the Agg backend (no display).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from chaos.history import INF, load, pair

BIN_S = 0.5
COLORS = {
    "publish": "C0", "append": "C1", "cas": "C2", "ack": "C3", "read": "C4",
    "wq-publish": "C5", "wq-ack": "C6",
}  # fmt: skip


def fault_windows(records: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """(start, end, label) per fault, from nemesis start/end records (unclosed: to the end)."""
    t_end = max((r["t"] for r in records), default=0.0)
    open_: dict[tuple[str, str], list[float]] = defaultdict(list)
    out = []
    for r in records:
        if r.get("type") != "nemesis":
            continue
        key = (r["f"], ",".join(r.get("nodes") or []))
        if r["phase"] == "start":
            open_[key].append(r["t"])
        elif open_[key]:
            out.append((open_[key].pop(), r["t"], f"{key[0]} {key[1]}"))
    for key, starts in open_.items():
        out += [(s, t_end, f"{key[0]} {key[1]}") for s in starts]
    return sorted(out)


def _plot(records: list[dict[str, Any]], result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = pair(records)
    t_end = max((r["t"] for r in records), default=1.0)
    nbins = int(t_end / BIN_S) + 1
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    series: dict[str, list[int]] = defaultdict(lambda: [0] * nbins)
    for o in ops:
        t = o.t1 if o.t1 != INF else o.t0
        key = o.f if o.type == "ok" else "info/fail"
        series[key][min(nbins - 1, int(t / BIN_S))] += 1
    xs = [i * BIN_S for i in range(nbins)]
    for key, counts in sorted(series.items()):
        color = COLORS.get(key, "0.6")
        ax1.plot(xs, [c / BIN_S for c in counts], label=key, color=color, lw=1)
        if key in COLORS:
            pts = [(o.t0, (o.t1 - o.t0) * 1000) for o in ops if o.f == key and o.type == "ok"]
            if pts:
                ax2.scatter(*zip(*pts, strict=True), s=3, color=color, label=key)
    ax1.set_ylabel("ops/s (completed)")
    ax2.set_ylabel("latency ms (ok)")
    ax2.set_yscale("log")
    ax2.set_xlabel("seconds since start")
    for ax in (ax1, ax2):
        for i, (a, b, label) in enumerate(fault_windows(records)):
            ax.axvspan(a, b, color="red", alpha=0.12)
            if ax is ax1:
                ax.text(a, 0.98 - 0.07 * (i % 3), label, transform=ax.get_xaxis_transform(),
                        fontsize=7, va="top", color="darkred")  # fmt: skip
        for r in records:
            if r.get("type") == "leader":
                ax.axvline(r["t"], color="k", ls="--", lw=0.7)
                if ax is ax1:
                    ax.text(r["t"], 0.02, r["leader"], transform=ax.get_xaxis_transform(),
                            fontsize=7, rotation=90, va="bottom")  # fmt: skip
        for name, t in (result.get("phases") or {}).items():
            if name in ("healed", "quiet", "drained"):
                ax.axvline(t, color="green", lw=0.8)
    ax1.legend(fontsize=7, loc="upper right")
    ax1.set_title(
        f"{result.get('scenario')} on {result.get('target')} seed {result.get('seed')}"
        f"{' sync=always' if result.get('sync_always') else ''}  (shaded: faults; dashed: LOG leader)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _cell(v: Any) -> str:
    return html.escape(json.dumps(v, default=str)[:600])


def render(result: dict[str, Any], png: str | None) -> str:
    rows = []
    for v in result["verdicts"]:
        verdict = {True: "ok", False: "VIOLATED", None: "unknown"}[v["ok"]]
        css = {True: "ok", False: "bad", None: "unk"}[v["ok"]]
        detail = {k: x for k, x in v["detail"].items() if k not in ("fingerprints", "final")}
        rows.append(
            f"<tr class={css}><td>{v['name']}</td><td>{html.escape(v['title'])}</td>"
            f"<td>{verdict}</td><td>{v['checked']}</td><td>{v['bad']}</td>"
            f"<td><code>{_cell(v['examples'][:3])}</code></td><td><code>{_cell(detail)}</code></td></tr>"
        )
    ops = "".join(
        f"<tr><td>{f}</td><td>{c['ok']}</td><td>{c['fail']}</td><td>{c['info']}</td></tr>"
        for f, c in sorted(result.get("ops", {}).items())
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.get("notes", []))
    img = f'<img src="{png}" alt="ops and latency">' if png else "<p>(no plot)</p>"
    return f"""<!doctype html><meta charset=utf-8><title>chaos {result["scenario"]} seed {result["seed"]}</title>
<style>body{{font:14px sans-serif;margin:1.5em}} td,th{{border:1px solid #ccc;padding:3px 6px;vertical-align:top}}
table{{border-collapse:collapse}} .ok td:nth-child(3){{color:green}} .bad td:nth-child(3){{color:#b00;font-weight:bold}}
.unk td:nth-child(3){{color:#a60}} code{{font-size:11px}}</style>
<h1>{html.escape(result["scenario"])} ({result.get("family")}) on {result["target"]}, seed {result["seed"]}</h1>
<p>duration {result["duration"]} s of faults; sync_interval {"always" if result.get("sync_always") else "default"}.
Replay: <code>{html.escape(result["replay"])}</code></p>
<p>phases (s): {_cell(result.get("phases"))}</p><ul>{notes}</ul>
{img}
<h2>Verdicts</h2><table><tr><th>check</th><th>property</th><th>verdict</th><th>checked</th><th>offending</th><th>first offending</th><th>detail</th></tr>
{"".join(rows)}</table>
<h2>Operations</h2><table><tr><th>op</th><th>ok</th><th>fail</th><th>info</th></tr>{ops}</table>
<h2>Final reads per node</h2><p><code>{_cell(result.get("reads"))}</code></p>
"""


def write(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (and ``plot.png``); returns the HTML path."""
    result = json.loads((run_dir / "result.json").read_text())
    records = load(run_dir / "history.jsonl") if (run_dir / "history.jsonl").exists() else []
    png: str | None = "plot.png"
    try:
        _plot(records, result, run_dir / "plot.png")
    except ImportError:
        png = None  # matplotlib not installed: the page still carries the verdicts
    out = run_dir / "report.html"
    out.write_text(render(result, png))
    return out
