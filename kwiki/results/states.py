"""The page and claim states and their words, defined once: every reader (the page's claims table, the site, the
home page, `show`, `query`, the MCP tools) takes its words from here, so none says "failed" where another says
"below goal", and "verified" means one thing everywhere.

Page states, worst first (kwiki.results.standing computes which one a page is in):

untraceable     the measurements block does not trace to the results store (kwiki.results.trace)
not-reproduced  a claim came out worse than claimed against a baseline it does not beat, its check failed, a
                gate refused its figure, or a variant it compares was caught in a run of its series
drifted         the latest run of a claim lies outside its series' band, in the bad direction (an improvement
                is never an alarm: it is said, as "improved", and the page keeps its state)
below-goal      every claim holds except some that beat what they compare with (their baseline: a ratio above
                1x) but miss the page's own, higher goal; each says by how much. Not a failure, not verified
provisional     a claim stands on fewer runs of its series than a verdict needs (3)
measured        kwiki measured the page, but not every claim could be reproduced here, or a record its claims
                use has no passing profile audit of the same code (the page says which)
verified        kwiki reproduced every claim that could run, on 3 runs of each series, on matching hardware,
                with every record they use audited; the only state counted as verified anywhere
not-measured    no kwiki run yet: the page's figures are what its author or sources report
"""

from __future__ import annotations

from enum import Enum

from kwiki.wiki.model import Claim, MeasuredClaim, Metric
from kwiki.wiki.verdict import NOT_REPRODUCED, OUT_OF_SCOPE, PASSING, Verdict

UNTRACEABLE = "untraceable"  # the page state and evidence label of a block that does not trace


class State(str, Enum):
    untraceable = UNTRACEABLE
    not_reproduced = "not-reproduced"
    drifted = "drifted"
    below_goal = "below-goal"
    provisional = "provisional"
    measured = "measured"
    verified = "verified"
    not_measured = "not-measured"

    @property
    def label(self) -> str:
        return self.value.replace("-", " ")


# the order an index lists the states in (best first), and each state's heading and sentence
ORDER = [State.verified, State.provisional, State.below_goal, State.measured, State.drifted, State.not_reproduced,
         State.untraceable, State.not_measured]
SECTION = {
    State.verified: ("Verified", "kwiki reproduced every claim that could run, over 3 runs of each series, and every "
                                 "record the claims use passed its profile audit."),
    State.provisional: ("Provisional", "kwiki measured these pages on fewer runs than a verdict needs (3); "
                                       "not verified yet."),
    State.below_goal: ("Below goal", "the kernel beats what it is compared with, but misses the page's own, higher "
                                     "goal (each claim says by how much); not a failure, not verified."),
    State.measured: ("Measured", "kwiki measured these pages; not every claim could be reproduced on the GPU used, "
                                 "or a record the claims use has no profile audit yet."),
    State.drifted: ("Drifted", "a figure moved the wrong way beyond the noise of its series, or a claim that passed "
                               "before fails now (an improvement is not a drift)."),
    State.not_reproduced: ("Not reproduced", "a measured figure came out worse than claimed, the artifact's check "
                                             "failed, or a variant was caught failing in a run of its series."),
    State.untraceable: ("Untraceable", ("the page's measurements block does not trace to the results store: a "
                                        "figure or verdict no run recorded (edited or written by hand). Nothing "
                                        "on these pages counts as verified until kwiki verify runs again.")),
    State.not_measured: ("Never reproduced", "no kwiki run yet: the figures are as the page's author or sources "
                                             "report them."),
}


# ---------------------------------------------------------------- a claim's state


def below_goal(claim: Claim, mc: MeasuredClaim | None) -> float | None:
    """How far (a share of the goal) a claim that beats what it compares with misses its own goal, or None.

    Only a ratio against another figure (`measure.per`) whose verdict is `worse`: at least G (G > 1) measured
    between 1x and G, or at most G (G < 1) measured between G and 1x. A fraction of a ceiling (never above 1x)
    is never below goal: it is simply short of the claim."""
    if mc is None or mc.gates:
        return None
    return shortfall(claim, mc.verdict, mc.value)


def shortfall(claim: Claim, verdict: Verdict, v: float | None) -> float | None:
    """below_goal() of a verdict and the value it judged (a verify run's claim result)."""
    m = claim.measure
    if v is None or verdict != Verdict.worse or m is None or m.per is None or claim.metric != Metric.ratio:
        return None
    if claim.at_least is not None and claim.at_least > 1 and 1 <= v < claim.at_least:
        return (claim.at_least - v) / claim.at_least
    if claim.at_most is not None and 0 < claim.at_most < 1 and claim.at_most < v <= 1:
        return (v - claim.at_most) / claim.at_most
    return None


def improved(claim: Claim, mc: MeasuredClaim | None) -> bool:
    """The latest run moved the figure beyond its band in the claim's good direction: said, never an alarm."""
    if mc is None or mc.drift is None:
        return False
    return mc.drift > 0 if claim.direction == "higher" else mc.drift < 0


def regressed(claim: Claim, mc: MeasuredClaim | None) -> bool:
    """The latest run moved the figure beyond its band in the claim's bad direction: a drift."""
    return mc is not None and mc.drift is not None and not improved(claim, mc)


# the badge kind of each word: pass (green), fail (red), warn (amber), error, none (grey)
PASS, FAIL, WARN, ERROR, NONE = "pass", "fail", "warn", "error", "none"


def claim_word(claim: Claim, mc: MeasuredClaim | None, caught: str | None = None) -> tuple[str, str]:
    """(word, badge kind) of a claim's state: 'reproduced', 'below goal by 4.3%', 'failed (caught)', ...
    `caught`: where a variant it compares was caught (kwiki.results.trace), which makes it failed."""
    if mc is None:
        return "not measured", NONE
    if caught is not None:
        return "failed (caught in its series)", FAIL
    short = below_goal(claim, mc)
    if short is not None:
        return f"below goal by {short:.1%}", WARN
    word = mc.verdict.value.replace("-", " ")
    if mc.verdict in PASSING:
        return (f"{word}, improved" if improved(claim, mc) else word), PASS
    if mc.verdict in NOT_REPRODUCED:
        return word, FAIL
    if mc.verdict in OUT_OF_SCOPE or mc.verdict == Verdict.not_run:
        return word, NONE
    return word, ERROR
