"""kwiki verify --sanitize on the CPU: a stand-in compute-sanitizer (tests/fixtures/sanitizer/) around a stand-in
artifact binary; report parsing, the manifest's expectations, the gate's located messages."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from kwiki.results.record import Record
from kwiki.verify import compute_sanitizer as sanitize
from kwiki.verify.types import BuildResult, Gating, PlannedArtifact, RunOutcome
from kwiki.wiki.manifest import Manifest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SANITIZER = str(FIXTURES / "sanitizer" / "fake_compute_sanitizer")
BINARY = str(FIXTURES / "profile" / "fake_artifact")

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at gemv_rows<8>(const bf16 *, const bf16 *, float *, int, int)+0x2d0 in gemv_bf16.cu:141
=========     by thread (31,0,0) in block (1023,0,0)
=========     Address 0x7f0c1e800010 is out of bounds
=========     and is 17 bytes after the nearest allocation at 0x7f0c1e000000 of size 8388608 bytes
=========
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""
RACECHECK_CLEAN = """========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""


def planned(root: Path) -> PlannedArtifact:
    manifest = Manifest.model_validate({
        "name": "pit_sm90a", "title": "pitfalls", "targets": ["sm_90a"], "build": {"sources": ["p.cu"]},
        "sanitize": {"args": ["--shapes=256x256x256", "--repeats=1"]},
        "variants": [{"name": "good", "kernels": ["good_kernel<*>"]}, {"name": "good2", "kernels": ["good2_kernel<*>"]},
                     {"name": "host", "kernels": ["host_kernel<*>"]}, {"name": "plain"},
                     {"name": "no_fence", "isolated": True,
                      "sanitize": {"expect": {"racecheck": "clean", "memcheck": "either"},
                                   "why": "racecheck does not see async-proxy races"}},
                     {"name": "oob", "isolated": True, "sanitize": {"expect": {"memcheck": "error"}}}]})
    directory = root / "artifacts" / "pit_sm90a"
    directory.mkdir(parents=True, exist_ok=True)
    return PlannedArtifact("artifacts/pit_sm90a", directory, manifest, run_target="sm_90a",
                           run_variants=["good", "good2", "host", "plain"],
                           isolated=["no_fence", "oob"])


def sanitize_all(tmp_path, monkeypatch, finds: str = "", tools=("memcheck", "racecheck", "synccheck")):
    monkeypatch.setenv("FAKE_SANITIZER_FINDS", finds)
    monkeypatch.setenv("FAKE_SANITIZER_LOG", str(tmp_path / "calls.log"))
    results, skipped = sanitize.sanitize_artifact(planned(tmp_path), BuildResult("pit_sm90a", "sm_90a", True, False,
                                                                                 "k", binary=BINARY),
                                                  sanitizer=SANITIZER, tools=list(tools), root=tmp_path, gpu_index=0)
    assert skipped is None
    return {(r.variant, r.tool): r for r in results}


def test_parse_report_counts_errors_without_the_applications_exit_and_keeps_the_first_lines():
    r = sanitize.parse_report(MEMCHECK)
    assert r.errors == 1  # the non-zero exit is the records' business
    assert r.lines == ["Invalid __global__ read of size 16 bytes",
                       "at gemv_rows<8>(const bf16 *, const bf16 *, float *, int, int)+0x2d0 in gemv_bf16.cu:141",
                       "by thread (31,0,0) in block (1023,0,0)", "Address 0x7f0c1e800010 is out of bounds"]
    assert sanitize.parse_report(RACECHECK_CLEAN).errors == 0
    assert sanitize.parse_report("segfault before any summary\n").errors is None


def calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(x) for x in (tmp_path / "calls.log").read_text().splitlines()]


def test_variants_that_name_kernels_share_a_process_per_tool_and_the_rest_run_alone(tmp_path, monkeypatch):
    got = sanitize_all(tmp_path, monkeypatch, finds="memcheck:oob")
    assert sorted(got) == sorted((v, t) for v in ("good", "good2", "host", "plain", "no_fence", "oob")
                                 for t in ("memcheck", "racecheck", "synccheck"))
    runs = calls(tmp_path)
    # per tool: good+good2+host together; plain (no kernels), no_fence, oob (isolated) alone; but no_fence is not
    # judged by memcheck (`either`), so it does not run under it
    assert len(runs) == 11
    first = runs[0]
    assert first[:2] == ["--tool", "memcheck"]
    assert first[-4:] == ["good,good2,host", "--shapes=256x256x256", "--repeats=1", "--check-only"]
    assert [r[r.index("--variants") + 1] for r in runs[1:3]] == ["plain", "oob"]
    assert got[("no_fence", "memcheck")].shared == 0 and got[("no_fence", "memcheck")].errors is None
    assert all(r.ok for r in got.values()), [r.finding for r in got.values() if r.finding]
    assert got[("good", "memcheck")].shared == 3 and got[("plain", "memcheck")].shared == 1


