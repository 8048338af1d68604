"""A claim judged against a figure: the verdict of a value (a run's, or a series' median) and its noise, and
which record or store row a claim's selector names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from kwiki.core.strict import Scalar
from kwiki.wiki.model import Claim, Selector
from kwiki.wiki.verdict import Verdict

# the noise floor below which two figures are not told apart, whatever the run's spread
MIN_SPREAD = 0.002


def judge(claim: Claim, value: float, spread: float | None) -> Verdict:
    """Compare a measured value with a point claim (and tolerance) or a bound; `spread` None
    (a figure from one untimed run, such as a profiler counter) counts as the noise floor.

    One scale: the noise (`spread`, relative to the measured value) and the distance to the claim are both
    taken in the figure's own unit, so a bound far from a noisy small value (a 0.0007 gap claimed <= 0.01,
    its runs spread 100% of their median) is passed, not ambiguous."""
    noise = max(spread or 0.0, MIN_SPREAD) * abs(value)
    if claim.value is not None:
        ref = claim.value
        off = value - ref
        slack = claim.tolerance_or_default * abs(ref) if ref else claim.tolerance_or_default
        if abs(off) <= slack:
            return Verdict.reproduced
        if abs(off) - slack <= noise:
            return Verdict.ambiguous
        good = off > 0 if claim.direction == "higher" else off < 0
        return Verdict.better if good else Verdict.worse
    margins = []
    if claim.at_least is not None:
        margins.append(value - claim.at_least)
    if claim.at_most is not None:
        margins.append(claim.at_most - value)
    margin = min(margins)
    if abs(margin) <= noise:
        return Verdict.ambiguous
    return Verdict.reproduced if margin > 0 else Verdict.worse


class Keyed(Protocol):
    """What a selector matches: a record of this run, or a stored row of an earlier one."""

    variant: str
    params: dict[str, Scalar]


def matches(record: Keyed, sel: Selector) -> bool:
    return record.variant == sel.variant and params_match(record.params, sel.params)


def params_match(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Whether params `have` (a record's, a GRID entry's) hold every param of `want` (a selector's): numbers
    compared as numbers, anything else as text."""
    for key, value in want.items():
        got = have.get(key)
        if got is None:
            return False
        if isinstance(value, (int, float)) and isinstance(got, (int, float)) and not isinstance(value, bool):
            if not math.isclose(float(got), float(value), rel_tol=1e-9):
                return False
        elif str(got) != str(value):
            return False
    return True
