"""Claim verdicts, ratio spreads, target choice and history changes."""

from __future__ import annotations

import pytest

from kwiki.results.gpu import Gpu
from kwiki.results.judge import judge
from kwiki.results.store import change
from kwiki.verify.plan import choose_target
from kwiki.wiki.manifest import Manifest
from kwiki.wiki.model import Claim
from kwiki.wiki.verdict import Verdict


def claim(**kw) -> Claim:
    base = {"id": "c", "statement": "s", "metric": "bandwidth", "unit": "TB/s"}
    return Claim.model_validate({**base, **kw})


@pytest.mark.parametrize("kw, value, spread, verdict", [
    ({"at_least": 4.45}, 4.50, 0.002, Verdict.reproduced),
    ({"at_least": 4.45}, 4.20, 0.002, Verdict.worse),
    ({"at_least": 4.45}, 4.44, 0.01, Verdict.ambiguous),  # 0.2% short, spread 1%
    ({"at_most": 1.5, "unit": "x", "metric": "ratio"}, 1.3, 0.01, Verdict.reproduced),
    ({"at_most": 1.5, "unit": "x", "metric": "ratio"}, 1.8, 0.01, Verdict.worse),
    ({"value": 100, "tolerance": 0.05, "metric": "time", "unit": "us"}, 103, 0.001, Verdict.reproduced),
    ({"value": 100, "tolerance": 0.05, "metric": "time", "unit": "us"}, 80, 0.001, Verdict.better),
    ({"value": 100, "tolerance": 0.05, "metric": "time", "unit": "us"}, 120, 0.001, Verdict.worse),
    ({"value": 100, "tolerance": 0.05, "metric": "time", "unit": "us"}, 106, 0.02, Verdict.ambiguous),
    ({"value": 4.0, "tolerance": 0.05}, 4.5, 0.001, Verdict.better),
    ({"value": 4.0, "tolerance": 0.05, "better": "lower"}, 4.5, 0.001, Verdict.worse),
])
def test_judge(kw, value, spread, verdict):
    assert judge(claim(**kw), value, spread) == verdict


def test_claim_shape_errors():
    with pytest.raises(ValueError, match="either 'value'"):
        claim()
    with pytest.raises(ValueError, match="not both"):
        claim(value=1, at_least=1)
    with pytest.raises(ValueError, match="needs its 'source'"):
        claim(value=1, evidence="source-reported")
    with pytest.raises(ValueError, match="is in TB/s"):
        claim(at_least=1, unit="GB/s", measure={"artifact": "a", "of": {"variant": "v", "figure": "tb_per_s"}})


def manifest(targets):
    return Manifest.model_validate({"name": "a", "title": "t", "targets": targets,
                                    "build": {"sources": ["a.cu"]}, "variants": [{"name": "v"}]})


def gpu(cc: int) -> Gpu:
    return Gpu(index=0, name="NVIDIA H200" if cc == 90 else "GPU", uuid=None, cc=cc)


def test_choose_target_prefers_the_arch_specific_build():
    assert choose_target(manifest(["sm_80", "sm_90a", "sm_100a"]), gpu(90)) == "sm_90a"
    assert choose_target(manifest(["sm_80", "sm_100a"]), gpu(90)) == "sm_80"
    assert choose_target(manifest(["sm_100a"]), gpu(90)) is None
    assert choose_target(manifest(["sm_90a"]), None) is None
    assert choose_target(manifest(["host"]), None) == "host"


@pytest.mark.parametrize("new, new_s, old, old_s, direction, expected", [
    (100.0, 0.002, 100.4, 0.002, "lower", "same"),
    (90.0, 0.002, 100.0, 0.002, "lower", "faster"),
    (110.0, 0.002, 100.0, 0.002, "lower", "slower"),
    (4.6, 0.002, 4.4, 0.002, "higher", "faster"),
    (101.0, 0.006, 100.0, 0.002, "lower", "ambiguous"),
])
def test_history_change(new, new_s, old, old_s, direction, expected):
    assert change(new, new_s, old, old_s, direction) == expected


