"""Protocol 3's rules on the CPU: the re-check plan's arithmetic, the `unseen` gate, the sustained regime."""

from __future__ import annotations

import pytest

from kwiki.results import recheck
from kwiki.results.record import Record
from kwiki.verify import gates
from kwiki.wiki.model import Selector


def test_a_kernel_cutting_corners_on_over_half_its_samples_is_caught_99_times_in_100():
    for m in range(recheck.MIN_SAMPLES, 3000):
        assert recheck.miss_probability(m) <= recheck.MISS_BOUND, m
    # the arithmetic of the docstring: about 7.6 re-checks at 20 samples, and the bound is not loose by much
    assert recheck.expected_rechecks(20) == pytest.approx(7.58, abs=0.01)
    assert recheck.miss_probability(20) > 0.005


def test_the_worst_placement_of_cut_samples_is_the_last_ones():
    m, c = 40, 21
    last = recheck.miss_probability(m, c)
    first = 1.0
    for i in range(c):
        first *= 1 - recheck.probability(i)
    assert last >= first


def test_the_old_plan_would_not_meet_the_bound():
    """Protocol 2's plan (2 re-checks among the first 8 samples, then 5%): a kernel honest for 8 samples and then
    cutting corners on 12 of 20 escapes with probability 0.95^12 = 0.54: the test that the new rule exists."""
    assert 0.95 ** 12 > recheck.MISS_BOUND


def test_a_short_case_rechecks_every_sample():
    assert recheck.probability(5, max_samples=10) == 1.0
    assert recheck.probability(5, max_samples=100) == recheck.RATE


def timed(busy: float, event: float, kernels: float = 1, fixed: float = 6.0, per_launch: float = 3.0,
          sustained: dict | None = None) -> Record:
    data = {"kwiki_record": 1, "variant": "v", "params": {}, "bytes": 1e9,
            "timing": {"median_us": busy, "q1_us": busy, "q3_us": busy, "min_us": busy, "samples": 20},
            "timer": {"event_median_us": event, "kernels": kernels, "fixed_us": fixed, "per_launch_us": per_launch},
            "check": {"passed": True}}
    if sustained:
        data["sustained"] = sustained
    return Record.model_validate(data)


def test_the_unseen_gate_fails_a_sample_that_waited_on_work_it_did_not_time():
    # the reproduction: event time 2.9x busy time (another process did part of the work on the same buffers)
    bad = gates.unseen(timed(busy=400.0, event=1160.0))
    assert bad is not None and bad.gate == gates.UNSEEN and "1160 us" in bad.reason and "400.0 us" in bad.reason


@pytest.mark.parametrize("busy,event,kernels", [
    (176.0, 283.1, 1),      # cuBLAS bf16 at 4096^3 on the H200: the library's host work per call in the bracket
    (400.0, 420.0, 1),      # an honest kernel: a few us of enqueue
    (15.0, 30.0, 1),        # a short one, where the fixed cost dominates
    (50.0, 170.0, 20),      # a 20-kernel chain: per-launch enqueue
    (60.0, 80.0, 2),        # a split-K GEMV with its reduction kernel
])
def test_the_unseen_gate_leaves_honest_multi_kernel_records_alone(busy, event, kernels):
    assert gates.unseen(timed(busy, event, kernels)) is None


def test_python_dispatch_gets_its_own_floor():
    """torch.compile's softmax at 262144 on the H200: 671 us of bracket over 235 us busy, five kernels."""
    r = timed(busy=234.8, event=905.7, kernels=5, fixed=39.45, per_launch=11.94)
    assert gates.unseen(r) is not None  # as a CUDA record: a wait nobody timed
    python = Record.model_validate({**r.model_dump(), "extra": {"harness": "python"}})
    assert gates.unseen(python) is None


def test_a_protocol_2_record_is_not_gated_by_unseen():
    r = Record.model_validate({"kwiki_record": 1, "variant": "v", "check": {"passed": True},
                               "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3}})
    assert gates.unseen(r) is None


def test_a_sustained_selector_reads_the_sustained_figures():
    r = timed(100.0, 110.0, sustained={"median_us": 120.0, "q1_us": 119.0, "q3_us": 121.0, "min_us": 118.0,
                                       "samples": 7, "launches": 40, "duty": 0.99, "sm_mhz": 1650,
                                       "power_w": 690, "settle_s": 1.2, "settled": True})
    figs = r.figures()
    burst = Selector(variant="v", figure="tb_per_s")
    sustained = Selector(variant="v", figure="tb_per_s", regime="sustained")
    assert figs[burst.key] == pytest.approx(10.0) and figs[sustained.key] == pytest.approx(1e9 / 120e6)
    assert "sustained_time_us" not in timed(100.0, 110.0).figures()


def test_timer_and_sustained_need_a_timing():
    with pytest.raises(ValueError, match="timer and sustained go with a timing"):
        Record.model_validate({"kwiki_record": 1, "variant": "v", "check": {"passed": False},
                               "timer": {"event_median_us": 1, "kernels": 1, "fixed_us": 1, "per_launch_us": 0}})


def test_a_sustained_claim_makes_its_variants_run_back_to_back():
    """An artifact's run gets --sustained with the variants a claim selects in the sustained regime, and only in the
    process that runs them."""
    from pathlib import Path

    from kwiki.verify.run import argv_for
    from kwiki.verify.types import PlannedArtifact
    from kwiki.wiki.manifest import load_manifest

    repo = Path(__file__).resolve().parent.parent
    directory = repo / "artifacts" / "vector_loads_sm90a"
    planned = PlannedArtifact("artifacts/vector_loads_sm90a", directory, load_manifest(directory, repo))
    planned.sustained = ["v"]
    assert argv_for(planned, "bin", ["v", "w"])[-1] == "--sustained=v"
    assert not any(a.startswith("--sustained") for a in argv_for(planned, "bin", ["w"]))


def test_the_profilers_cycle_counters_give_a_library_kernels_clock_in_mhz():
    from kwiki.verify import ncu

    assert "sm__cycles_elapsed.avg.per_second" in ncu.METRICS
    rows = [{"gpu__time_duration.sum": "1000", "sm__cycles_elapsed.avg.per_second": "1639000000"},
            {"gpu__time_duration.sum": "10", "sm__cycles_elapsed.avg.per_second": "1980000000"}]
    assert ncu.figures(rows)["ncu_sm_mhz_effective"] == 1639.0  # the longest kernel's


def test_a_passed_checks_errors_are_figures_a_claim_can_select():
    """The fp8 page's promotion claim is a ratio of two kernels' largest relative errors at K = 16384."""
    base = {"kwiki_record": 1, "variant": "v",
            "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3}}
    ok = Record.model_validate({**base, "check": {"passed": True, "max_abs_err": 0.25, "max_rel_err": 0.125}})
    assert ok.figures()["max_abs_err"] == 0.25 and ok.figures()["max_rel_err"] == 0.125
    assert ok.figures()[Selector(variant="v", figure="max_rel_err").key] == 0.125
    failed = Record.model_validate({"kwiki_record": 1, "variant": "v",
                                    "check": {"passed": False, "max_abs_err": 9.0, "max_rel_err": 9.0}})
    assert "max_rel_err" not in failed.figures()
    own = Record.model_validate({**base, "check": {"passed": True, "max_rel_err": 0.125}, "extra": {"max_rel_err": 2}})
    assert own.figures()["max_rel_err"] == 2.0  # the artifact's own extra of that name is kept
