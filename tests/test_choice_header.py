"""kwiki_choice.cuh: a profiled run is told what the timed run's selection passes chose (`--choose`).

A `tuned` rung or a library's best algorithm is chosen per shape by timing its candidates; a run that times nothing
(--profile-mode) would take the first candidate that passes, and its profile audit would count another kernel than
the timed record ran. Compiled with nvcc and run with no GPU: the GEMV artifacts refuse `--choose` in a timed run and
a malformed entry with a usage error (exit 2) before any CUDA call, and accept a well-formed one in profile mode (the
run then goes on to its first CUDA call, which fails without a device). kwiki's side (told_choices, the profiled
command) is in tests/test_audits.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_artifact import build, run_without_gpu

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", params=[("gemv_bf16_sm90a", "gemv_bf16.cu", "4096x7168", ()),
                                        ("nvfp4_gemv_sm90a", "nvfp4_gemv.cu", "7168x16384x1",
                                         ("--full-scale-shapes=4099x16416x1",))])
def binary(request, tmp_path_factory):
    name, source, shape, more = request.param
    exe = build(tmp_path_factory, REPO / "artifacts" / name, source)
    return (lambda *args: run_without_gpu(exe, f"--shapes={shape}", *more, *args)), shape


def test_a_timed_run_refuses_to_be_told_a_choice_and_a_bad_entry_is_named(binary):
    run, shape = binary
    timed = run(f"--choose=tuned@{shape}=r1_u4_t256")
    assert timed.returncode == 2 and "--choose is for a run that times nothing" in timed.stderr
    for bad, why in ((f"tuned@{shape}", "VARIANT@SHAPE=CHOICE"), (f"@{shape}=x", "VARIANT@SHAPE=CHOICE"),
                     (f"tuned@{shape}=a;tuned@{shape}=b", f"names tuned@{shape} twice")):
        res = run("--profile-mode", f"--choose={bad}")
        assert res.returncode == 2 and why in res.stderr, res.stderr
        assert "CUDA" not in res.stderr and "seed" not in res.stderr  # refused before the first CUDA call


def test_a_profiled_run_takes_a_well_formed_choice_and_goes_on(binary):
    run, shape = binary
    res = run("--profile-mode", f"--choose=tuned@{shape}=r1_u4_t256")
    assert "usage error" not in res.stderr  # past the arguments, to the first CUDA call (no device here)
