"""The shared measurement protocol (artifacts/common): host-side parts of the C++ header and the Python twin.

The C++ test program is compiled with nvcc and run without a GPU (it calls no CUDA API);
its stdout must be valid kwiki records.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kwiki.cli import main
from kwiki.results import recheck
from kwiki.results.record import PROTOCOL_VERSION, Record, parse_records

ROOT = Path(__file__).resolve().parent.parent
COMMON = ROOT / "artifacts" / "common"


@pytest.fixture(scope="module")
def host_test(compile_host_test) -> Path:
    return compile_host_test("bench_host_test")


def run(binary: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60,
                          env=None if env is None else {**os.environ, **env})


def by_variant(stdout: str) -> dict:
    return {r.variant: r for r in parse_records(stdout, "bench_host_test")}


@pytest.mark.nvcc
def test_args_parse_variants_and_values(host_test):
    p = run(host_test, "args", "--variants", "a,b", "--m=12", "--x", "2.5", "--flag")
    assert p.returncode == 0, p.stderr
    params = by_variant(p.stdout)["args"].params
    assert params == {"variants": "a,b", "want_a": True, "want_z": False, "m": 12, "x": 2.5, "name": "none",
                      "flag": True}


@pytest.mark.nvcc
def test_args_without_variants_want_everything(host_test):
    p = run(host_test, "args")
    assert by_variant(p.stdout)["args"].params["want_z"] is True


@pytest.mark.nvcc
def test_args_unknown_variant_exits_2(host_test):
    p = run(host_test, "args", "--variants=a,nope")
    assert p.returncode == 2
    assert "nope" in p.stderr


@pytest.mark.nvcc
def test_args_bad_integer_exits_2(host_test):
    assert run(host_test, "args", "--m=twelve").returncode == 2


@pytest.mark.nvcc
@pytest.mark.parametrize("argv, sizes", [
    ([], "1x2;3x4"),                       # the default
    (["--sizes=5x6"], "5x6"),
    (["--sizes", "7x8,9x10,11x12"], "7x8;9x10;11x12"),
])
def test_args_sizes(host_test, argv, sizes):
    p = run(host_test, "sizes", *argv)
    assert p.returncode == 0, p.stderr
    assert by_variant(p.stdout)["sizes"].params == {"sizes": sizes}


@pytest.mark.nvcc
@pytest.mark.parametrize("bad", ["5x", "5x6x7", "0x4", "-1x4", "4xq", "4x4,", "x4"])
def test_args_bad_sizes_exit_2_naming_the_option(host_test, bad):
    p = run(host_test, "sizes", f"--sizes={bad}")
    assert p.returncode == 2 and p.stdout == ""
    assert "--sizes wants AxB pairs" in p.stderr and bad in p.stderr


@pytest.mark.nvcc
def test_list_shapes_prints_what_the_binary_parsed_before_any_cuda_call(host_test):
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    p = run(host_test, "shapes", "--shapes=4096x7168,4099x4104", "--list-shapes=shapes", env=no_gpu)
    assert p.returncode == 0 and p.stdout.splitlines() == ["4096x7168", "4099x4104"], p.stderr
    # another option's listing is not asked for: the case goes on to its CUDA call, which fails without a device
    assert run(host_test, "shapes", "--shapes=4096x7168", "--list-shapes=sizes", env=no_gpu).returncode == 2


@pytest.mark.nvcc
@pytest.mark.parametrize("argv, words", [
    ([], "--shapes is required"),  # no defaults in the binary: the manifest's shapes are their one source
    (["--shapes=4096x7170"], "--shapes wants MxK pairs with K a multiple of 8"),
])
def test_shapes_without_a_default_or_off_the_rules_exit_2(host_test, argv, words):
    p = run(host_test, "shapes", *argv, "--list-shapes=shapes")
    assert p.returncode == 2 and words in p.stderr and p.stdout == ""


@pytest.mark.nvcc
def test_failed_check_drops_timing_and_exits_1(host_test):
    p = run(host_test, "records")
    assert p.returncode == 1, p.stderr
    recs = by_variant(p.stdout)
    good, bad = recs['good "quoted"\n'], recs["bad"]
    assert good.timing is not None and good.timing.median_us == 12
    assert bad.timing is None and bad.check.passed is False
    assert bad.check.max_abs_err is None  # an infinite error is written as null, never as Infinity


@pytest.mark.nvcc
def test_records_hold_finite_numbers_only(host_test):
    recs = by_variant(run(host_test, "records").stdout)
    good = recs['good "quoted"\n']
    assert "nan_dropped" not in good.extra
    assert good.params["big"] == 1 << 40
    assert good.figures()["gb_per_s"] == pytest.approx(58720256 / 12 / 1e3)


@pytest.mark.nvcc
def test_compare_rejects_nan_inf_and_outliers(host_test):
    p = run(host_test, "compare")
    assert p.returncode == 0, p.stderr
    verdict = {name: r.extra["passed"] for name, r in by_variant(p.stdout).items() if "passed" in r.extra}
    assert verdict == {"exact": True, "within": True, "outside": False, "nan": False, "inf": False}


@pytest.mark.nvcc
def test_compare_bytes(host_test):
    extra = by_variant(run(host_test, "compare").stdout)["bytes"].extra
    assert extra == {"same": True, "diff": False, "diff_bad": 1}


@pytest.mark.nvcc
def test_summary_and_hash_are_deterministic(host_test):
    rec = by_variant(run(host_test, "stats").stdout)["stats"]
    t = rec.timing
    assert (t.min_us, t.q1_us, t.median_us, t.q3_us, t.samples) == (1, 25.75, 50.5, 75.25, 100)
    assert t.rse == pytest.approx(1.2533 * (49.5 / 1.349) / 10 / 50.5)
    assert rec.extra["u0"] == rec.extra["u0_again"]
    assert -1 <= rec.extra["u0"] < 1 and rec.extra["u0"] != rec.extra["u1"]


def load_twin():
    spec = importlib.util.spec_from_file_location("kwiki_bench", COMMON / "kwiki_bench.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kwiki_bench"] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def test_python_twin_imports_without_torch_and_agrees_on_summary():
    kb = load_twin()
    t = kb.summarize([float(i) for i in range(100, 0, -1)])
    assert (t.min_us, t.q1_us, t.median_us, t.q3_us, t.samples) == (1, 25.75, 50.5, 75.25, 100)


def test_python_twin_records_validate_and_drop_timing_on_failure(capsys):
    kb = load_twin()
    res = kb.Result("x", kb.summarize([2.0, 3.0, 4.0]), kb.Clocks(1980.0, None))
    kb.emit(kb.record("ok", params={"shape": "8"}, check=kb.check(True, 0.0), result=res, bytes_=1e6,
                      extra={"registers": 32, "inf": float("inf")}))
    kb.emit(kb.record("bad", params={"shape": "8"}, check=kb.check(False, float("nan")), result=res))
    recs = {r.variant: r for r in parse_records(capsys.readouterr().out, "twin")}
    assert recs["ok"].timing.median_us == 3.0 and recs["ok"].extra == {"registers": 32}
    assert recs["bad"].timing is None
    assert kb.exit_code() == 1


def test_python_twin_args():
    kb = load_twin()
    a = kb.parse_args(["--variants", "a,b", "--max-seconds=0.5", "--M=4096"], known=["a", "b", "c"])
    assert a.want("a") and not a.want("c") and a.options.max_seconds == 0.5 and a.rest == {"M": "4096"}
    with pytest.raises(SystemExit):
        kb.parse_args(["--variants", "zz"], known=["a"])


# ---------------------------------------------------------------- protocol 2: the runner's host parts


@pytest.mark.nvcc
@pytest.mark.parametrize("table, names", [
    ([], ["cublas", "tiled", "read_ceiling"]),
    (["derived"], ["bf16_a", "tf32_b"]),
])
def test_list_variants_prints_the_table_and_exits_inside_args(host_test, table, names):
    p = run(host_test, "variants", *table, "--list-variants")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == names  # and no record: nothing after Args ran


@pytest.mark.nvcc
def test_list_variants_comes_before_any_cuda_call(host_test):
    # no device visible: any CUDA call exits 2; --list-variants must not get that far
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    assert run(host_test, "variants_cuda", env=no_gpu).returncode == 2
    p = run(host_test, "variants_cuda", "--list-variants", env=no_gpu)
    assert p.returncode == 0 and p.stdout.splitlines() == ["cublas", "tiled", "read_ceiling"], p.stderr


@pytest.mark.nvcc
def test_variant_table_holds_names_and_an_artifacts_own_fields(host_test):
    # rungs and what each adds live in the manifest alone (issue 25): the table keeps names (and derived fields)
    rec = by_variant(run(host_test, "variants").stdout)["reached"]
    assert rec.params == {"name_tiled": "tiled", "tf32_b": True}


@pytest.mark.nvcc
def test_unknown_variant_in_a_variant_table_exits_2(host_test):
    p = run(host_test, "variants", "--variants=tiled,nope")
    assert p.returncode == 2 and "unknown variant 'nope'" in p.stderr


def rechecks(host_test: Path, *args: str) -> dict:
    p = run(host_test, "recheck", *args)
    assert p.returncode == 0, p.stderr
    return {name: r.extra for name, r in by_variant(p.stdout).items()}


def indices(extra: dict) -> list[int]:
    return [int(i) for i in str(extra["samples"]).split(";") if i]


@pytest.mark.nvcc
def test_recheck_selection_is_deterministic_given_the_seed(host_test):
    args = ("--seed=77", "--cases=6", "--n=200")
    assert rechecks(host_test, *args) == rechecks(host_test, *args)


@pytest.mark.nvcc
def test_recheck_selection_differs_between_seeds_and_between_cases(host_test):
    a = rechecks(host_test, "--seed=1", "--cases=6", "--n=200")
    b = rechecks(host_test, "--seed=2", "--cases=6", "--n=200")
    assert [indices(a[k]) for k in sorted(a)] != [indices(b[k]) for k in sorted(b)]
    assert len({tuple(indices(e)) for e in a.values()}) > 1  # not the same samples for every case
    assert a["case0"]["sets"] != b["case0"]["sets"]


@pytest.mark.nvcc
def test_the_runners_plan_is_the_one_whose_arithmetic_kwiki_states(host_test):
    """Protocol 3: the runner's constants are kwiki.results.recheck's, and every case must take 20 samples."""
    for extra in rechecks(host_test, "--seed=4", "--cases=2", "--n=40").values():
        assert (extra["rate"], extra["scale"], extra["min_samples"]) == (recheck.RATE, recheck.SCALE,
                                                                          recheck.MIN_SAMPLES)
        assert extra["needed"] == recheck.MIN_SAMPLES


@pytest.mark.nvcc
def test_rechecks_are_spread_over_the_whole_window_at_the_stated_rates(host_test):
    """Over 400 cases of 200 samples: each index is re-checked at about p(i); late samples are not spared (the
    protocol 2 plan re-checked 5% after the first 8, and a kernel honest for 8 launches escaped half the time)."""
    extras = list(rechecks(host_test, "--seed=9", "--cases=400", "--n=200").values())
    hits = [0] * 200
    for e in extras:
        for i in indices(e):
            hits[i] += 1
    for lo, hi in ((0, 18), (18, 60), (60, 200)):
        want = sum(recheck.probability(i) for i in range(lo, hi)) * len(extras)
        assert abs(sum(hits[lo:hi]) - want) < 4 * want ** 0.5 + 5, (lo, hi)
    # a kernel cutting corners on the last 11 of 20 samples: caught in nearly every case
    caught = sum(any(i >= 9 for i in indices(e) if i < 20) for e in extras)
    assert caught >= 0.97 * len(extras)


@pytest.mark.nvcc
@pytest.mark.parametrize("max_samples, want", [(2, [0, 1]), (1, [0]), (12, list(range(12)))])
def test_a_case_allowed_few_samples_rechecks_all_of_them(host_test, max_samples, want):
    few = (f"--n={max_samples}", f"--max-samples={max_samples}")
    for extra in rechecks(host_test, "--seed=5", "--cases=4", *few).values():
        assert indices(extra) == want


@pytest.mark.nvcc
def test_input_sets_are_drawn_per_sample_and_use_every_set(host_test):
    for extra in rechecks(host_test, "--seed=3", "--cases=4", "--n=60").values():
        sets = str(extra["sets"])
        assert set(sets) == {"0", "1"} and 10 < sets.count("1") < 50


@pytest.mark.nvcc
def test_clock_tally_sums_what_nvml_says_during_each_sample(host_test):
    recs = by_variant(run(host_test, "clocks").stdout)
    c = recs["tally"].clocks
    mhz = (c.sm_mhz_before, c.sm_mhz_after, c.sm_mhz_min, c.sm_mhz_median, c.sm_mhz_max)
    assert mhz == (1980, 1830, 1755, 1830, 1980)
    assert c.power_cap_s == pytest.approx(0.004)  # the window of the sample with the SW power cap bit
    assert c.thermal_s == 0.0
    assert c.hw_slowdown_s == pytest.approx(0.006)  # the window of the sample with the HW slowdown bit
    assert c.energy_j == pytest.approx(500 * 0.004 + 700 * 0.006)  # power x window; no reading, no energy
    assert c.window_s == pytest.approx(0.012)
    k = recs["counters"].clocks  # no reasons: the violation counters' growth, at most each window
    assert k.power_cap_s == pytest.approx(0.001 + 0.004)  # 1 ms, then 20 ms clamped to the 4 ms window, then a reset
    assert k.thermal_s == pytest.approx(0.0005) and k.hw_slowdown_s is None and k.energy_j is None
    none = recs["none"].clocks  # no NVML: every figure null
    assert all(v is None for v in none.model_dump().values())


@pytest.mark.nvcc
def test_cupti_window_counts_busy_time_on_every_stream_and_skips_what_it_cannot_time(host_test):
    extra = by_variant(run(host_test, "window").stdout)["window"].extra
    # a kernel 1-3 us, a memcpy 2.5-4 us, a kernel on another stream 5-9 us: busy 3 + 4 = 7 us (the idle gap 4-5 us
    # is the host's, not work), 8 us from first start to last end; the untimed memset counts as a record
    # without a span; an API record is not parsed. Opened at 2 us: the kernel that started at 1 us is left out.
    assert extra == {"parsed": 4, "records": 4, "invalid": 1, "span_us": 8.0, "busy_us": 7.0, "any": True,
                     "empty_any": False, "invalid_only_any": False, "opened_records": 3, "opened_busy_us": 5.5,
                     "overlap_busy_us": 22.0, "overlap_span_us": 30.0, "header_checked": extra["header_checked"],
                     "kernel_records": 2,  # two kernels; the memcpy and the memset are work, not kernels
                     "stamp_mhz": pytest.approx(1794.0),  # 179,400 cycles in 100 us: the clock the kernel counted
                     "stamp_short": False}  # 1 us of stamps: no figure


@pytest.mark.nvcc
def test_cupti_window_keeps_the_distinct_kernel_names_demangled_for_the_record(host_test):
    rec = by_variant(run(host_test, "kernels").stdout)["kernels"]
    # two launches of one template kernel count once; the extern "C" name stays as is; the poison kernel that
    # started before the window opened is earlier work, not the sample's
    assert rec.kernels == ["void gemv_block<128>(float const*, float*, int)", "plain_kernel"]
    assert rec.extra == {"mangled": 2, "first": "_Z10gemv_blockILi128EEvPKfPfi"}


@pytest.mark.nvcc
def test_protocol_three_record_validates_with_the_record_model(host_test):
    p = run(host_test, "protocol")
    assert p.returncode == 1  # the failed re-check counts
    recs = by_variant(p.stdout)
    good, cheat = recs["ws_persistent"], recs["cheat"]
    provenance = (good.protocol, good.timing_source, good.rechecked, good.bytes_level, good.flops_dtype)
    assert provenance == (PROTOCOL_VERSION, "cupti", 3, "dram", "bf16")
    assert good.clocks.sm_mhz_median == 1747.5 and good.clocks.power_cap_s == pytest.approx(0.0032)
    assert good.clocks.energy_j == pytest.approx(0.0016 * (690 + 700))
    assert good.figures()["sm_mhz"] == 1747.5 and good.figures()["event_median_us"] == 1428.5
    assert good.timer is not None and (good.timer.event_median_us, good.timer.kernels, good.timer.contexts) == \
        (1431.0, 1.0, "own-not-listed")
    assert good.sustained is not None and good.sustained.median_us == 1655.0 and good.sustained.settled
    assert good.figures()["sustained_tflop_per_s"] == pytest.approx(2 * 8192**3 / 1655.0 / 1e6)
    assert (good.clocks.sm_mhz_effective, good.clocks.sm_mhz_effective_by) == (1639.0, "clock64")
    assert cheat.timing is None and cheat.timing_source is None and not cheat.check.passed
    assert cheat.timer is None and cheat.sustained is None  # a failed check carries none of them
    assert cheat.check.detail.startswith("timed sample 4 differs from the reference")


# ---------------------------------------------------------------- the record model's new fields


def record(**over) -> dict:
    base = {"kwiki_record": 1, "variant": "v", "check": {"passed": True},
            "timing": {"median_us": 10, "q1_us": 9, "q3_us": 11, "min_us": 8, "samples": 5}}
    base.update(over)
    return base


def test_protocol_one_records_stay_valid():
    r = Record.model_validate(record(clocks={"sm_mhz_before": 1980.0, "sm_mhz_after": 1755.0}))
    assert r.protocol is None and r.timing_source is None and r.rechecked is None
    assert r.figures()["sm_mhz"] == 1755.0  # without a median, the last reading (as protocol 1 reported)


@pytest.mark.parametrize("over, where", [
    ({"timing_source": "wallclock"}, "timing_source"),
    ({"rechecked": -1}, "rechecked"),
    ({"protocol": 0}, "protocol"),
    ({"clocks": {"sm_mhz_min": 1900, "sm_mhz_median": 1800, "sm_mhz_max": 1980}}, "clocks"),
    ({"clocks": {"power_cap_s": -0.1}}, "clocks.power_cap_s"),
    ({"clocks": {"energy_j": -1}}, "clocks.energy_j"),
    ({"clocks": {"fan_rpm": 3}}, "clocks.fan_rpm"),
])
def test_record_model_refuses_bad_protocol_fields(over, where):
    with pytest.raises(ValidationError) as exc:
        Record.model_validate(record(**over))
    assert where in str(exc.value).replace("\n", ".")


# ---------------------------------------------------------------- kwiki: binary and manifest agree on the variants

VARIANTS_PROJECT = ROOT / "tests" / "fixtures" / "verify" / "variants_project"


def compile_only(root: Path, capsys) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", "--compile-only", "--root", str(root)])
    return code, json.loads(capsys.readouterr().out)


def test_a_manifest_variant_the_binary_lacks_fails_the_build_naming_both_lists(tmp_path, capsys):
    root = tmp_path / "p"
    shutil.copytree(VARIANTS_PROJECT, root)
    for attempt in ("fresh", "cached"):
        code, report = compile_only(root, capsys)
        builds = {b["artifact"]: b for b in report["builds"]}
        assert code == 1, attempt
        assert [b["cached"] for b in report["builds"]] == [attempt == "cached"] * len(builds)
        bad = builds["disagree_sm90a"]
        assert not bad["ok"] and bad["error"] == (
            "artifacts/disagree_sm90a/artifact.yaml: variants: the binary's --list-variants and the manifest disagree "
            "(missing from the binary: slow; not in the manifest: extra): binary lists [fast, extra]; "
            "manifest lists [fast, slow]")
        assert builds["agree_sm90a"]["ok"]  # the same names in the same order, and the shapes it was given
        assert builds["reorder_sm90a"]["error"] == (
            "artifacts/reorder_sm90a/artifact.yaml: variants: the binary's --list-variants and the manifest disagree "
            "(the same names in another order): binary lists [slow, fast]; manifest lists [fast, slow]")


def test_a_binary_that_does_not_list_the_manifests_shapes_fails_the_build(tmp_path, capsys):
    root = tmp_path / "p"
    shutil.copytree(VARIANTS_PROJECT, root)
    _, report = compile_only(root, capsys)
    builds = {b["artifact"]: b for b in report["builds"]}
    assert not builds["shapes_off_sm90a"]["ok"] and builds["shapes_off_sm90a"]["error"] == (
        "artifacts/shapes_off_sm90a/artifact.yaml: shapes: --shapes: the binary lists [8192x8192]; the manifest "
        "declares [4096x7168, 4099x4104]")


def test_a_cuda_binary_without_list_variants_fails_but_drivers_and_host_fixtures_are_not_asked(tmp_path, capsys):
    root = tmp_path / "p"
    shutil.copytree(VARIANTS_PROJECT, root)
    _, report = compile_only(root, capsys)
    builds = {b["artifact"]: b for b in report["builds"]}
    noflag = builds["noflag_sm90a"]
    assert not noflag["ok"]
    assert noflag["error"].startswith("artifacts/noflag_sm90a/artifact.yaml: variants: `noflag_sm90a --list-variants` "
                                      "exited 2: unknown option --list-variants")
    assert builds["driver_sm90a"]["ok"] and builds["host_noflag"]["ok"]
