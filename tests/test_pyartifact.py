"""`kind: python` artifacts on the CPU: the manifest, the import check (--compile-only, also without torch),
and the harness's verdicts on variants that each break one rule (tests/fixtures/python/artifacts/host_py).

The harness runs in subprocesses (CPU torch, `pip install -e '.[torch]'`); these tests never import torch.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from kwiki.cli import main
from kwiki.core.errors import ManifestError
from kwiki.wiki.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "python"
HARNESS_FILES = ("kwiki_harness.py", "kwiki_bench.py")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs torch (pip install -e '.[torch]')")


def make_project(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    common = dest / "artifacts" / "common"
    common.mkdir(parents=True, exist_ok=True)
    for name in HARNESS_FILES:
        shutil.copy(ROOT / "artifacts" / "common" / name, common / name)
    return dest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "p")


def verify(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["verify", "--quiet", "--json", "--no-write", "--root", str(root), *args])
    return code, json.loads(capsys.readouterr().out)


def harness_module() -> Any:
    spec = importlib.util.spec_from_file_location("kwiki_harness_t", ROOT / "artifacts" / "common" / "kwiki_harness.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- the manifest


def write_manifest(directory: Path, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "artifact.yaml").write_text(text)


PY = "name: a\ntitle: t\nkind: python\ntargets: [sm_90a]\nvariants: [{name: v}]\n"


@pytest.mark.parametrize(("extra", "message"), [
    ("", "names its module"),
    ("python: {module: m.py}\nbuild: {sources: [m.py]}\n", "has no 'build'"),
    ("python: {module: m.py}\nrun: {command: [sh, x]}\n", "has no run.command"),
    ("python: {module: m.txt}\n", "must be a .py file"),
    ("python: {module: missing.py}\n", "'missing.py' is not a file inside the artifact"),
])
def test_a_python_manifest_is_checked_with_a_location(tmp_path: Path, extra: str, message: str):
    d = tmp_path / "a"
    write_manifest(d, PY + extra)
    (d / "m.py").write_text("")
    (d / "m.txt").write_text("")
    with pytest.raises(ManifestError, match=message) as err:
        load_manifest(d, tmp_path)
    assert str(err.value).startswith("a/artifact.yaml")


def test_python_section_only_with_kind_python(tmp_path: Path):
    d = tmp_path / "a"
    write_manifest(d, PY.replace("kind: python\n", "") + "python: {module: m.py}\nbuild: {sources: [m.py]}\n")
    (d / "m.py").write_text("")
    with pytest.raises(ManifestError, match="exactly when kind is python"):
        load_manifest(d, tmp_path)


def test_a_python_manifest_needs_no_build(tmp_path: Path):
    d = tmp_path / "a"
    write_manifest(d, PY + "python: {module: m.py}\n")
    (d / "m.py").write_text("")
    m = load_manifest(d, tmp_path)
    assert m.kind == "python" and m.build.sources == ["m.py"]  # the module is its one source (hashed, checked)


# ---------------------------------------------------------------- the import check (--compile-only)


def test_compile_only_imports_the_module_and_checks_its_variants(project: Path, capsys: pytest.CaptureFixture[str]):
    code, report = verify(capsys, project, "--compile-only")
    builds = {b["artifact"]: b for b in report["builds"]}
    assert builds["host_py"]["ok"] and builds["host_py"]["binary"].endswith("ops.py"), builds
    assert builds["host_py_same"]["ok"]
    assert report["runs"] == [] and code == 0


def edited_build(project: Path, capsys: pytest.CaptureFixture[str], edit) -> tuple[int, dict[str, Any]]:
    """`edit` applied to the text of artifacts/host_py/ops.py, then `--compile-only`: the exit code and host_py's
    build."""
    ops = project / "artifacts" / "host_py" / "ops.py"
    ops.write_text(edit(ops.read_text()))
    code, report = verify(capsys, project, "--compile-only")
    return code, next(b for b in report["builds"] if b["artifact"] == "host_py")


def test_a_module_whose_variants_disagree_with_the_manifest_fails_its_build(project: Path, capsys):
    code, build = edited_build(project, capsys, lambda t: t.replace('"hangs"]', '"hangs", "extra"]'))
    assert not build["ok"] and "not in the manifest: extra" in build["error"]
    assert build["error"].startswith("artifacts/host_py/artifact.yaml")
    assert code == 1


def test_a_module_that_fails_to_import_is_a_located_build_error(project: Path, capsys):
    _, build = edited_build(project, capsys, lambda t: t + "\nraise RuntimeError('broken at import')\n")
    assert not build["ok"] and "ops.py:" in build["error"] and "broken at import" in build["error"]


def test_a_contract_problem_is_named(project: Path, capsys):
    _, build = edited_build(
        project, capsys, lambda t: t.replace('"one float32 multiply-add per element: exact up to rounding"', '""'))
    assert not build["ok"] and "TOLERANCES['float32'] must be (atol >= 0, rtol >= 0, a reason)" in build["error"]


@pytest.fixture
def no_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's Python sees no torch: a sitecustomize that blocks the import, as if it were not installed."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\nsys.modules['triton'] = None\n")
    monkeypatch.setenv("PYTHONPATH", str(block))


@pytest.mark.parametrize("compile_only", [True, False])
def test_without_torch_a_python_artifact_is_not_runnable_with_a_reason(project: Path, capsys, no_torch,
                                                                     compile_only: bool):
    _, report = verify(capsys, project, *(["--compile-only"] if compile_only else []))
    assert len(report["builds"]) == 2
    for build in report["builds"]:
        assert build["ok"], build  # the module imports without torch: it imports torch inside its functions
        assert "torch is not installed" in (build["not_runnable"] or "")
    for artifact in report["artifacts"]:
        assert "not runnable here: torch is not installed" in artifact["not_run"]
    assert report["runs"] == []
    claims = {c["claim"]: c for c in report["claims"]}
    assert claims["good-time"]["verdict"] == "not-run"
    assert "torch is not installed" in claims["good-time"]["detail"]
    assert any("host_py: not runnable here" in n for n in report["notes"])


def test_a_module_that_imports_torch_at_the_top_is_refused_without_torch(project: Path, capsys, no_torch):
    ops = project / "artifacts" / "host_py" / "ops.py"
    ops.write_text("import torch\n" + ops.read_text())
    _, report = verify(capsys, project, "--compile-only")
    build = next(b for b in report["builds"] if b["artifact"] == "host_py")
    assert not build["ok"] and "importing the module failed" in build["error"]


# ---------------------------------------------------------------- the harness, pure parts


def test_busy_time_is_the_union_of_intervals_on_every_stream():
    h = harness_module()
    assert h.busy_and_span([(10, 20), (15, 30), (50, 60)]) == (30, 50)
    assert h.busy_and_span([]) == (0, 0)


def test_a_sample_window_holds_the_device_work_its_launch_calls_made():
    h = harness_module()
    e = h.Event
    events = [
        e(True, "kwiki.sample.a.0", 100, 200), e(True, "kwiki.sample.a.1", 300, 400),
        e(True, "cudaLaunchKernel", 40, 45, 1), e(False, "poison_fill", 5050, 5099, 1),  # before: not timed
        e(True, "cuLaunchKernelEx", 110, 115, 2), e(False, "triton_kernel", 5110, 5150, 2),  # GPU clock differs
        e(True, "cudaLaunchKernel", 116, 118, 3), e(False, "kernel_stream2", 5120, 5160, 3),  # two streams: once
        e(False, "kwiki.sample.a.0", 5110, 5160),  # the label's GPU annotation: not work
        e(True, "aten::copy_", 120, 130, 9), e(False, "unrelated", 5170, 5180, 9),  # not a launch call
        e(True, "cudaMemcpyAsync", 310, 311, 4), e(False, "Memcpy DtoD", 5310, 5320, 4),
        e(False, "cudaStreamSynchronize", 5321, 5400, 5),  # an API call the profiler files as device work
    ]
    assert h.sample_windows(events) == {
        "kwiki.sample.a.0": (50, 50, frozenset({"triton_kernel", "kernel_stream2"}), 2),
        "kwiki.sample.a.1": (10, 10, frozenset(), 0),  # a memcpy is work, not a kernel
    }


def test_without_launch_calls_a_window_takes_the_work_that_started_in_it():
    h = harness_module()
    e = h.Event
    events = [e(True, "kwiki.sample.a.0", 100, 200), e(False, "flush", 50, 99), e(False, "k", 110, 150),
              e(False, "k2", 120, 160)]
    assert h.sample_windows(events) == {"kwiki.sample.a.0": (50, 50, frozenset({"k", "k2"}), 2)}


# ---------------------------------------------------------------- the harness's verdicts (one verify run)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (pip install -e '.[torch]')")
    root = make_project(tmp_path_factory.mktemp("py") / "p")
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):  # writes back, as on the GPU machine: the page's ladder and the results store
        main(["verify", "--quiet", "--json", "--root", str(root)])
    report = json.loads(out.getvalue())
    report["by_variant"] = {r["variants"][0]: r for r in report["runs"] if r["artifact"] == "host_py"}
    report["same"] = {r["variants"][0]: r for r in report["runs"] if r["artifact"] == "host_py_same"}
    report["root"] = root
    return report


def status(ran: dict[str, Any], variant: str) -> tuple[str, str]:
    r = ran["by_variant"][variant]
    return r["status"], r["message"]


@needs_torch
def test_every_variant_gets_a_verdict_of_its_own(ran):
    assert all(len(r["variants"]) == 1 for r in ran["runs"])
    assert set(ran["by_variant"]) == {"good", "good_returns", "wrong", "nan", "mutates", "skips_timed",
                                      "cached_return", "lazy_view", "subclass", "raises", "hangs"}


@needs_torch
@pytest.mark.parametrize("variant", ["good", "good_returns"])
def test_an_honest_variant_is_timed(ran, variant: str):
    assert status(ran, variant) == ("ok", "")
    claim = next(c for c in ran["claims"] if c["claim"] == "good-time")
    assert claim["verdict"] == "reproduced" and claim["value"] > 0


@needs_torch
def test_a_wrong_output_fails_its_check(ran):
    s, msg = status(ran, "wrong")
    assert s == "check-failed" and "not within atol" in msg
    claim = next(c for c in ran["claims"] if c["claim"] == "wrong-time")
    assert claim["verdict"] == "failed" and claim["value"] is None


@needs_torch
def test_a_nan_fails_its_check(ran):
    s, msg = status(ran, "nan")
    assert s == "check-failed" and "got nan" in msg


@needs_torch
def test_a_variant_that_writes_its_input_fails(ran):
    s, msg = status(ran, "mutates")
    assert s == "check-failed" and "input 'x' was changed" in msg


@needs_torch
@pytest.mark.parametrize("variant", ["skips_timed", "cached_return"])
def test_a_variant_right_only_when_checked_is_caught_on_a_timed_sample(ran, variant: str):
    s, msg = status(ran, variant)
    assert s == "check-failed" and "timed sample" in msg and "differs from the reference" in msg


@needs_torch
@pytest.mark.parametrize(("variant", "why"), [("lazy_view", "is a view of another tensor"),
                                              ("subclass", "not a plain torch.Tensor")])
def test_outputs_must_be_plain_materialised_tensors(ran, variant: str, why: str):
    s, msg = status(ran, variant)
    assert s == "check-failed" and why in msg


@needs_torch
@pytest.mark.parametrize("variant", ["skips_timed", "cached_return"])
def test_the_poison_catches_stale_outputs_when_every_input_set_is_the_same(ran, variant: str):
    """Rotating inputs cannot tell a stale output from a fresh one here: the poison before every timed
    sample (harness outputs), and after every call (returned outputs), does."""
    assert ran["same"]["good"]["status"] == "ok"
    r = ran["same"][variant]
    assert r["status"] == "check-failed" and "got nan" in r["message"], r


@needs_torch
def test_a_variant_that_raises_is_its_own_verdict(ran):
    s, msg = status(ran, "raises")
    assert s == "exit-error" and msg.startswith("raised in its check call: ZeroDivisionError")


@needs_torch
def test_a_variant_that_hangs_is_killed_by_its_watchdog(ran):
    s, msg = status(ran, "hangs")
    assert s == "timeout" and "watchdog" in msg
    assert ran["by_variant"]["hangs"]["seconds"] < 25  # its own 3 s watchdog, not the run's 30 s timeout


@needs_torch
def test_records_carry_the_shared_format_and_provenance(ran):
    log = next(Path(ran["root"], r["log"]) for r in ran["runs"] if r["variants"] == ["good"])
    line = next(ln for ln in log.read_text().splitlines() if '"variant":"good"' in ln)
    rec = json.loads(line)
    assert rec["protocol"] == 3 and rec["timing_source"] == "wall" and rec["rechecked"] >= 2
    assert rec["extra"]["torch"].startswith("2.") and rec["extra"]["harness"] == "python"
    assert rec["extra"]["input_sets"] >= 2


@needs_torch
def test_the_store_and_the_page_get_the_python_artifacts_figures(ran):
    rows = [json.loads(ln) for f in Path(ran["root"], "results").glob("*.jsonl") for ln in f.read_text().splitlines()]
    good = next(r for r in rows if r["kind"] == "record" and r["artifact"] == "host_py" and r["variant"] == "good")
    assert good["passed"] and good["torch"].startswith("2.") and "time_us" in good["figures"]
    wrong = next(r for r in rows if r["kind"] == "record" and r["variant"] == "wrong")
    assert not wrong["passed"] and "time_us" not in wrong["figures"]
    page = Path(ran["root"], "wiki", "pyfixture.md").read_text()
    assert "<!-- kwiki:ladder" in page and "`good_returns`" in page  # one ladder row per variant


def test_the_harness_never_imports_torch_to_describe(tmp_path: Path):
    """`describe` runs where torch is absent: the harness and kwiki_bench import it only inside functions."""
    import subprocess

    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    ops = FIXTURE / "artifacts" / "host_py" / "ops.py"
    done = subprocess.run([sys.executable, str(ROOT / "artifacts" / "common" / "kwiki_harness.py"), "describe",
                           str(ops)], capture_output=True, text=True, env={"PYTHONPATH": str(block)}, timeout=60)
    info = json.loads(done.stdout)
    assert info["problems"] == [] and info["torch"] is None and "not installed" in info["torch_missing"]


# ---------------------------------------------------------------- claims across artifacts


@needs_torch
def test_a_claim_compares_figures_of_two_artifacts_of_the_same_run(ran):
    claim = next(c for c in ran["claims"] if c["claim"] == "cross-artifact-ratio")
    assert claim["verdict"] == "reproduced", claim
    assert claim["figure"] == "good[n=4096].time_us / same:good[n=4096].time_us"
    logs = {r["artifact"]: Path(ran["root"], r["log"]) for r in ran["runs"] if r["variants"] == ["good"]}
    times = {a: next(json.loads(ln) for ln in p.read_text().splitlines() if ln.startswith('{"kwiki_record"')
                     and '"variant":"good"' in ln)["timing"]["median_us"] for a, p in logs.items()}
    assert claim["value"] == pytest.approx(times["host_py"] / times["host_py_same"])


def test_a_written_cross_artifact_claim_traces_to_both_artifacts_rows(ran, capsys):
    # the H200 run of 2026-11-30: `kwiki check` called triton-copy-vs-cuda-copy untraceable, as the trace
    # recomputed it from its own artifact's rows only
    assert main(["check", "--root", str(ran["root"]), "--json"]) == 0, capsys.readouterr().out
    capsys.readouterr()


def test_a_selector_naming_an_unknown_artifact_key_is_a_located_error(project: Path, capsys):
    page = project / "wiki" / "pyfixture.md"
    page.write_text(page.read_text().replace("per: {artifact: same,", "per: {artifact: nosuch,"))
    code = main(["check", "--root", str(project), "--json"])
    out = json.loads(capsys.readouterr().out)
    problems = [p for p in out["problems"] if "nosuch" in p["message"]]
    assert code == 1 and problems and problems[0]["field"].startswith("claims[2].measure.per.artifact"), out


def test_a_selector_is_checked_against_its_own_artifacts_variants(project: Path, capsys):
    page = project / "wiki" / "pyfixture.md"
    page.write_text(page.read_text().replace("per: {artifact: same, variant: good,", "per: {artifact: same, "
                                                                                    "variant: wrong,"))
    main(["check", "--root", str(project), "--json"])
    out = json.loads(capsys.readouterr().out)
    problems = [p for p in out["problems"] if p["field"] == "claims[2].measure.per.variant"]
    assert problems and "artifacts/host_py_same/artifact.yaml" in problems[0]["message"], out


def test_a_claim_whose_other_artifact_did_not_run_is_not_run(project: Path, capsys, no_torch):
    _, report = verify(capsys, project)
    claim = next(c for c in report["claims"] if c["claim"] == "cross-artifact-ratio")
    assert claim["verdict"] == "not-run"


def test_a_cross_artifact_claim_over_past_runs_reads_the_other_artifacts_rows_of_that_run():
    from kwiki.results.series import claim_value, run_board
    from kwiki.results.store import RecordRow
    from kwiki.wiki.model import Claim

    claim = Claim.model_validate({
        "id": "x", "statement": "s", "metric": "ratio", "unit": "x", "at_least": 0.5,
        "measure": {"artifact": "py", "of": {"variant": "a", "figure": "gb_per_s"},
                    "per": {"artifact": "cuda", "variant": "b", "figure": "gb_per_s"}}})

    def row(artifact: str, variant: str, gb: float) -> RecordRow:
        return RecordRow(gpu="H200", date="2026-11-30", run_id="r1", artifact=artifact, target="sm_90a",
                         variant=variant, figures={"gb_per_s": gb}, passed=True)

    mine, other = [row("py", "a", 3000.0)], [row("cuda", "b", 4000.0)]
    assert claim_value(mine, claim, other) == pytest.approx(0.75)
    assert claim_value(mine, claim) is None  # that run did not measure the other artifact: no value, not a wrong one
    # the other artifact named by `of` (a baseline's time over ours): its rows come from the other artifact too
    flipped = Claim.model_validate({
        "id": "y", "statement": "s", "metric": "ratio", "unit": "x", "at_least": 0.5,
        "measure": {"artifact": "py", "of": {"artifact": "cuda", "variant": "b", "figure": "gb_per_s"},
                    "per": {"variant": "a", "figure": "gb_per_s"}}})
    assert flipped.measure is not None and flipped.measure.other == "cuda"
    assert claim_value(mine, flipped, other) == pytest.approx(4 / 3)
    assert claim_value(mine, flipped) is None
    on_b = [other[0].model_copy(update={"gpu_uuid": "GPU-b"})]
    assert run_board(mine, flipped, on_b) == "GPU-b" and run_board(on_b, claim, mine) is None
    with pytest.raises(ValueError, match="two other artifacts"):
        Claim.model_validate({
            "id": "z", "statement": "s", "metric": "ratio", "unit": "x", "at_least": 0.5,
            "measure": {"artifact": "py", "of": {"artifact": "cuda", "variant": "b"},
                        "per": {"artifact": "triton", "variant": "c"}}})


def test_the_run_stage_counts_wall_time_once_per_artifact(ran):
    # the H200 run of 2026-11-30 summed each Python variant's outcome seconds (one shared process): run 246 s
    # in a verify of 111 s, kwiki_overhead -151 s
    s = ran["seconds"]
    assert 0 <= s["run"] <= s["total"] and s["kwiki_overhead"] >= 0, s


@pytest.mark.parametrize("where", ["outside the repository", "elsewhere in the repository"])
def test_a_module_that_links_out_of_its_artifact_is_never_imported(project: Path, tmp_path: Path, capsys, where):
    # the containment rule (issue 14) for the Python kind: the harness imports the module, so a link to a
    # file outside the artifact's folder would run code kwiki never planned
    folder = tmp_path if where == "outside the repository" else project / "wiki"
    outside = folder / "elsewhere.py"
    outside.write_text("import pathlib\npathlib.Path(__file__).with_name('ran').write_text('1')\n")
    module = project / "artifacts" / "host_py" / "ops.py"
    module.unlink()
    module.symlink_to(outside)
    _, report = verify(capsys, project, "--compile-only")
    said = [p["message"] for p in report["problems"]] + [b.get("error") or "" for b in report["builds"]]
    assert any("leads out of the" in m for m in said), report
    assert not (folder / "ran").exists()


# ---------------------------------------------------------------- a CUDA library loaded by a Python artifact

CUDA_FIXTURE = Path(__file__).parent / "fixtures" / "python_cuda"
REPO = Path(__file__).resolve().parent.parent


def cuda_project(dest: Path) -> Path:
    shutil.copytree(CUDA_FIXTURE, dest)
    shutil.copytree(REPO / "artifacts" / "common", dest / "artifacts" / "common",
                    ignore=shutil.ignore_patterns("test", "__pycache__"))
    return dest


def compile_report(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["verify", "--compile-only", "--no-write", "--quiet", "--json", "--root", str(root)])
    return code, json.loads(capsys.readouterr().out)


def test_python_cuda_sources_are_checked_to_exist(tmp_path: Path):
    root = cuda_project(tmp_path / "p")
    (root / "artifacts" / "scale_cuda_sm90a" / "scale_kernels.cu").unlink()
    with pytest.raises(ManifestError, match=r"'scale_kernels\.cu' is not a file inside the artifact"):
        load_manifest(root / "artifacts" / "scale_cuda_sm90a", root)


@pytest.mark.nvcc
def test_the_library_a_python_artifact_loads_is_built_and_its_sass_checked(tmp_path: Path, capsys):
    root = cuda_project(tmp_path / "p")
    code, report = compile_report(root, capsys)
    (build,) = report["builds"]
    assert build["ok"] and build["library"] and Path(build["library"]).is_file(), build
    assert build["binary"].endswith("scale.py")  # the module is what the harness runs; the library it loads
    (mech,) = report["mechanism"]
    assert (mech["variant"], mech["status"]) == ("cuda_vec4", "passed"), mech
    assert [k["name"] for k in mech["kernels"]] == ["scale_vec4_kernel"]
    assert code == 0


@pytest.mark.nvcc
def test_a_library_kernel_without_the_declared_instructions_fails_its_mechanism_gate(tmp_path: Path, capsys):
    root = cuda_project(tmp_path / "p")
    manifest = root / "artifacts" / "scale_cuda_sm90a" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace('require: ["LDG.E.128", "STG.E.128"]', 'require: ["HGMMA"]'))
    code, report = compile_report(root, capsys)
    (mech,) = report["mechanism"]
    assert mech["status"] == "failed" and "HGMMA" in str(mech["mismatches"]), mech
    assert code == 1


@pytest.mark.nvcc
def test_a_library_that_does_not_compile_fails_the_build_located(tmp_path: Path, capsys):
    root = cuda_project(tmp_path / "p")
    src = root / "artifacts" / "scale_cuda_sm90a" / "scale_kernels.cu"
    src.write_text(src.read_text() + "\nthis is not C++;\n")
    code, report = compile_report(root, capsys)
    (build,) = report["builds"]
    assert not build["ok"] and build["error"].startswith(
        "artifacts/scale_cuda_sm90a/artifact.yaml: python.cuda: the library did not build: build failed"), build
    assert code == 1


def test_a_claim_whose_params_match_no_grid_entry_is_a_located_problem_before_a_gpu(
        project: Path, capsys: pytest.CaptureFixture[str]):
    page = project / "wiki" / "pyfixture.md"
    text = page.read_text()
    assert text.count("of: {variant: wrong, params: {n: 4096}") == 1
    page.write_text(text.replace("of: {variant: wrong, params: {n: 4096}", "of: {variant: wrong, params: {n: 4069}"))
    line = 1 + page.read_text().splitlines().index(
        "  measure: {artifact: ops, of: {variant: wrong, params: {n: 4069}, figure: time_us}}")
    code, report = verify(capsys, project, "--compile-only")
    problems = [p for p in report["problems"] if p["field"].endswith("measure.of.params")]
    assert code == 1 and len(problems) == 1, report["problems"]
    (p,) = problems
    assert (p["path"], p["line"]) == ("wiki/pyfixture.md", line)
    assert "'wrong' at params {'n': 4069} matches no GRID entry of artifacts/host_py/ops.py" in p["message"]
    assert "n=4096" in p["message"]  # where it does run


def test_the_claims_of_the_fixture_match_their_grid(project: Path, capsys: pytest.CaptureFixture[str]):
    code, report = verify(capsys, project, "--compile-only")
    assert code == 0 and not [p for p in report["problems"] if "GRID" in p["message"]], report["problems"]


# ---------------------------------------------------------------- what the module cannot change (issue 40 item 4)

CHEATS = Path(__file__).parent / "fixtures" / "python_cheats"
CHEAT_MODULE = CHEATS / "artifacts" / "cheats_py" / "cheats.py"


def test_the_harness_draws_the_recheck_plan_of_kwiki_results_recheck():
    from kwiki.results import recheck

    h = harness_module()
    for max_samples in (5, 19, 20, 2000):
        for i in range(0, 5000, 7):
            assert h.recheck_probability(i, max_samples) == recheck.probability(i, max_samples), (i, max_samples)
    assert (h.RECHECK_RATE, h.RECHECK_SCALE, h.RECHECK_MIN_SAMPLES) == (recheck.RATE, recheck.SCALE,
                                                                       recheck.MIN_SAMPLES)


def test_the_harness_and_its_judge_draw_the_same_positions():
    h = harness_module()
    assert h.positions(7, 10) == list(range(10))  # a small tensor ships every element
    drawn = h.positions(12345, 1 << 30)
    assert drawn == h.positions(12345, 1 << 30) and len(drawn) == h.SHIPPED and max(drawn) < 1 << 30
    assert drawn != h.positions(12346, 1 << 30)


@pytest.fixture(scope="module")
def cheats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (pip install -e '.[torch]')")
    root = tmp_path_factory.mktemp("cheats") / "p"
    shutil.copytree(CHEATS, root)
    (root / "artifacts" / "common").mkdir()
    for name in HARNESS_FILES:
        shutil.copy(ROOT / "artifacts" / "common" / name, root / "artifacts" / "common" / name)
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        main(["verify", "--quiet", "--json", "--no-write", "--root", str(root)])
    report = json.loads(out.getvalue())
    report["by_variant"] = {r["variants"][0]: r for r in report["runs"] if r["artifact"] == "cheats_py"}
    report["fresh"] = {r["variants"][0]: r for r in report["runs"] if r["artifact"] == "fresh_py"}
    report["verdicts"] = {c["claim"]: c["verdict"] for c in report["claims"]}
    report["root"] = root
    return report


@needs_torch
def test_the_honest_variant_beside_the_cheats_is_reproduced_and_its_record_written_by_kwiki(cheats):
    assert cheats["by_variant"]["honest"]["status"] == "ok", cheats["by_variant"]["honest"]
    assert cheats["verdicts"]["honest-time"] == "reproduced"
    log = Path(cheats["root"], cheats["by_variant"]["honest"]["log"]).read_text()
    records = log.split("--- records (written by kwiki from the harness's channel)\n")[1]
    rec = next(json.loads(ln) for ln in records.splitlines() if '"variant":"honest"' in ln)
    assert rec["extra"]["parent_median_us"] > 0 and rec["rechecked"] >= 1 and rec["timing"]["samples"] >= 20
    assert "--- judge: exit 0" in log


@needs_torch
@pytest.mark.parametrize(("variant", "caught_by"), [
    ("frame_plan", "timed sample"),  # no plan exists before a sample ran: it bets, and is re-checked
    ("patch_compare", "kwiki's judge"),  # the harness's compare said yes; the judge, in its own process, did not
    ("patch_clock", "kwiki's clock saw"),  # the harness reported 1/1000 of what the parent's clock saw
    ("memo_reference", "timed sample"),  # no reference is kept between samples: nothing to copy
    ("rewrite_record", "not within"),  # its record on stdout is not read; kwiki writes the records
    ("late_200", "more back to back"),  # honest for more calls than the samples: the tail check outlasts it
])
def test_a_cheat_that_reaches_into_the_harness_is_not_reproduced(cheats, variant: str, caught_by: str):
    run = cheats["by_variant"][variant]
    assert run["status"] == "check-failed" and caught_by in run["message"], run
    assert cheats["verdicts"][f"{variant.replace('_', '-')}-time"] == "failed"


@needs_torch
@pytest.mark.parametrize("variant", ["patch_compare", "patch_clock", "rewrite_record"])
def test_without_its_parent_the_harness_cannot_stop_the_patching_cheats(variant: str):
    """The defense removed: run by hand, the harness is its own parent (plan, comparison, clock and records in the
    module's process) and the patching cheats come out passed. What fails them under kwiki is the parent."""
    import subprocess

    done = subprocess.run([sys.executable, str(ROOT / "artifacts" / "common" / "kwiki_harness.py"), "run",
                           str(CHEAT_MODULE), "--device", "cpu", "--variants", variant, "--max-samples=25"],
                          capture_output=True, text=True, timeout=120)
    rec = next(json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith('{"kwiki_record"'))
    assert rec["check"]["passed"] and rec["timing"], rec
    if variant == "patch_clock":
        assert rec["timing"]["median_us"] < 1000  # its calls sleep 20 ms


@needs_torch
def test_a_claim_in_the_sustained_regime_gets_blocks_back_to_back(cheats):
    assert cheats["verdicts"]["honest-sustained-time"] == "reproduced"
    log = Path(cheats["root"], cheats["by_variant"]["honest"]["log"]).read_text()
    assert "--sustained=honest" in log.splitlines()[0]  # the claim's regime put the variant on the harness's line
    rec = next(json.loads(ln) for ln in log.split("--- records")[1].splitlines() if '"variant":"honest"' in ln)
    sus = rec["sustained"]
    assert sus["samples"] == 7 and sus["launches"] >= 10 and sus["settle_s"] >= 1.0 and sus["settled"], sus
    assert rec["rechecked"] >= 1 + 7  # the tail's last call and each block's last call are judged
    frame = next(json.loads(ln) for ln in log.split("--- records")[1].splitlines() if '"variant":"frame_plan"' in ln)
    assert frame.get("sustained") is None


@needs_torch
def test_fresh_inputs_fail_a_variant_that_reuses_part_of_an_earlier_output(cheats):
    run = cheats["fresh"]["reuse_5pct"]
    assert run["status"] == "check-failed" and "timed sample" in run["message"], run
    assert cheats["verdicts"]["reuse-5pct-time"] == "failed"
    assert cheats["verdicts"]["fresh-honest-time"] == "reproduced"
    log = Path(cheats["root"], cheats["fresh"]["reuse_5pct"]["log"]).read_text()
    rec = next(json.loads(ln) for ln in log.split("--- records")[1].splitlines() if '"variant":"honest"' in ln)
    assert rec["extra"]["fresh_inputs"] == 1 and rec["extra"]["input_sets"] == 1


@needs_torch
def test_without_fresh_inputs_the_reuse_escapes(monkeypatch: pytest.MonkeyPatch):
    """The defense removed: on rotating input sets, 5% of an earlier output is always right."""
    import os
    import subprocess

    module = CHEATS / "artifacts" / "fresh_py" / "fresh.py"
    done = subprocess.run([sys.executable, str(ROOT / "artifacts" / "common" / "kwiki_harness.py"), "run",
                           str(module), "--device", "cpu", "--variants", "reuse_5pct", "--max-samples=25"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "KWIKI_TEST_NO_FRESH": "1"})
    rec = next(json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith('{"kwiki_record"'))
    assert rec["check"]["passed"] and rec["timing"] and "fresh_inputs" not in rec["extra"], rec


# ---------------------------------------------------------------- one process on the GPU (protocol 3, R3)


class FakeNvml:
    """pynvml's process listing, as a driver answers it."""

    def __init__(self, pids: list[int] | None, v3: bool = True):
        self.pids = pids
        if v3:
            self.nvmlDeviceGetComputeRunningProcesses_v3 = self.listing
        else:
            self.nvmlDeviceGetComputeRunningProcesses = self.listing

    def listing(self, handle: object) -> list[Any]:
        if self.pids is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return [type("P", (), {"pid": p})() for p in self.pids]


@pytest.mark.parametrize(("pids", "v3", "want"), [
    ([0], True, ("listed", [])),  # 0: this process (filled in below)
    ([0, 4242], False, ("listed", [4242])),  # a helper process holding a context: it fails the case
    ([7], True, ("own-not-listed", [])),  # a PID namespace: one entry may be ours
    ([7, 8], True, ("own-not-listed", [8])),  # ... a second one is not
    (None, True, ("unavailable", [])),
])
def test_nvml_lists_the_processes_holding_a_context(pids, v3, want):
    import os

    h = harness_module()
    nvml = h.Nvml("cpu")
    nvml.h, nvml.nv = object(), FakeNvml([os.getpid() if p == 0 else p for p in pids] if pids else pids, v3)
    assert nvml.processes() == want
    assert h.Nvml("cpu").processes() == ("unavailable", [])  # no pynvml, no GPU: said so


@pytest.mark.parametrize(("declared", "module_flag", "error"), [
    ("true", "", "the manifest says True, the module does not declare FRESH_INPUTS = True"),
    ("'an fp64 host reference costs seconds'", "FRESH_INPUTS = True\n", "the module declares FRESH_INPUTS"),
    ("true", "FRESH_INPUTS = True\n", None),
])
def test_the_manifests_fresh_inputs_and_the_modules_agree(project: Path, capsys, declared: str, module_flag: str,
                                                          error: str | None):
    manifest = project / "artifacts" / "host_py" / "artifact.yaml"
    text = manifest.read_text().replace("targets: [host]\n", f"targets: [host]\nfresh_inputs: {declared}\n")
    manifest.write_text(text)
    ops = project / "artifacts" / "host_py" / "ops.py"
    ops.write_text(ops.read_text().replace("import time\n", "import time\n" + module_flag))
    _, report = verify(capsys, project, "--compile-only")
    build = next(b for b in report["builds"] if b["artifact"] == "host_py")
    if error is None:
        assert build["ok"], build
    else:
        assert not build["ok"] and error in build["error"], build
        assert build["error"].startswith("artifacts/host_py/artifact.yaml: fresh_inputs:")


def test_the_timer_says_what_the_event_pair_the_span_and_the_kernel_count_saw():
    from kwiki.results.record import Timer

    h = harness_module()
    harness = h.Harness.__new__(h.Harness)  # no module, no device: only what timer() reads
    harness.device, harness.calibration = "cuda", h.Calibration(fixed_us=7.5, per_launch_us=2.5)
    case = h.Case("v", lambda i, o: None, 1.0, events_us=[12.0, 10.0, 11.0], spans=[6.0, 5.0, 7.0],
                  counts=[2, 3, 2], contexts="own-not-listed")
    t = harness.timer(case)
    assert t == {"event_median_us": 11.0, "span_median_us": 6.0, "kernels": 2.0, "fixed_us": 7.5,
                 "per_launch_us": 2.5, "contexts": "own-not-listed"}
    Timer.model_validate(t)  # the record's model reads it
    case.timing_source = "events"  # no CUPTI: no busy time to hold the bracket to
    assert harness.timer(case) is None
    harness.device = "cpu"
    assert h.Harness.timer(harness, h.Case("v", lambda i, o: None, 1.0)) is None


@pytest.mark.parametrize(("where", "inside_repo"), [("artifacts/host_py/helpers.py", True),
                                                    ("artifacts/common/.kwiki_extra.py", False)])
def test_a_link_out_of_a_python_artifacts_folder_or_common_is_refused(project: Path, tmp_path: Path, capsys, where,
                                                                      inside_repo: bool):
    # issue 40 item 4: the containment rule holds for every file of the folder the harness imports from, and for
    # the harness's own folder, not only for the module the manifest names: a link to elsewhere in the repository,
    # and a dot-named link (importable by path) out of it
    outside = (project / "wiki" if inside_repo else tmp_path) / "elsewhere.py"
    outside.write_text("import pathlib\npathlib.Path(__file__).with_name('ran').write_text('1')\n")
    (project / where).symlink_to(outside)
    _, report = verify(capsys, project, "--compile-only")
    build = next(b for b in report["builds"] if b["artifact"] == "host_py")
    assert not build["ok"] and f"{where} is a link that leads out of its folder" in build["error"], build
    assert build["error"].startswith("artifacts/host_py/artifact.yaml: python.module")
    assert not (tmp_path / "ran").exists()


# ---------------------------------------------------------------- cases timed together stop together


def test_interleaved_variants_stop_together():
    """A variant stable after 20 samples goes on sampling while its partner is still noisy (two copies of one GEMM
    came out 10% apart on the H200 when one stopped at 20 samples and the other took 40 more alone), each up to its
    own max_samples."""
    h = harness_module()
    harness = h.Harness.__new__(h.Harness)
    harness.device, harness.opts, harness.sustained = "cpu", h.kb.Options(max_seconds=60.0), set()
    steady = h.Case("steady", fn=lambda: None, timeout_s=1.0)
    noisy = h.Case("noisy", fn=lambda: None, timeout_s=1.0)

    def sample(case, k, *rest):
        noise = 1.0 + (0.5 if k % 2 else -0.5) if case is noisy and k < 57 else 1.0
        case.samples.append(100.0 * noise)

    harness.sample, harness.tail, harness.contexts = sample, (lambda *a: None), (lambda case: "listed")
    harness.sustain = lambda *a: None
    harness.opts.max_samples = 80
    harness.time([steady, noisy], {}, [], [], {}, None)
    assert len(noisy.samples) > 57 and len(steady.samples) == len(noisy.samples)
    failed = h.Case("failed", fn=lambda: None, timeout_s=1.0, passed=False)  # a failed case takes no sample
    noisy.samples.clear()
    harness.time([failed, noisy], {}, [], [], {}, None)
    assert failed.samples == [] and len(noisy.samples) > 57


_SAMPLED = '''
GRID = [{"n": 5000, "dtype": "float32"}]
VARIANTS = ["good"]
TOLERANCES = {"float32": (1e-6, 1e-6, "exact")}


def make_inputs(params, seed, device):
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    return {"x": torch.randn(params["n"], generator=g, device=device)}


def make_outputs(params, inputs):
    import torch
    return {"y": torch.empty_like(inputs["x"])}


def reference(params, inputs):  # a sampled reference: every third element only
    import torch
    index = torch.arange(0, params["n"], 3)
    return {"y": (index, 2 * inputs["x"][index].double())}


def work(params):
    return {}


def load(name):
    return None
'''


def test_the_judge_compares_a_sampled_reference_at_the_output_s_own_size(tmp_path: Path, capsys):
    """A reference given as (flat indices, values): the judge draws the shipped positions over the whole output,
    whose size it takes from make_outputs (it once read a size nobody sent and failed every such sample)."""
    pytest.importorskip("torch")
    import torch

    h = harness_module()
    module = tmp_path / "sampled.py"
    module.write_text(_SAMPLED)
    params, seed, pos_seed = {"n": 5000, "dtype": "float32"}, 7, 1234
    x = torch.randn(5000, generator=torch.Generator().manual_seed(seed))
    pos = h.positions(pos_seed, 5000)
    right = [2 * float(x[j]) for j in pos]
    wrong = list(right)
    wrong[next(n for n, j in enumerate(pos) if j % 3 == 0)] += 1.0  # an element the reference holds
    lines = [{"id": "0", "params": params, "seed": seed, "positions": pos_seed, "out": {"y": right},
              "in": {"x": [float(x[j]) for j in pos]}},
             {"id": "1", "params": params, "seed": seed, "positions": pos_seed, "out": {"y": wrong},
              "in": {"x": [float(x[j]) for j in pos]}}]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in lines))
    capsys.readouterr()
    assert h.judge([str(module), str(requests), "--device", "cpu"]) == 0
    verdicts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [v["ok"] for v in verdicts] == [True, False], verdicts
