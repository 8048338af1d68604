"""The verdict vocabulary, defined once: what a run says about a claim, and the named sets of verdicts.

Every module that asks "did it pass?", "did a run say anything?" or "does this fail `kwiki verify`?"
uses one of the sets below, never a set of its own.
"""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    reproduced = "reproduced"
    better = "better"
    worse = "worse"
    failed = "failed"  # the artifact's correctness check failed
    not_applicable = "not-applicable"  # the claim's architecture is not this GPU's
    not_testable = "not-testable"  # the claim has no measure kwiki can run
    not_run = "not-run"  # compile-only, or no GPU
    error = "error"  # build or run error
    ambiguous = "ambiguous"


# the claim holds
PASSING = frozenset({Verdict.reproduced, Verdict.better})
# the run measured the claim and contradicted it
NOT_REPRODUCED = frozenset({Verdict.worse, Verdict.failed})
# the run could not decide (too close to call) or could not measure (build or run error)
UNSETTLED = frozenset({Verdict.ambiguous, Verdict.error})
# a run said something about the claim
JUDGED = PASSING | NOT_REPRODUCED | UNSETTLED
# the claim was measured: a figure or an outcome came back
MEASURED = PASSING | NOT_REPRODUCED | {Verdict.ambiguous}
# `kwiki verify` exits 1 when a claim ends with one of these
BLOCKING = NOT_REPRODUCED | UNSETTLED
# nothing ran: nothing to record, nothing to show in the run's table
NOT_MEASURED = frozenset({Verdict.not_run, Verdict.not_testable})
# outside what this machine can test: does not count against a page's evidence
OUT_OF_SCOPE = frozenset({Verdict.not_testable, Verdict.not_applicable})

# a verdict judged on fewer runs of its series than this is provisional (kwiki.verify.series):
# it keeps its outcome, but neither the claim nor its page is shown as verified
RUNS = 3
