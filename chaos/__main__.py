"""``python -m chaos``: failover drills on a real three-node cluster.

    python -m chaos list
    python -m chaos run SCENARIO --target nats-server|trijet --seed S --duration SECONDS [--out DIR]
    python -m chaos report DIR
    python -m chaos campaign --target nats-server --runs N [--duration S] [--seed S] [--out DIR]

The deterministic Raft simulator stays at ``python -m chaos.sim``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.nemesis import SCENARIOS
from chaos.supervisor import TARGETS


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list scenarios")
    r = sub.add_parser("run", help="run one drill")
    r.add_argument("scenario", help="a name from `list`, or several joined by '+'")
    _common(r)
    r.add_argument("--out", type=Path)
    rep = sub.add_parser("report", help="(re)write DIR/report.html from DIR/result.json")
    rep.add_argument("dir", type=Path)
    c = sub.add_parser("campaign", help="many drills drawn from the matrix, one summary table")
    _common(c)
    c.add_argument("--runs", type=int, default=6)
    c.add_argument("--out", type=Path)
    c.add_argument("--scenarios", help="comma-separated subset to draw from")
    a = p.parse_args(argv)

    if a.cmd == "list":
        for s in SCENARIOS.values():
            extra = "  (needs FUSE)" if s.needs_power else ""
            print(f"{s.name:18} {s.family:4} {s.title}{extra}")
        return 0
    if a.cmd == "report":
        from chaos import report

        print(report.write(a.dir))
        return 0
    if a.cmd == "run":
        from chaos.run import RunConfig, run

        cfg = RunConfig(
            a.scenario, a.target, a.seed, a.duration, a.out, a.sync_always, a.rate
        )  # fmt: skip
        result = run(cfg)
        return 1 if any(v["ok"] is False for v in result["verdicts"]) else 0
    from chaos import campaign

    names = a.scenarios.split(",") if a.scenarios else None
    campaign.main(a.target, a.runs, a.duration, a.seed, a.out, a.sync_always, a.rate, names)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", choices=TARGETS, default="nats-server")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=20.0, help="seconds of faults")
    p.add_argument("--sync-always", action="store_true", help="jetstream { sync_interval: always }")
    p.add_argument("--rate", type=float, default=40.0, help="ops/s per worker")


if __name__ == "__main__":
    sys.exit(main())
