"""A claim judged against a figure: the verdict of a value (a run's, or a series' median) and its noise, and
which record or store row a claim's selector names."""

from __future__ import annotations

import math
from typing import Protocol

from kwiki.core.strict import Scalar
from kwiki.wiki.model import Claim, Selector
from kwiki.wiki.verdict import Verdict

# the noise floor below which two figures are not told apart, whatever the run's spread
MIN_SPREAD = 0.002


def judge(claim: Claim, value: float, spread: float | None) -> Verdict:
    """Compare a measured value with a point claim (and tolerance) or a bound; `spread` None
    (a figure from one untimed run, such as a profiler counter) counts as the noise floor."""
    noise = max(spread or 0.0, MIN_SPREAD)
    if claim.value is not None:
        ref = claim.value
        rel = (value - ref) / abs(ref) if ref else value
        tol = claim.tolerance_or_default
        if abs(rel) <= tol:
            return Verdict.reproduced
        if abs(rel) - tol <= noise:
            return Verdict.ambiguous
        good = rel > 0 if claim.direction == "higher" else rel < 0
        return Verdict.better if good else Verdict.worse
    margins = []
    if claim.at_least is not None:
        margins.append((value - claim.at_least) / abs(claim.at_least or 1.0))
    if claim.at_most is not None:
        margins.append((claim.at_most - value) / abs(claim.at_most or 1.0))
    margin = min(margins)
    if abs(margin) <= noise:
        return Verdict.ambiguous
    return Verdict.reproduced if margin > 0 else Verdict.worse


class Keyed(Protocol):
    """What a selector matches: a record of this run, or a stored row of an earlier one."""

    variant: str
    params: dict[str, Scalar]


def matches(record: Keyed, sel: Selector) -> bool:
    if record.variant != sel.variant:
        return False
    for key, want in sel.params.items():
        have = record.params.get(key)
        if have is None:
            return False
        if isinstance(want, (int, float)) and isinstance(have, (int, float)) and not isinstance(want, bool):
            if not math.isclose(float(have), float(want), rel_tol=1e-9):
                return False
        elif str(have) != str(want):
            return False
    return True
