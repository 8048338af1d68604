"""Smaller defenses and newcomer frictions (issue 14, items 10 and 11), each from its reproduction.

Forged problem lines, duplicate ids blamed on the right page, mixed line endings, names that are not
UTF-8, garbage in results/, a file where .kwiki/ should be, a bad port, "did you mean", a verify
that verified nothing, not-testable claims named, the extra to install, build progress in order.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.errors import Problem

FIXTURES = Path(__file__).resolve().parent / "fixtures"
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                               reason="needs a C++ compiler")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

PAGE = "---\nid: {id}\ntitle: {title}\ntype: technique\n---\nBody.\n"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "a.md").write_text(PAGE.format(id="page-a", title="A"), encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "verify" / "project", root)
    return root


# ---------------------------------------------------------------- located problems stay one line each


def test_a_file_name_with_a_newline_cannot_forge_a_problem_line(wiki: Path, capsys):
    folder = wiki / "wiki" / "x\nwiki"  # wiki/x<newline>wiki/a.md:1: ... printed raw forges a line for a.md
    folder.mkdir()
    (folder / "a.md:1: id: forged problem.md").write_text("---\nid: x\n---\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1
    assert not any(line.startswith("wiki/a.md") for line in out.splitlines())
    assert "wiki/x\\nwiki/a.md:1: id: forged problem.md:1: title: required field is missing" in out


def test_problem_format_escapes_what_would_break_or_disguise_the_line():
    p = Problem("wiki/caf\udce9\u202e.md", 3, "f\tx", "line\nbreak \x1b[31m é")
    assert p.format() == "wiki/caf\\xe9\\u202e.md:3: f\\tx: line\\nbreak \\x1b[31m é"
    assert Problem("wiki/a.md", 0, "", "plain").format() == "wiki/a.md: plain"


# ---------------------------------------------------------------- check: ids, line endings, names


@needs_git
def test_a_duplicate_id_is_blamed_on_the_newer_page_not_the_original(wiki: Path, capsys):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}

    def git(*argv: str, when: int = 1_700_000_000) -> None:
        stamp = {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
        subprocess.run(["git", *argv], cwd=wiki, env={**env, **stamp}, check=True, capture_output=True)

    git("init", "-q")
    (wiki / "wiki" / "z").mkdir()
    (wiki / "wiki" / "z" / "original.md").write_text(PAGE.format(id="shared", title="Original"), encoding="utf-8")
    git("add", "-A")
    git("commit", "-qm", "original")
    copy = wiki / "wiki" / "0-copy.md"  # sorts first, and is newer: not yet committed
    copy.write_text(PAGE.format(id="shared", title="Copy"), encoding="utf-8")
    os.utime(copy, (1_000_000_000, 1_000_000_000))  # an old mtime does not make it the original
    expected = "wiki/0-copy.md:2: id: id 'shared' is already used by wiki/z/original.md"
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1 and expected in out and "wiki/z/original.md:2" not in out
    git("add", "-A")
    git("commit", "-qm", "copy", when=1_800_000_000)  # both committed: the later commit is the copy
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1 and expected in out and "wiki/z/original.md:2" not in out


def test_mixed_line_endings_that_verify_cannot_write_fail_check(wiki: Path, capsys):
    page = wiki / "wiki" / "mixed.md"
    page.write_bytes(b"---\r\nid: mixed\r\ntitle: Mixed\r\ntype: technique\r\n---\r\nBody.\nMore.\r\n")
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1
    assert ("wiki/mixed.md:6: mixed line endings: this line ends with LF, line 1 with CR LF; "
            "kwiki verify cannot rewrite such a page byte-exactly (convert it to one style)") in out
    page.write_bytes(page.read_bytes().replace(b"Body.\n", b"Body.\r\n"))
    assert run_cli(capsys, "check", "--root", str(wiki))[0] == 0  # CR LF throughout is fine


def test_a_file_name_that_is_not_utf8_fails_check_and_does_not_break_query(wiki: Path, capsys):
    (wiki / os.fsdecode(b"wiki/caf\xe9.md")).write_text(PAGE.format(id="cafe", title="Cafe"), encoding="utf-8")
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1 and "wiki/caf\\xe9.md: the file name is not UTF-8" in out
    for argv in (["query", "--json"], ["tags", "--json"], ["show", "--json", "page-a"]):
        code, out, err = run_cli(capsys, *argv, "--root", str(wiki))
        assert code == 0 and "internal error" not in err
        json.loads(out)


# ---------------------------------------------------------------- results/ lines nobody can read


GARBAGE = "this is not JSON\n[1, 2]\n{\"kind\": \"weather\"}\n"


def test_garbage_in_results_is_a_warning_of_check(wiki: Path, capsys):
    (wiki / "results").mkdir()
    (wiki / "results" / "nvidia-h200.jsonl").write_text(GARBAGE, encoding="utf-8")
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith("results/")]
    assert [ln.split(": ", 1)[0] for ln in lines] == [f"results/nvidia-h200.jsonl:{n}" for n in (1, 2, 3)]
    assert all(ln.endswith("(warning)") and "skipped by kwiki verify and kwiki build" in ln for ln in lines)
    assert "0 errors, 3 warnings" in out
    assert run_cli(capsys, "check", "--root", str(wiki), "--strict")[0] == 1


def test_verify_and_build_say_which_store_lines_they_skip(wiki: Path, caplog):
    from kwiki.results import store as history

    (wiki / "results").mkdir()
    good = history.ClaimRow(gpu="NVIDIA H200", date="2026-01-01", run_id="r1", artifact="a", page="p",
                            claim="c", verdict="reproduced", store_version=1)  # a row before commit lines
    (wiki / "results" / "host.jsonl").write_text(
        GARBAGE + json.dumps(good.model_dump(mode="json", exclude_none=True)) + "\n{\"kind\": \"claim\"}\n",
        encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        rows = history.read_all(wiki)  # what `kwiki build` reads; `verify` reads each store the same way
    assert [r.run_id for r in rows] == ["r1"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4 and all(m.startswith("kwiki: results/host.jsonl:") for m in warned)
    assert "results/host.jsonl:5: results: not a result row, skipped by kwiki verify and kwiki build: gpu:" in warned[3]


# ---------------------------------------------------------------- the machine in the way: one clear line


@needs_cxx
def test_a_file_where_kwiki_needs_its_directory_is_named(project: Path, capsys):
    (project / ".kwiki").write_text("not a directory\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "verify", "--root", str(project), "--quiet", "--compile-only", "fixture-page")
    assert code == 2 and "internal error" not in err
    assert err == f"kwiki verify: {project / '.kwiki'} is a file where kwiki needs a directory (move it away)\n"


def test_a_port_out_of_range_is_a_usage_error(wiki: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--root", str(wiki), "--dev-addr", "127.0.0.1:99999"])
    assert exc.value.code == 2
    assert "--dev-addr: '127.0.0.1:99999': expected HOST:PORT with a port from 1 to 65535" in capsys.readouterr().err


@pytest.mark.parametrize("module, extra", [("mkdocs", "site"), ("material.plugins", "site"), ("nh3", "site"),
                                           ("mcp", "mcp")])
def test_a_missing_extra_says_what_to_install(module: str, extra: str):
    from kwiki.cli import _missing

    assert _missing(module).endswith(f"pip install -e '.[{extra}]' (from a checkout) or pip install 'kwiki[{extra}]'")
    assert _missing("numpy") == "needs 'numpy', which is not installed"


def test_the_cli_names_the_extra_when_mkdocs_is_missing(wiki: Path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mkdocs", None)  # as if mkdocs were not installed
    for name in [m for m in sys.modules if m.startswith("mkdocs.")]:
        monkeypatch.setitem(sys.modules, name, None)
    code, _, err = run_cli(capsys, "build", "--root", str(wiki))
    assert code == 2 and "pip install -e '.[site]'" in err


# ---------------------------------------------------------------- did you mean


def test_show_suggests_ids_that_contain_or_resemble_the_one_asked(tmp_path: Path, capsys):
    root = tmp_path / "wiki-root"
    shutil.copytree(FIXTURES / "query", root)
    code, _, err = run_cli(capsys, "show", "--root", str(root), "gemv")
    assert code == 1 and err == "kwiki show: no page with id 'gemv' (did you mean 'kernel-nvfp4-gemv'?)\n"
    code, _, err = run_cli(capsys, "show", "--root", str(root), "technique-tma-multcast")
    assert "(did you mean 'technique-tma-multicast'" in err
    assert run_cli(capsys, "show", "--root", str(root), "zzz")[2] == "kwiki show: no page with id 'zzz'\n"


# ---------------------------------------------------------------- verify: say what it did not do


def test_verify_refuses_an_unknown_tag_with_a_suggestion(project: Path, capsys):
    code, out, err = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--tag", "fixtur")
    assert (code, out) == (2, "")
    assert err == "kwiki verify: --tag 'fixtur': no page has this tag (did you mean 'fixture'?)\n"
    code, _, err = run_cli(capsys, "verify", "--root", str(project), "--no-write", "fixture-pag")
    assert code == 2 and "(did you mean 'fixture-page'?)" in err


def test_a_page_id_after_sanitize_says_where_page_ids_go(project: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--root", str(project), "--sanitize", "fixture-page"])
    assert exc.value.code == 2
    assert "got 'fixture-page' (page ids go before --sanitize, or write --sanitize=TOOLS)" in capsys.readouterr().err


def test_verify_with_nothing_selected_is_a_usage_error(project: Path, capsys):
    code, out, err = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--tag", "fixture",
                             "--arch", "sm_100")
    assert (code, out) == (2, "")
    assert err == "kwiki verify: no page matches --tag fixture --arch sm_100: nothing to verify\n"


def test_verify_of_pages_without_artifacts_is_not_ok(project: Path, capsys):
    (project / "wiki" / "plain.md").write_text(PAGE.format(id="plain-page", title="Plain"), encoding="utf-8")
    code, out, _ = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--quiet", "plain-page")
    assert code == 1
    assert "kwiki verify: NOTHING VERIFIED: 1 pages" in out
    assert "note: nothing verified: the 1 selected page name no artifact to build or run" in out
    code, out, _ = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--quiet", "--json", "plain-page")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["notes"][-1].startswith("nothing verified")


@needs_cxx
def test_verify_when_no_artifact_could_run_is_not_ok(project: Path, capsys, monkeypatch):
    import kwiki.verify.pipeline as pipeline

    def nothing_runs(the_plan, builds, root, run_id, progress):
        return {}, 0.0, 0  # as on a machine where no artifact of the selection can run

    monkeypatch.setattr(pipeline, "_run_stage", nothing_runs)
    code, out, _ = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--quiet", "fixture-page")
    assert code == 1 and "note: nothing verified: no artifact of the selected pages ran here" in out
    code, out, _ = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--quiet", "--compile-only",
                           "fixture-page")
    assert code == 0 and "nothing verified" not in out  # builds were what --compile-only asked for


@needs_cxx
def test_verify_names_its_not_testable_claims_and_why(project: Path, capsys):
    _, out, _ = run_cli(capsys, "verify", "--root", str(project), "--no-write", "--quiet", "fixture-page")
    assert "1 not-testable (no artifact measures it): fixture-page:reported-elsewhere" in out.splitlines()


def test_not_testable_claims_beyond_three_point_to_json(capsys):
    from types import SimpleNamespace

    from kwiki.cli.verify import _print_not_testable
    from kwiki.wiki.verdict import Verdict

    claims = [SimpleNamespace(verdict=Verdict.not_testable, page="p", claim=f"c{i}",
                              detail=f"source-reported: paper {i}; no artifact measures it") for i in range(5)]
    _print_not_testable(SimpleNamespace(claims=claims))
    assert capsys.readouterr().out == ("5 not-testable (no artifact measures it): p:c0, p:c1, p:c2 "
                                       "and 2 more (--json lists them)\n")


# ---------------------------------------------------------------- verify: builds reported as they go


def test_builds_are_announced_as_they_start_and_reported_as_they_end(monkeypatch):
    import kwiki.verify.build as build

    durations = {"slow": 0.6, "fast": 0.05}
    events: list[str] = []
    lock = threading.Lock()

    def fake_build_one(job, root, nvcc, nvcc_version, cxx, started=None):
        if started is not None:
            started(job)
        time.sleep(durations[job.artifact])
        return build.BuildResult(job.artifact, job.target, True, False, "key")

    def note(event: str) -> None:
        with lock:
            events.append(event)

    monkeypatch.setattr(build, "build_one", fake_build_one)
    jobs = [build.BuildJob(name, Path("."), None, "host") for name in ("slow", "fast")]  # type: ignore[arg-type]
    results = build.build_all(jobs, Path("."), nvcc=None, nvcc_version=None, cxx=None, workers=2,
                              progress=lambda r: note(f"done {r.artifact}"),
                              started=lambda j: note(f"start {j.artifact}"))
    assert [r.artifact for r in results] == ["slow", "fast"]  # results in job order
    assert events.index("done fast") < events.index("done slow")  # reported in the order they end
    assert set(events[:2]) == {"start slow", "start fast"}


def _gpu_only_project(root: Path) -> Path:
    """A page whose one artifact targets sm_90a only, built by a script (no nvcc needed)."""
    (root / "wiki").mkdir(parents=True)
    art = root / "artifacts" / "gpu_sm90a"
    art.mkdir(parents=True)
    # the stand-in binary answers --list-variants, as every CUDA artifact must (kwiki checks it after the build)
    (art / "build.sh").write_text('printf "#!/bin/sh\\n[ \\"\\$1\\" = --list-variants ] && echo k\\nexit 0\\n" '
                                  '> "$KWIKI_OUT" && chmod +x "$KWIKI_OUT"\n')
    (art / "artifact.yaml").write_text(
        "name: gpu_sm90a\ntitle: a GPU-only fixture\ntargets: [sm_90a]\nbuild: {script: build.sh}\n"
        "variants:\n  - {name: k}\n")
    (root / "wiki" / "gpu.md").write_text(
        "---\nid: gpu-page\ntitle: A GPU-only page\ntype: technique\ntags: [fixture]\narchitectures: [sm_90a]\n"
        "artifacts: {bench: artifacts/gpu_sm90a}\nclaims:\n- id: k-time\n  statement: k is quick.\n"
        "  metric: time\n  unit: us\n  at_most: 10\n  measure: {artifact: bench, of: {variant: k, figure: time_us}}\n"
        "---\n# A GPU-only page\n")
    return root


def test_verify_on_a_machine_without_a_gpu_builds_and_exits_0_unless_a_gpu_is_required(tmp_path, capsys, monkeypatch):
    """The README's main job on a CPU machine compiles everything and says what it could not run (exit 0);
    a CI job on a GPU runner asks for --require-gpu and fails (exit 2) when the GPU is missing."""
    from kwiki.verify import env as envmod

    root = _gpu_only_project(tmp_path / "p")
    monkeypatch.setattr(envmod, "nvml_gpus", lambda: ([], None, None, "no NVML here"))
    code, out, err = run_cli(capsys, "verify", "--root", str(root), "--quiet", "--no-write")
    assert code == 0, out + err
    assert "1 not-run" in out and "no GPU found" in out
    assert "kwiki verify: built only, nothing timed (no GPU here)" in out  # never "ok" when nothing ran
    code, out, err = run_cli(capsys, "verify", "--root", str(root), "--require-gpu", "--quiet", "--no-write")
    assert code == 2 and "--require-gpu: no GPU here" in err
