"""Campaign: many drills drawn from the fault matrix, one summary table.

Theory of operation: a campaign seed draws the scenarios as seeded shuffles of the pool (all
fault scenarios, or a given subset: each once before any repeats) and each run's own seed, so ``--seed S --runs N`` always replays the same list.
Runs happen one after another (the machine is small); each leaves its own directory with its
report, and the campaign writes ``summary.md``, ``summary.json`` and ``index.html`` in its
directory: one row per run, and one row per fault kind with runs, acknowledged writes lost (on
any replica / on a majority), divergent replicas, duplicates, the longest unavailability and the
checks that failed.  An unknown count (nothing readable) shows as ``?``.
"""

from __future__ import annotations

import html
import json
import random
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from chaos.nemesis import SCENARIOS
from chaos.run import RunConfig, run


def row_of(result: dict[str, Any], run_dir: str) -> dict[str, Any]:
    v = {x["name"]: x for x in result["verdicts"]}

    def known(name: str, value: Any) -> Any:
        return "?" if v[name]["ok"] is None else value

    s3 = v["S3"]["detail"]
    return {
        "run": run_dir,
        "scenario": result["scenario"],
        "family": result["family"],
        "seed": result["seed"],
        "acked": sum(c["ok"] for f, c in result["ops"].items() if f in ("publish", "append")),
        "lost_any": known("S1", v["S1"]["bad"]),
        "lost_majority": known("S1", v["S1"]["detail"].get("lost_on_majority", 0)),
        "divergent": s3.get("divergent_replicas", 0)
        + sum(len(x) for x in (s3.get("unreadable") or {}).values()),
        "duplicates": known("S2", v["S2"]["detail"].get("duplicates", 0)),
        "unavailable_s": result.get("unavailable_s", 0.0),
        "failed": [n for n, x in v.items() if x["ok"] is False],
        "unknown": [n for n, x in v.items() if x["ok"] is None and n != "C6"],
    }


def _sum(values: list[Any]) -> Any:
    nums = [x for x in values if x != "?"]
    total = sum(nums)
    return f"{total}+?" if len(nums) < len(values) else total


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[f"{r['family']} {r['scenario']}"].append(r)
    out = []

    def order(kind: str) -> tuple[int, str]:
        family = kind.split()[0]
        return (int(family[1:]) if family[1:].isdigit() else 0, kind)

    for kind, rs in sorted(by.items(), key=lambda kv: order(kv[0])):
        failed: dict[str, int] = defaultdict(int)
        for r in rs:
            for n in r["failed"]:
                failed[n] += 1
        out.append(
            {
                "fault": kind,
                "runs": len(rs),
                "acked": sum(r["acked"] for r in rs),
                "lost_any": _sum([r["lost_any"] for r in rs]),
                "lost_majority": _sum([r["lost_majority"] for r in rs]),
                "divergent": sum(r["divergent"] for r in rs),
                "duplicates": _sum([r["duplicates"] for r in rs]),
                "max_unavailable_s": max(r["unavailable_s"] for r in rs),
                "failed_checks": ", ".join(f"{n}×{c}" for n, c in sorted(failed.items())) or "-",
            }
        )
    return out


COLUMNS = (
    ("fault", "fault kind"),
    ("runs", "runs"),
    ("acked", "acked writes"),
    ("lost_any", "acked lost (any replica)"),
    ("lost_majority", "acked lost (majority)"),
    ("divergent", "divergent/unreadable replicas"),
    ("duplicates", "duplicates"),
    ("max_unavailable_s", "max unavailable s"),
    ("failed_checks", "failed checks"),
)


def markdown(table: list[dict[str, Any]], title: str) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(h for _, h in COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    for r in table:
        lines.append("| " + " | ".join(str(r[k]) for k, _ in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main(
    target: str,
    runs: int,
    duration: float,
    seed: int,
    out: Path | None,
    sync_always: bool,
    rate: float,
    names: list[str] | None,
) -> Path:
    out = out or Path(tempfile.mkdtemp(prefix="chaos-campaign-"))
    out.mkdir(parents=True, exist_ok=True)
    pool = names or [n for n in SCENARIOS if n != "none"]
    rng = random.Random(seed)
    order: list[str] = []
    for _ in range(runs):  # seeded shuffles of the pool: every scenario once before any repeats
        if len(order) >= runs:
            break
        order += rng.sample(pool, len(pool))
    plan = [(name, rng.randrange(2**31)) for name in order[:runs]]
    title = (
        f"{target}, sync_interval {'always' if sync_always else 'default'}: {runs} runs of "
        f"{duration:g} s, campaign seed {seed}"
    )
    print(f"chaos campaign: {title}; out={out}", flush=True)
    rows = []
    for i, (scenario, run_seed) in enumerate(plan):
        run_dir = out / f"{i:02d}-{scenario}"
        cfg = RunConfig(scenario, target, run_seed, duration, run_dir, sync_always, rate)  # type: ignore[arg-type]
        try:
            result = run(cfg)
        except Exception as exc:  # one broken run must not end the campaign
            print(f"chaos campaign: run {i} ({scenario}) crashed: {exc!r}", flush=True)
            continue
        rows.append(row_of(result, run_dir.name))
        (out / "summary.json").write_text(json.dumps({"title": title, "rows": rows}, indent=1))
    table = aggregate(rows)
    md = markdown(table, title)
    md += "\n| run | scenario | seed | acked | lost any | lost majority | divergent | dups | unavail s | failed |\n"
    md += "|---|---|---|---|---|---|---|---|---|---|\n"
    for r in rows:
        md += (
            f"| {r['run']} | {r['scenario']} | {r['seed']} | {r['acked']} | {r['lost_any']} | "
            f"{r['lost_majority']} | {r['divergent']} | {r['duplicates']} | {r['unavailable_s']} | "
            f"{','.join(r['failed']) or '-'} |\n"
        )
    (out / "summary.md").write_text(md)
    (out / "summary.json").write_text(
        json.dumps({"title": title, "rows": rows, "table": table}, indent=1)
    )
    links = "".join(
        f'<li><a href="{r["run"]}/report.html">{html.escape(r["run"])}</a> '
        f"failed: {html.escape(','.join(r['failed']) or '-')}</li>"
        for r in rows
    )
    (out / "index.html").write_text(
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<pre>{html.escape(md)}</pre><ul>{links}</ul>"
    )
    print(md)
    print(f"chaos campaign: summary in {out / 'summary.md'}")
    return out
