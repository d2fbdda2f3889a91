"""A standalone server does not load the Raft stack (memory: issue 15's KV RSS).

The modules a standalone JetStream server imports at start-up are imported in
a fresh interpreter; none of the replicated path (``cluster.replicated``,
``raft.group``, pysyncobj) may come with them.  A clustered server imports it
lazily (``cluster.stream_registry``, ``node.jetstream.meta``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

CLUSTER_ONLY = ("pysyncobj", "cluster.replicated", "raft.group", "raft.core")


def test_standalone_modules_leave_the_raft_stack_out() -> None:
    code = (
        "import sys\n"
        "import node.server_main, node.jetstream.service, node.jetstream.meta\n"
        "import node.jetstream.solo_meta, node.jetstream.meta_effects, cluster.stream_registry\n"
        f"print(sorted(m for m in sys.modules if m.startswith({CLUSTER_ONLY!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