def test_commit_can_be_passed_where_there_is_no_git(tmp_path, monkeypatch):
    from kwiki.verify.env import git_state

    monkeypatch.setenv("KWIKI_COMMIT", "abc123def456")
    monkeypatch.setenv("KWIKI_DIRTY", "1")
    assert git_state(tmp_path) == ("abc123def456", True)
    monkeypatch.delenv("KWIKI_COMMIT")
    assert git_state(tmp_path) == (None, None)  # not a git checkout


@pytest.mark.parametrize("commit, dirty", [("PLACEHOLDER", "0"), ("main", "0"), ("abc12", "0"),
                                           ("abc123def456", "yes")])
def test_a_passed_commit_that_is_not_a_commit_id_is_refused(tmp_path, monkeypatch, commit, dirty):
    """A placeholder in KWIKI_COMMIT would name every record and run id after something no reader can open."""
    from kwiki.core.errors import EnvironmentProblem
    from kwiki.verify.env import git_state

    monkeypatch.setenv("KWIKI_COMMIT", commit)
    monkeypatch.setenv("KWIKI_DIRTY", dirty)
    with pytest.raises(EnvironmentProblem, match="KWIKI_"):
        git_state(tmp_path)


def test_a_figure_from_an_untimed_record_has_no_spread():
    """A profiler counter (one run, no timing) has no spread of its own: its claim shows none,
    and the verdict uses the noise floor."""
    from kwiki.results.record import parse_records
    from kwiki.verify.claims import _figure
    from kwiki.verify.tables import fmt_spread
    from kwiki.verify.types import RunOutcome
    from kwiki.wiki.model import Selector

    line = ('{"kwiki_record": 1, "variant": "v", "params": {"M": 8}, "check": {"passed": true}, '
            '"extra": {"dram_read_mb": 12.5}}')
    timed = ('{"kwiki_record": 1, "variant": "w", "params": {"M": 8}, "check": {"passed": true}, "extra": {"x": 2.0}, '
             '"timing": {"median_us": 10, "q1_us": 9, "q3_us": 11, "min_us": 8, "samples": 5}}')
    outcome = RunOutcome("a", "sm_90a", ["v", "w"], "ok", records=parse_records(line + "\n" + timed, "a"))
    value, spread, _ = _figure([outcome], Selector(variant="v", params={"M": 8}, figure="dram_read_mb"))
    assert (value, spread) == (12.5, None) and fmt_spread(spread) == ""
    assert _figure([outcome], Selector(variant="w", figure="x"))[1] == pytest.approx(0.1)
    assert judge(claim(at_most=12.48, unit="MB", metric="count"), 12.5, None) == Verdict.ambiguous  # within 0.2%
    assert judge(claim(at_most=12.0, unit="MB", metric="count"), 12.5, None) == Verdict.worse


# ---------------------------------------------------------------- the ladder (issue 11)


def _ladder(records: list[dict]) -> str:
    from pathlib import Path

    from kwiki.results.record import Record
    from kwiki.verify.tables import ladder_table
    from kwiki.verify.types import PlannedArtifact, RunOutcome

    m = Manifest.model_validate({"name": "gemv", "title": "GEMV", "targets": ["sm_90a"], "build": {"sources": ["g.cu"]},
                                 "variants": [{"name": n} for n in ("cublas", "tuned", "read_ceiling", "counted")],
                                 "baseline": "cublas", "ceiling": "read_ceiling"})
    planned = PlannedArtifact("artifacts/gemv", Path("."), m, run_target="sm_90a")
    recs = [Record.model_validate({"kwiki_record": 1, "params": {"M": 8}, "check": {"passed": True}, **r})
            for r in records]
    return ladder_table(planned, [RunOutcome("gemv", "sm_90a", [r.variant for r in recs], "ok", records=recs)])


def _timed(us: float) -> dict:
    return {"median_us": us, "q1_us": us, "q3_us": us, "min_us": us, "samples": 5}


