"""artifacts/tile_order_sm90a/l2_profile.py on the CPU: a stand-in `ncu` and a stand-in GEMM binary.

The stand-in ncu writes a report in the layout of `ncu --csv --page raw --print-units base` to its
--log-file and runs the program after it; the stand-in binary prints the record the real gemm.cu
would print for its check. What the driver makes of them must be valid kwiki records.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kwiki.results.record import parse_records

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "artifacts" / "tile_order_sm90a" / "l2_profile.py"

FAKE_NCU = textwrap.dedent('''\
    #!{python}
    import json, os, subprocess, sys
    args = sys.argv[1:]
    if os.environ.get("FAKE_NCU_ARGV"):
        with open(os.environ["FAKE_NCU_ARGV"], "w") as fh:
            json.dump(args, fh)
    log = args[args.index("--log-file") + 1]
    app = args[args.index("--log-file") + 2:]
    mode = os.environ.get("FAKE_NCU_MODE", "ok")
    with open(log, "w") as fh:
        fh.write("==PROF== Connected to process\\n")
        fh.write('"ID","Kernel Name","dram__bytes_read.sum","lts__t_sector_hit_rate.pct",'
                 '"lts__t_sector_op_read_hit_rate.pct","lts__t_sectors_op_read.sum"\\n')
        fh.write('"","","byte","%","%","sector"\\n')
        if mode == "ok":
            fh.write('"0","gemm_ws","1,266,100,000","81.5","82.7","384,500,000"\\n')
    sys.exit(subprocess.run(app).returncode)
    ''')

FAKE_GEMM = textwrap.dedent('''\
    #!{python}
    import json, os, sys
    args = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    variant = sys.argv[sys.argv.index("--variants") + 1]
    m, n, k = (int(x) for x in args["shapes"].split("x"))
    passed = os.environ.get("FAKE_GEMM_CHECK", "pass") == "pass"
    print("check " + variant, file=sys.stderr)
    print(json.dumps({{"kwiki_record": 1, "variant": variant, "params": {{"M": m, "N": n, "K": k, "dtype": "bf16"}},
                      "check": {{"passed": passed, "reference": "fp64", "max_abs_err": 0.01}},
                      "timing": {{"median_us": 9.0, "q1_us": 8.0, "q3_us": 10.0, "min_us": 7.0, "samples": 2}}
                                if passed else None}}))
    sys.exit(0 if passed else 1)
    ''')


def _script(path: Path, text: str) -> Path:
    path.write_text(text.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fakes(tmp_path):
    return _script(tmp_path / "ncu", FAKE_NCU), _script(tmp_path / "gemm", FAKE_GEMM)


def drive(fakes, *args: str, **env: str) -> subprocess.CompletedProcess:
    ncu, gemm = fakes
    environ = {**os.environ, "KWIKI_NCU": str(ncu), **env}
    return subprocess.run([sys.executable, str(DRIVER), str(gemm), *args], capture_output=True, text=True,
                          env=environ, timeout=60)


def test_records_carry_the_counters_and_the_binarys_check(fakes):
    res = drive(fakes, "--shapes=8192x8192x8192,4096x4096x4096", "--variants", "ws_persistent_linear,ws_persistent")
    assert res.returncode == 0, res.stderr
    records = parse_records(res.stdout, "tile_order_sm90a")
    assert [(r.variant, r.params["M"]) for r in records] == [
        ("ws_persistent_linear", 8192), ("ws_persistent_linear", 4096), ("ws_persistent", 8192),
        ("ws_persistent", 4096)]
    first = records[0]
    assert first.check.passed and first.check.reference == "fp64"
    assert first.timing is None  # a profiled run's time is not the protocol's
    assert first.extra["dram_read_mb"] == pytest.approx(1266.1)
    assert first.extra["l2_read_mb"] == pytest.approx(384_500_000 * 32 / 1e6)
    assert first.extra["l2_read_hit_rate_pct"] == pytest.approx(82.7)
    assert first.extra["compulsory_mb"] == pytest.approx(2 * 8192 * 8192 * 2 / 1e6)
    assert first.extra["group"] == 1 and records[2].extra["group"] == 16
    assert first.figures()["dram_read_mb"] == pytest.approx(1266.1)


def test_a_failed_check_gives_no_figures_and_exit_1(fakes):
    res = drive(fakes, "--shapes=256x256x256", "--variants", "ws_persistent", FAKE_GEMM_CHECK="fail")
    assert res.returncode == 1
    (rec,) = parse_records(res.stdout, "tile_order_sm90a")
    assert not rec.check.passed and rec.extra == {}


def test_a_report_without_the_kernel_fails_the_record(fakes):
    res = drive(fakes, "--shapes=256x256x256", "--variants", "ws_persistent", FAKE_NCU_MODE="no-kernel")
    assert res.returncode == 1
    (rec,) = parse_records(res.stdout, "tile_order_sm90a")
    assert not rec.check.passed and "no kernel row" in rec.check.detail


def test_no_ncu_is_an_environment_problem(fakes, tmp_path):
    _, gemm = fakes
    env = {k: v for k, v in os.environ.items() if k != "KWIKI_NCU"}
    env["PATH"] = str(tmp_path / "empty")
    res = subprocess.run([sys.executable, str(DRIVER), str(gemm), "--variants", "ws_persistent"], capture_output=True,
                         text=True, env=env, timeout=60)
    if res.returncode != 2 and any(Path("/opt/nvidia/nsight-compute").glob("*/ncu")):
        pytest.skip("this machine has ncu installed")
    assert res.returncode == 2 and "ncu" in res.stderr and res.stdout == ""


def test_unknown_variant_is_a_usage_error(fakes):
    res = drive(fakes, "--variants", "ws_hilbert")
    assert res.returncode == 2 and "ws_hilbert" in res.stderr


def test_the_driver_uses_kwikis_ncu_command_line(fakes, tmp_path):
    res = drive(fakes, "--shapes=256x256x256", "--variants", "ws_persistent", FAKE_NCU_ARGV=str(tmp_path / "argv"))
    assert res.returncode == 0, res.stderr
    argv = json.loads((tmp_path / "argv").read_text())
    assert argv[argv.index("--clock-control") + 1] == "none" and argv[argv.index("--print-units") + 1] == "base"
    assert argv[argv.index("--kernel-name") + 1] == "regex:gemm_ws" and argv[argv.index("--launch-count") + 1] == "1"
    assert "--profile-from-start" not in argv  # the first launch: the check's, on fresh inputs
