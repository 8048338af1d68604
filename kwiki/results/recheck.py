"""The re-check plan of protocol 3: which timed samples are compared with the reference.

Each timed sample i (0, 1, 2, ... in a case's order) is re-checked independently with probability
p(i) = min(RATE, SCALE / (i + 1)), from a seed drawn after the run starts (the kernel cannot know it), and a
checked case takes at least MIN_SAMPLES samples (a case whose max_samples is below that re-checks every one).
The CUDA runner (artifacts/common/kwiki_runner.cuh, RecheckPlan) and the Python harness
(artifacts/common/kwiki_harness.py) implement the same formula; tests hold them to this module.

Why these numbers: a kernel that cuts corners on more than half of a case's m samples moves its median. It
escapes when none of its cut samples is re-checked; as p(i) never rises with i, the cut samples that are
re-checked least are the last ones, and the escape probability is at most
    miss(m) = prod_{i = m - c}^{m - 1} (1 - p(i)),  c = floor(m / 2) + 1 cut samples,
whatever the number of honest launches before the first cut one. miss(m) <= MISS_BOUND for every m >= 20
(largest at m = 20; for large m it tends to 2^-SCALE = 0.0068), and a 20-sample case re-checks about 7.6
samples (expected_rechecks).
"""

from __future__ import annotations

import math

RATE = 0.38
SCALE = 7.2
MIN_SAMPLES = 20
MISS_BOUND = 0.01


def probability(i: int, max_samples: int | None = None) -> float:
    """The probability that timed sample `i` (0-based) is re-checked."""
    if i < 0:
        raise ValueError("a sample index is at least 0")
    if max_samples is not None and max_samples < MIN_SAMPLES:
        return 1.0
    return min(RATE, SCALE / (i + 1))


def miss_probability(m: int, cut: int | None = None) -> float:
    """The largest probability that a case of `m` samples, `cut` of them (default: just over half) done wrong,
    is never caught: the cut samples being the last ones."""
    c = m // 2 + 1 if cut is None else cut
    if not 0 <= c <= m:
        raise ValueError("cut samples lie between 0 and the samples taken")
    return math.prod(1 - probability(i) for i in range(m - c, m))


def expected_rechecks(m: int) -> float:
    """The number of re-checks a case of `m` samples expects."""
    return sum(probability(i) for i in range(m))
