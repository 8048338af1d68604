"""The shared measurement protocol (artifacts/common): host-side parts of the C++ header and the Python twin.

The C++ test program is compiled with nvcc and run without a GPU (it calls no CUDA API);
its stdout must be valid kwiki records.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kwiki.verify.record import parse_records

ROOT = Path(__file__).resolve().parent.parent
COMMON = ROOT / "artifacts" / "common"


@pytest.fixture(scope="module")
def host_test(tmp_path_factory) -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("bench") / "bench_host_test"
    subprocess.run([nvcc, "-std=c++17", f"-I{COMMON}", "-o", str(out), str(COMMON / "test" / "bench_host_test.cu")],
                   check=True, capture_output=True, timeout=300)
    return out


def run(binary: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


def by_variant(stdout: str) -> dict:
    return {r.variant: r for r in parse_records(stdout, "bench_host_test")}


@pytest.mark.nvcc
def test_args_parse_variants_and_values(host_test):
    p = run(host_test, "args", "--variants", "a,b", "--m=12", "--x", "2.5", "--flag")
    assert p.returncode == 0, p.stderr
    params = by_variant(p.stdout)["args"].params
    assert params == {"variants": "a,b", "want_a": True, "want_z": False, "m": 12, "x": 2.5, "name": "none", "flag": True}


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
    kb.emit(kb.record("ok", params={"shape": "8"}, check=kb.CheckResult(True, 0.0), result=res, bytes_=1e6,
                      extra={"registers": 32, "inf": float("inf")}))
    kb.emit(kb.record("bad", params={"shape": "8"}, check=kb.CheckResult(False, float("nan")), result=res))
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