def _row(table: str, variant: str) -> list[str]:
    line = next(ln for ln in table.splitlines() if ln.startswith(f"| `{variant}`"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_ladder_rates_compare_like_units_only():
    """A read ceiling (bytes, no FLOPs) against a GEMV baseline (bytes and FLOPs): GB/s over GB/s, not
    GB/s over TFLOP/s (which printed '1043x')."""
    gemv = {"bytes": 268e6, "flops": 268e6}
    table = _ladder([
        {"variant": "cublas", **gemv, "timing": _timed(62.0)},
        {"variant": "tuned", **gemv, "timing": _timed(59.0)},
        {"variant": "read_ceiling", "bytes": 268e6, "timing": _timed(60.0)},
    ])
    assert _row(table, "read_ceiling")[5] == "1.03x"  # 62 / 60, in GB/s
    assert _row(table, "tuned")[5] == "1.05x"  # TFLOP/s over TFLOP/s
    assert "1033x" not in table and "1043x" not in table


def test_ladder_labels_profiled_rows_and_shows_the_sm_clock():
    table = _ladder([
        {"variant": "cublas", "bytes": 1e6, "timing": _timed(10.0),
         "clocks": {"sm_mhz_before": 1980, "sm_mhz_after": 1755}},
        {"variant": "counted", "extra": {"dram_read_mb": 12.5}},  # measured by a profiler: passed, no timing
        {"variant": "tuned", "check": {"passed": False}},
    ])
    assert _row(table, "counted")[3] == "profiled (no timing)"
    assert _row(table, "tuned")[3] == "check failed"
    assert "| SM MHz |" in table and _row(table, "cublas")[7] == "1755–1980"


# ---------------------------------------------------------------- one scale (issue 27, item 5)


def _page_claim(path: str, claim_id: str) -> Claim:
    from pathlib import Path

    from kwiki.wiki.frontmatter import parse_page

    root = Path(__file__).resolve().parent.parent
    data = parse_page((root / path).read_bytes()).data
    return Claim.model_validate(next(c for c in data["claims"] if c["id"] == claim_id))


def test_judge_one_scale_interleaved_twins():
    """`interleaved-twins-agree` (gap <= 0.01): a gap of a 15th of the bound whose runs spread 100% of their
    median passes by far; compared on two scales (the band relative to the value, the margin relative to the
    bound: 0.93 < 1.0) it read ambiguous."""
    twins = _page_claim("wiki/nvidia/patterns/benchmarking.md", "interleaved-twins-agree")
    assert twins.at_most == 0.01
    gap = twins.at_most / 15
    assert judge(twins, gap, 1.0) == Verdict.reproduced
    # near the bound the same noise still makes it ambiguous, and past it worse
    assert judge(twins, 0.0095, 0.1) == Verdict.ambiguous
    assert judge(twins, 0.02, 0.1) == Verdict.worse


def test_judge_one_scale_point_claim():
    """A point claim's noise is the measured value's, in us: 200 us whose runs spread 60% (120 us) cannot be told
    from 100 us +- 5% (on two scales, 0.95 of the reference against 0.6 of the value, it read better); 150 us
    spread 2% is worse."""
    c = claim(value=100, tolerance=0.05, metric="time", unit="us")
    assert judge(c, 200, 0.6) == Verdict.ambiguous
    assert judge(c, 150, 0.02) == Verdict.worse
    assert judge(c, 106, 0.02) == Verdict.ambiguous


def test_a_profiler_figure_missing_from_a_run_without_a_profile_is_not_run_not_an_error():
    """A claim on an Nsight Compute count (`ncu_*`) in a run that profiled nothing (--no-audit, or no ncu) has not
    been measured yet: not-run with the way to measure it; any other missing figure stays an error."""
    from kwiki.results.record import parse_records
    from kwiki.verify.claims import _figure, _Missing
    from kwiki.verify.types import RunOutcome
    from kwiki.wiki.model import Selector

    timed = ('{"kwiki_record": 1, "variant": "w", "params": {"M": 8}, "check": {"passed": true}, "extra": {"x": 2.0}, '
             '"timing": {"median_us": 10, "q1_us": 9, "q3_us": 11, "min_us": 8, "samples": 5}}')
    outcome = RunOutcome("a", "sm_90a", ["w"], "ok", records=parse_records(timed, "a"))
    with pytest.raises(_Missing) as profiled:
        _figure([outcome], Selector(variant="w", figure="ncu_l2_bytes"))
    assert profiled.value.verdict == Verdict.not_run and "--no-audit" in profiled.value.detail
    with pytest.raises(_Missing) as typo:
        _figure([outcome], Selector(variant="w", figure="tflops"))
    assert typo.value.verdict == Verdict.error