def test_an_unexpected_error_fails_the_gate_with_the_first_report_lines(tmp_path, monkeypatch):
    got = sanitize_all(tmp_path, monkeypatch, finds="memcheck:good,memcheck:oob", tools=["memcheck"])
    bad = got[("good", "memcheck")]
    assert bad.errors == 1 and bad.finding is not None and bad.finding.gate == "sanitize"
    assert bad.finding.reason.startswith("artifacts/pit_sm90a/artifact.yaml: variant 'good': memcheck reported 1 "
                                         "error: Invalid __global__ write of size 4 bytes | at good_kernel<4>")
    assert got[("good2", "memcheck")].ok and got[("good2", "memcheck")].errors == 0  # the kernel says whose it is
    assert len(calls(tmp_path)) == 3  # the shared run could say whose: nothing ran again


@pytest.mark.parametrize("env", [{"FAKE_SANITIZER_FINDS": "memcheck:host,memcheck:good2"},  # an error in no kernel
                                 {"FAKE_SANITIZER_DIES": "good2"}])  # no record of good2 or of host
def test_a_shared_run_that_cannot_say_whose_errors_they_are_runs_every_variant_alone(tmp_path, monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    finds = env.get("FAKE_SANITIZER_FINDS", "")
    got = sanitize_all(tmp_path, monkeypatch, finds=finds, tools=["memcheck"])
    runs = [r[r.index("--variants") + 1] for r in calls(tmp_path)]
    assert runs == ["good,good2,host", "good", "good2", "host", "plain", "oob"]
    assert got[("good", "memcheck")].shared == 1 and got[("good", "memcheck")].ok
    if finds:
        assert not got[("host", "memcheck")].ok and "cudaErrorInvalidValue" in got[("host", "memcheck")].finding.reason
        assert not got[("good2", "memcheck")].ok


def test_errors_in_kernels_no_variant_names_are_counted_not_judged(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SANITIZER_OUTSIDE", "racecheck")
    got = sanitize_all(tmp_path, monkeypatch, finds="racecheck:good2", tools=["racecheck"])
    assert len(calls(tmp_path)) == 4  # the shared run could still say whose each error is
    good, good2 = got[("good", "racecheck")], got[("good2", "racecheck")]
    assert good.ok and good.errors == 0 and good.outside == 1 and "nvjet_ref<4>" in good.outside_lines[0]
    assert not good2.ok and good2.errors == 1 and "good2_kernel<4>" in good2.finding.reason
    plain = got[("plain", "racecheck")]  # names no kernels: alone, every error is its own
    assert plain.errors == 1 and not plain.ok and plain.outside == 0


def test_an_expected_error_that_is_not_reported_fails(tmp_path, monkeypatch):
    got = sanitize_all(tmp_path, monkeypatch, finds="", tools=["memcheck"])
    silent = got[("oob", "memcheck")]
    assert silent.finding is not None and "memcheck reported nothing, but the manifest expects" in silent.finding.reason


def test_either_is_not_judged_and_clean_is_the_default(tmp_path, monkeypatch):
    got = sanitize_all(tmp_path, monkeypatch, finds="memcheck:no_fence,memcheck:oob,synccheck:no_fence")
    assert got[("no_fence", "memcheck")].ok  # either
    assert not got[("no_fence", "synccheck")].ok  # not named: clean expected
    assert got[("oob", "memcheck")].ok and got[("oob", "memcheck")].expected == "error"


def test_findings_reach_the_records(tmp_path, monkeypatch):
    got = sanitize_all(tmp_path, monkeypatch, finds="racecheck:good", tools=["racecheck"])
    rec = Record.model_validate({"kwiki_record": 1, "variant": "good", "check": {"passed": True}})
    outcomes = {"artifacts/pit_sm90a": [RunOutcome("pit_sm90a", "sm_90a", ["good"], "ok", [rec])]}

    plan = SimpleNamespace(artifacts={"artifacts/pit_sm90a": planned(tmp_path)})

    gating = Gating()
    stage = sanitize.SanitizeStage(list(got.values()), tools=["racecheck"])
    problems = sanitize.gate(gating, stage, outcomes, plan)
    assert [f.gate for f in gating.failed(rec)] == ["sanitize"] and rec.extra["sanitize_racecheck_errors"] == 1
    assert "Race reported between Write access" in gating.failed(rec)[0].reason
    assert problems == []  # oob expects memcheck only: racecheck clean is as expected


def test_an_unknown_tool_is_refused():
    with pytest.raises(ValueError):
        sanitize.sanitizer_argv("cs", "leakcheck", ["app"])


def test_a_binary_that_is_a_driver_is_skipped_with_its_reason_not_counted_as_zero_results(tmp_path):
    manifest = Manifest.model_validate({
        "name": "drv_sm90a", "title": "driver", "targets": ["sm_90a"], "build": {"sources": ["d.cu"]},
        "run": {"command": ["{python}", "driver.py", "{binary}"]}, "variants": [{"name": "copy"}]})
    art = PlannedArtifact("artifacts/drv_sm90a", tmp_path / "artifacts" / "drv_sm90a", manifest, run_target="sm_90a",
                          run_variants=["copy"])
    plan = SimpleNamespace(gpu=SimpleNamespace(index=0), artifacts={art.path: art})
    said: list[str] = []
    stage = sanitize.run_stage(plan, [BuildResult("drv_sm90a", "sm_90a", True, False, "k", binary=BINARY)], tmp_path,
                               said.append, ["memcheck"], sanitizer=SANITIZER)
    assert stage.results == []
    assert said[-1] == "    skipped: its run.command is a driver, not the binary"
    assert "sanitize drv_sm90a: skipped (its run.command is a driver, not the binary)" in stage.notes
    assert not any("as expected" in line for line in said)


# ---------------------------------------------------------------- a Python artifact: the harness under the tool

REAL_HARNESS = Path(__file__).resolve().parent.parent / "artifacts" / "common" / "kwiki_harness.py"
MODULE = """
GRID = [{"n": 1 << 30, "dtype": "f32"}, {"n": 1 << 20, "dtype": "f32"}]  # the claims' shapes: too big to sanitize
VARIANTS = ["good", "good2", "torch_copy", "claimed_only", "huge_only", "raced"]
TOLERANCES = {"f32": (0.0, 0.0, "exact: a copy")}
import helper_beside  # a file beside the module: the shim keeps the module's folder on the import path


def make_inputs(params, seed, device): ...
def make_outputs(params, inputs): ...
def reference(params, inputs): ...
def work(params): return {}
def load(name): ...
def applies(name, params):  # claimed_only: a library baseline compiled at the claims' shape only
    return {"claimed_only": params["n"] == 1 << 30, "huge_only": params["n"] > 1 << 20}.get(name, True)
"""


def python_planned(root: Path, sanitize_section: dict | None = None) -> PlannedArtifact:
    doc = {
        "name": "tri_sm90a", "title": "triton", "kind": "python", "python": {"module": "k.py"},
        "targets": ["sm_90a"],
        "sanitize": {"params": [{"n": 37, "dtype": "f32"}, {"n": 4099, "dtype": "f32"}]}
        if sanitize_section is None else sanitize_section,
        "variants": [{"name": "good", "kernels": ["good_kernel*"]}, {"name": "good2", "kernels": ["good2_kernel*"]},
                     {"name": "torch_copy"},
                     {"name": "claimed_only", "kernels": ["triton_*"],
                      "sanitize": {"expect": {"memcheck": "either"}, "why": "compiled at the claims' shape only"}},
                     {"name": "huge_only", "kernels": ["huge_kernel*"]},
                     {"name": "raced", "kernels": ["raced_kernel*"], "sanitize": {"expect": {"racecheck": "clean"}}}]}
    manifest = Manifest.model_validate(doc)
    directory = root / "artifacts" / "tri_sm90a"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "artifact.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (directory / "k.py").write_text(MODULE)
    (directory / "helper_beside.py").write_text("")
    common = root / "artifacts" / "common"
    common.mkdir(parents=True, exist_ok=True)
    (common / "kwiki_harness.py").write_text((FIXTURES / "sanitizer" / "fake_harness.py").read_text())
    return PlannedArtifact("artifacts/tri_sm90a", directory, manifest, run_target="sm_90a",
                           run_variants=[v.name for v in manifest.variants])


def sanitize_python(tmp_path, monkeypatch, finds: str = "", tools=("memcheck", "racecheck"), section=None):
    monkeypatch.setenv("FAKE_SANITIZER_FINDS", finds)
    monkeypatch.setenv("FAKE_SANITIZER_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("FAKE_HARNESS_LOG", str(tmp_path / "harness.log"))
    monkeypatch.setenv("FAKE_HARNESS_REAL", str(REAL_HARNESS))
    art = python_planned(tmp_path, section)
    build = BuildResult("tri_sm90a", "sm_90a", True, False, "python", binary=str(art.directory / "k.py"))
    results, skipped = sanitize.sanitize_artifact(art, build, sanitizer=SANITIZER, tools=list(tools), root=tmp_path,
                                                  gpu_index=0)
    assert skipped is None
    return {(r.variant, r.tool): r for r in results}


def harness_calls(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "harness.log").read_text().splitlines()]


def test_a_python_artifact_runs_in_the_harness_profile_mode_over_sanitize_params_not_its_grid(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch)
    runs = calls(tmp_path)
    assert [r[r.index("--variants") + 1] for r in runs] == ["good,good2,raced", "torch_copy", "raced"]
    first = runs[0]
    assert first[:6] == ["--tool", "memcheck", "--target-processes", "all", "--print-limit", "20"]
    app = first[6:]
    assert app[1] == str(tmp_path / "artifacts" / "common" / "kwiki_harness.py") and app[2] == "run"
    assert app[3] == str(sanitize.SHIM) and app[-1] == "--profile-mode"
    assert app[app.index("--device") + 1] == "cuda" and app[app.index("--input-sets") + 1] == "1"
    seen = harness_calls(tmp_path)
    assert all(h["grid"] == [{"dtype": "f32", "n": 37}, {"dtype": "f32", "n": 4099}] for h in seen)
    assert all(h["no_caching"] == "1" for h in seen)  # memcheck sees each tensor as its own allocation
    assert all(r.ok for r in got.values() if r.variant != "huge_only"), [r.finding for r in got.values()]
    assert got[("good", "memcheck")].errors == 0 and got[("good", "memcheck")].shared == 3
    assert got[("raced", "racecheck")].errors == 0  # the manifest asks for racecheck on it


def test_racecheck_and_synccheck_run_on_a_python_artifact_only_where_its_manifest_asks(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch, tools=("racecheck", "synccheck"))
    assert [r[r.index("--variants") + 1] for r in calls(tmp_path)] == ["raced"]
    quiet = got[("good", "synccheck")]
    assert quiet.expected == "either" and quiet.shared == 0 and quiet.ok
    assert "only where its manifest names the tool" in quiet.lines[0]
    assert got[("raced", "synccheck")].expected == "either"


def test_a_variant_that_runs_at_no_sanitized_entry_fails_unless_the_manifest_expects_either(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch, tools=("memcheck",))
    huge = got[("huge_only", "memcheck")]
    assert huge.shared == 0 and huge.errors is None and not huge.ok
    assert huge.finding.reason.startswith("artifacts/tri_sm90a/artifact.yaml: variant 'huge_only': memcheck: not "
                                          "run: it runs at no entry of sanitize.params")
    claimed = got[("claimed_only", "memcheck")]  # a library baseline the manifest does not judge here
    assert claimed.ok and claimed.shared == 0 and "compiled at the claims' shape only" in claimed.lines[0]
    assert all("huge_only" not in r[r.index("--variants") + 1] for r in calls(tmp_path))


def test_a_memcheck_error_in_a_python_variants_kernel_fails_its_gate_with_the_report(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch, finds="memcheck:good2", tools=("memcheck",))
    bad = got[("good2", "memcheck")]
    assert bad.errors == 1 and bad.finding is not None and bad.finding.gate == "sanitize"
    assert bad.finding.reason.startswith("artifacts/tri_sm90a/artifact.yaml: variant 'good2': memcheck reported 1 "
                                         "error: Invalid __global__ write of size 4 bytes | at good2_kernel<4>")
    assert got[("good", "memcheck")].ok and got[("good", "memcheck")].errors == 0
    assert bad.log == ".kwiki/sanitize/tri_sm90a/shared-memcheck.log"


def test_a_python_variant_whose_records_stop_short_did_not_finish_and_runs_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_HARNESS_RAISES", "good2@4099")  # its first entry printed, its second raised
    got = sanitize_python(tmp_path, monkeypatch, tools=("memcheck",))
    assert [r[r.index("--variants") + 1] for r in calls(tmp_path)] == ["good,good2,raced", "good", "good2",
                                                                       "torch_copy", "raced"]
    ended = got[("good2", "memcheck")]
    assert not ended.ok and ended.errors is None
    assert ended.finding.reason == ("artifacts/tri_sm90a/artifact.yaml: variant 'good2': the harness ended (exit 3) "
                                    "before the variant's last record: memcheck did not see its kernels through (the "
                                    "log says why: a raise, a crash)")
    assert got[("good", "memcheck")].ok and got[("good", "memcheck")].shared == 1
    assert got[("raced", "memcheck")].ok


def test_an_error_the_tool_reports_in_a_variant_that_then_raised_is_the_finding(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_HARNESS_RAISES", "good2@4099")  # memcheck's error, then the launch failure raises
    got = sanitize_python(tmp_path, monkeypatch, finds="memcheck:good2", tools=("memcheck",))
    assert "memcheck reported 1 error: Invalid __global__ write" in got[("good2", "memcheck")].finding.reason


def test_without_sanitize_params_the_harness_gets_the_module_and_its_own_grid(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch, tools=("memcheck",), section={})
    runs = calls(tmp_path)
    assert all(r[r.index("run") + 1].endswith("artifacts/tri_sm90a/k.py") for r in runs)
    assert harness_calls(tmp_path)[0]["grid"] == [{"dtype": "f32", "n": 1 << 30}, {"dtype": "f32", "n": 1 << 20}]
    assert got[("huge_only", "memcheck")].ok  # it runs at the module's own first entry


def test_sanitize_params_the_module_cannot_run_fail_every_variant_at_the_manifest(tmp_path, monkeypatch):
    got = sanitize_python(tmp_path, monkeypatch, tools=("memcheck",),
                          section={"params": [{"n": 37, "dtype": "bf16"}]})
    assert not (tmp_path / "calls.log").exists()  # nothing ran under the tool
    bad = got[("good", "memcheck")]
    assert bad.finding.reason == ("artifacts/tri_sm90a/artifact.yaml: sanitize.params: GRID[0]: dtype 'bf16' has no "
                                  "entry in TOLERANCES")
    assert all(not r.ok for r in got.values() if r.expected != "either")


@pytest.mark.parametrize(("doc", "message"), [
    ({"kind": "binary", "build": {"sources": ["p.cu"]}}, "only a `kind: python` artifact has a GRID"),
    ({"kind": "python", "python": {"module": "k.py"}}, "every entry names its dtype")])
def test_sanitize_params_belong_to_a_python_artifact_and_name_a_dtype(doc, message):
    doc = {"name": "x_sm90a", "title": "x", "targets": ["sm_90a"], "variants": [{"name": "a"}],
           "sanitize": {"params": [{"n": 37}]}, **doc}
    with pytest.raises(ValueError, match=message):
        Manifest.model_validate(doc)


def compile_only_problems(tmp_path, monkeypatch, section=None):
    monkeypatch.setenv("FAKE_HARNESS_REAL", str(REAL_HARNESS))
    art = python_planned(tmp_path, section)
    build = BuildResult("tri_sm90a", "sm_90a", True, False, "python", binary=str(art.directory / "k.py"), grid=[])
    plan = SimpleNamespace(artifacts={art.path: art})
    return sanitize.python_params_problems(plan, [build], tmp_path), (art.directory / "artifact.yaml").read_text()


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_compile_only_finds_a_variant_that_runs_at_no_sanitized_entry_at_its_manifest_line(tmp_path, monkeypatch):
    problems, text = compile_only_problems(tmp_path, monkeypatch)
    assert [(p.path, p.field) for p in problems] == [("artifacts/tri_sm90a/artifact.yaml",
                                                      "variants.huge_only.sanitize")]
    assert problems[0].line == line_of(text, "name: huge_only")  # claimed_only expects `either`: not reported
    assert "runs at no entry of sanitize.params, and memcheck would judge it" in problems[0].message


def test_compile_only_finds_sanitize_params_the_module_refuses_at_their_line(tmp_path, monkeypatch):
    problems, text = compile_only_problems(tmp_path, monkeypatch, {"params": [{"n": 37, "dtype": "bf16"}]})
    assert [(p.field, p.line) for p in problems] == [("sanitize.params", line_of(text, "params:"))]
    assert problems[0].message == "GRID[0]: dtype 'bf16' has no entry in TOLERANCES"
