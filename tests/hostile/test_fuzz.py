"""The in-process fuzzer (``chaos.fuzz``) for a short, seeded budget in CI.

Each target gets ``FUZZ_S_PER_TARGET`` seconds; the seed is printed and
``TRIJET_FUZZ_SEED=<seed>`` replays it (``python -m chaos.fuzz --seed <seed>
--minutes 10`` runs longer).
"""

from __future__ import annotations

import os
import random

import pytest

from chaos import fuzz

SEED = int(os.environ.get("TRIJET_FUZZ_SEED", random.randrange(2**32)))
FUZZ_S_PER_TARGET = float(os.environ.get("TRIJET_FUZZ_S", "10"))


@pytest.mark.parametrize("target", sorted(fuzz.TARGETS))
def test_fuzz_target(target: str) -> None:
    print(f"fuzz seed: {SEED} (replay: TRIJET_FUZZ_SEED={SEED}; longer: python -m chaos.fuzz)")
    examples = fuzz.run(target, FUZZ_S_PER_TARGET, SEED)
    assert examples > 0
