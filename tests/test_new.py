"""`kwiki new page|artifact`: skeletons that pass `kwiki check --strict` and compile; refusals write nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kwiki.cli import main
from kwiki.core.errors import UsageError
from kwiki.wiki import new
from kwiki.wiki.skeletons import PAGE_FOLDERS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "new" / "project"
COMMON = Path(__file__).resolve().parent.parent / "artifacts" / "common"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the small fixture project: two pages, no artifacts."""
    out = tmp_path / "p"
    shutil.copytree(FIXTURE, out)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _kwiki(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _check_strict(capsys, root: Path) -> None:
    code, out, _ = _kwiki(capsys, "check", "--strict", "--json", "--root", str(root))
    report = json.loads(out)
    # what kwiki new writes is a draft (status: draft, a placeholder summary) until its author publishes it: --strict
    # warns about each such page, never as an error (tests/test_drafts.py), and must find nothing else
    others = [p for p in report["problems"]
              if not (p["field"] in ("status", "summary") and p["severity"] == "warning" and "a draft" in p["message"])]
    assert (code, others) == (0, []), report["problems"]


def test_page_skeleton_passes_check_strict(root: Path, capsys):
    code, out, err = _kwiki(capsys, "new", "page", "technique-fused-epilogue", "--root", str(root))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == ("wrote wiki/nvidia/techniques/fused-epilogue.md "
                                   "(page technique-fused-epilogue, type technique)")
    text = (root / "wiki/nvidia/techniques/fused-epilogue.md").read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["id"] == "technique-fused-epilogue" and meta["title"] == "Fused epilogue"
    assert meta["architectures"] == ["sm_90a"] and meta["tags"] == ["fused-epilogue"] and meta["summary"]
    assert meta["claims"] == [] and "artifacts" not in meta
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## When it pays", "## How it works", "## How to check", "## Pitfalls", "## Measurements"]
    _check_strict(capsys, root)


def test_every_page_type_lands_in_its_folder_and_passes_check(root: Path, capsys):
    for i, (page_type, folder) in enumerate(PAGE_FOLDERS.items()):
        code, out, err = _kwiki(capsys, "new", "page", f"{page_type}-example-{i}", "--type", page_type,
                                "--title", f"An example {page_type}: with a colon", "--arch", "sm_100a",
                                "--root", str(root))
        assert (code, err) == (0, "")
        assert out.startswith(f"wrote wiki/{folder}/example-{i}.md (page {page_type}-example-{i}, type {page_type})")
    _check_strict(capsys, root)


@pytest.mark.parametrize("page_id, path, page_type", [
    ("kernel-gemv-fp8", "wiki/nvidia/kernels/gemv-fp8.md", "kernel"),
    ("pattern-split-k", "wiki/nvidia/patterns/split-k.md", "pattern"),
    ("fused-epilogue", "wiki/nvidia/techniques/fused-epilogue.md", "technique"),
])
def test_the_type_defaults_to_the_id_prefix(root: Path, capsys, page_id: str, path: str, page_type: str):
    code, out, _ = _kwiki(capsys, "new", "page", page_id, "--root", str(root))
    assert code == 0 and out.splitlines()[0] == f"wrote {path} (page {page_id}, type {page_type})"


def test_page_with_artifact_writes_both_and_they_agree(root: Path, capsys):
    code, out, err = _kwiki(capsys, "new", "page", "kernel-scale", "--type", "kernel", "--artifact", "scale_f32_sm90a",
                            "--root", str(root))
    assert (code, err) == (0, "")
    assert out.splitlines()[:3] == [
        "wrote wiki/nvidia/kernels/scale.md (page kernel-scale, type kernel)",
        "wrote artifacts/scale_f32_sm90a/artifact.yaml (artifact manifest: 3 variants on rungs 0-2, target sm_90a)",
        "wrote artifacts/scale_f32_sm90a/scale_f32_sm90a.cu (CUDA source on the kwiki_bench.cuh protocol)",
    ]
    _check_strict(capsys, root)
    manifest = yaml.safe_load((root / "artifacts/scale_f32_sm90a/artifact.yaml").read_text())
    assert manifest["targets"] == ["sm_90a"] and manifest["baseline"] == "device_copy"
    ladder = [(v["name"], v["rung"], v["adds"]) for v in manifest["variants"]]
    assert [rung for _, rung, _ in ladder] == [0, 1, 2]
    # the manifest is the one source of the ladder: the .cu's table holds the names, in its order, and nothing
    # else of the rungs; each rung's code is a marked region naming its variant
    source = (root / "artifacts/scale_f32_sm90a/scale_f32_sm90a.cu").read_text()
    table = re.findall(r'^\s+\{\{"([a-z0-9_]+)"\}, ', source, re.MULTILINE)
    assert table == [n for n, _, _ in ladder]
    assert not any(a in source for _, _, a in ladder)
    assert re.findall(r"^// kwiki:rung (\w+)$", source, re.MULTILINE) == ["naive", "vec4", "device_copy"]
    assert "-gencode=arch=compute_90a,code=sm_90a" in source
    page = yaml.safe_load((root / "wiki/nvidia/kernels/scale.md").read_text().split("---\n")[1])
    assert page["artifacts"] == {"bench": "artifacts/scale_f32_sm90a"}
    (claim,) = page["claims"]
    # one record each (the skeleton runs two sizes): the claim names one of the manifest's shapes
    assert claim["measure"] == {"artifact": "bench",
                                "of": {"variant": "vec4", "params": {"n": 16777216}, "figure": "gb_per_s"},
                                "per": {"variant": "naive", "params": {"n": 16777216}, "figure": "gb_per_s"}}


def test_page_for_an_existing_artifact_claims_its_last_variant_passes(root: Path, capsys):
    assert _kwiki(capsys, "new", "artifact", "copy_sm90a", "--root", str(root))[0] == 0
    before = _files(root / "artifacts")
    code, out, _ = _kwiki(capsys, "new", "page", "kernel-copy", "--type", "kernel", "--artifact", "copy_sm90a",
                          "--root", str(root))
    assert code == 0 and out.splitlines()[0].startswith("wrote wiki/nvidia/kernels/copy.md")
    assert _files(root / "artifacts") == before  # the artifact is named, not rewritten
    page = yaml.safe_load((root / "wiki/nvidia/kernels/copy.md").read_text().split("---\n")[1])
    assert page["claims"][0]["expect"] == "passed" and page["claims"][0]["measure"]["of"] == {"variant": "vec4"}
    _check_strict(capsys, root)


def test_plain_artifact_says_a_page_must_name_it(root: Path, capsys):
    code, out, _ = _kwiki(capsys, "new", "artifact", "scale_f32_sm100a", "--arch", "sm_100a", "--root", str(root))
    assert code == 0
    assert sorted(_files(root / "artifacts")) == ["scale_f32_sm100a/artifact.yaml",
                                                  "scale_f32_sm100a/scale_f32_sm100a.cu"]
    assert "kwiki new page ID --artifact scale_f32_sm100a" in out
    assert yaml.safe_load((root / "artifacts/scale_f32_sm100a/artifact.yaml").read_text())["targets"] == ["sm_100a"]


def test_artifact_with_a_new_page_id_writes_the_page_too(root: Path, capsys):
    code, out, _ = _kwiki(capsys, "new", "artifact", "scale_f32_sm90a", "--page", "technique-scale",
                          "--root", str(root))
    assert code == 0
    assert [line.split(" (")[0] for line in out.splitlines()[:3]] == [
        "wrote wiki/nvidia/techniques/scale.md", "wrote artifacts/scale_f32_sm90a/artifact.yaml",
        "wrote artifacts/scale_f32_sm90a/scale_f32_sm90a.cu"]
    _check_strict(capsys, root)


def test_artifact_added_to_existing_page_changes_only_its_artifacts(root: Path, capsys):
    page = root / "wiki/nvidia/techniques/measured.md"
    original = page.read_text()
    code, out, _ = _kwiki(capsys, "new", "artifact", "a_sm90a", "--page", "technique-measured", "--root", str(root))
    assert code == 0 and "edited wiki/nvidia/techniques/measured.md (artifacts.bench: artifacts/a_sm90a added)" in out
    first = page.read_text()
    # the mapping goes above kwiki's measurements block, whose sealed text is untouched
    assert first == original.replace("# kwiki:measurements",
                                     "artifacts:\n  bench: artifacts/a_sm90a\n# kwiki:measurements")
    code, out, _ = _kwiki(capsys, "new", "artifact", "b_sm90a", "--page", "technique-measured", "--root", str(root))
    assert code == 0 and "(artifacts.b_sm90a: artifacts/b_sm90a added)" in out
    assert page.read_text() == first.replace("  bench: artifacts/a_sm90a\n",
                                             "  bench: artifacts/a_sm90a\n  b_sm90a: artifacts/b_sm90a\n")
    _check_strict(capsys, root)


def test_flow_style_artifacts_are_refused_and_nothing_is_written(root: Path, capsys):
    before = _files(root)
    code, _, err = _kwiki(capsys, "new", "artifact", "c_sm90a", "--page", "pattern-flow", "--root", str(root))
    assert code == 2
    assert err.startswith("kwiki new: wiki/nvidia/patterns/flow.md: cannot add the artifact by itself")
    assert "add 'bench: artifacts/c_sm90a' under its 'artifacts:' by hand" in err
    assert _files(root) == before and not (root / "artifacts").exists()


def test_add_artifact_entry_refuses_an_edit_that_changes_other_fields():
    # the last entry is a block scalar: a line after its key would land inside the scalar
    raw = b"---\nid: x\ntitle: X\ntype: kernel\nartifacts:\n  bench: >-\n    artifacts/y\n---\n# X\n"
    with pytest.raises(UsageError, match="would change more than the 'artifacts' field"):
        new.add_artifact_entry(raw, "z", "artifacts/z")
    plain = b"---\nid: x\ntitle: X\ntype: kernel\nartifacts:\n  bench: artifacts/y\n---\n# X\n"
    assert new.add_artifact_entry(plain, "z", "artifacts/z") == plain.replace(
        b"  bench: artifacts/y\n", b"  bench: artifacts/y\n  z: artifacts/z\n")


def test_refuses_to_overwrite_a_page(root: Path, capsys):
    assert _kwiki(capsys, "new", "page", "technique-x", "--root", str(root))[0] == 0
    before = _files(root)
    code, _, err = _kwiki(capsys, "new", "page", "technique-x", "--title", "Other", "--root", str(root))
    assert (code, err) == (2, ("kwiki new: page id 'technique-x' is already used by wiki/nvidia/techniques/x.md; "
                               "not overwritten\n"))
    # another id, the same file name
    code, _, err = _kwiki(capsys, "new", "page", "x", "--root", str(root))
    assert (code, err) == (2, "kwiki new: wiki/nvidia/techniques/x.md already exists; not overwritten\n")
    assert _files(root) == before
    with pytest.raises(UsageError, match="already exists"):  # refused when planning, before any write
        new.plan_page(root, "x")


def test_refuses_to_overwrite_an_artifact(root: Path, capsys):
    assert _kwiki(capsys, "new", "artifact", "d_sm90a", "--root", str(root))[0] == 0
    (root / "artifacts/d_sm90a/d_sm90a.cu").write_text("// edited by hand\n")
    before = _files(root)
    for argv in (["new", "artifact", "d_sm90a"], ["new", "artifact", "d_sm90a", "--page", "technique-new"]):
        code, _, err = _kwiki(capsys, *argv, "--root", str(root))
        assert (code, err) == (2, "kwiki new: artifacts/d_sm90a already exists; not overwritten\n")
    assert _files(root) == before
    with pytest.raises(UsageError, match="already exists"):  # refused when planning, before any write
        new.plan_artifact(root, "d_sm90a")


@pytest.mark.parametrize("argv, message", [
    (["page", "Technique-X"], "page id 'Technique-X' is not a slug"),
    (["page", "technique--x"], "page id 'technique--x' is not a slug"),
    (["page", "../escape"], "page id '../escape' is not a slug"),
    (["page", "a" * 121], "is not a slug"),
    (["page", "technique-x", "--type", "recipe"], "--type: 'recipe' is not a page type"),
    (["page", "technique-x", "--arch", "sm_42"], "--arch: 'sm_42' is not a known architecture"),
    (["page", "technique-x", "--title", "two\nlines"], "--title: 'two\\nlines' is not one line of plain text"),
    (["page", "technique-x", "--title", "a <!-- b"], "--title: 'a <!-- b' is not one line of plain text"),
    (["page", "technique-x", "--artifact", "Bad Name"], "artifact name 'Bad Name' is not a slug"),
    (["artifact", "../outside"], "artifact name '../outside' is not a slug"),
    (["artifact", "Gemm_SM90a"], "artifact name 'Gemm_SM90a' is not a slug"),
    (["artifact", "common"], "artifact name 'common' is reserved"),
    (["artifact", "x_sm90a", "--arch", "host"], "--arch: 'host' is not an architecture name"),
    (["artifact", "x_sm90a", "--page", "Not A Slug"], "page id 'Not A Slug' is not a slug"),
])
def test_bad_names_are_usage_errors_and_write_nothing(root: Path, capsys, argv, message):
    before = _files(root)
    code, out, err = _kwiki(capsys, "new", *argv, "--root", str(root))
    assert (code, out) == (2, "")
    assert err.startswith("kwiki new: ") and message in err and len(err.splitlines()) == 1
    assert _files(root) == before


def test_a_folder_linked_out_of_the_repository_is_not_written_through(root: Path, tmp_path: Path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "wiki/nvidia/kernels").symlink_to(outside, target_is_directory=True)
    code, _, err = _kwiki(capsys, "new", "page", "kernel-x", "--type", "kernel", "--root", str(root))
    assert code == 2 and "wiki/nvidia/kernels leads out of the repository" in err
    assert list(outside.iterdir()) == []


def test_a_failed_write_removes_what_it_wrote(root: Path, monkeypatch):
    skeleton = new.plan_page(root, "kernel-y", page_type="kernel", artifact="y_sm90a")
    assert len(skeleton.changes) == 3
    real, calls = new._create, []

    def create(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(new, "_create", create)
    before = _files(root)
    with pytest.raises(OSError):
        new.write(root, skeleton)
    assert _files(root) == before
    assert not (root / "artifacts").exists() and not (root / "wiki/nvidia/kernels").exists()


def test_a_file_that_appears_after_planning_is_not_replaced(root: Path):
    skeleton = new.plan_page(root, "kernel-z", page_type="kernel", artifact="z_sm90a")
    (root / "artifacts/z_sm90a").mkdir(parents=True)
    (root / "artifacts/z_sm90a/z_sm90a.cu").write_text("// someone else's\n")
    before = _files(root)
    with pytest.raises(UsageError, match=r"^artifacts/z_sm90a/z_sm90a.cu already exists; not overwritten$"):
        new.write(root, skeleton)
    assert _files(root) == before and not (root / "wiki/nvidia/kernels").exists()


def test_a_page_edited_after_planning_is_left_alone(root: Path):
    skeleton = new.plan_artifact(root, "e_sm90a", page="technique-measured")
    page = root / "wiki/nvidia/techniques/measured.md"
    page.write_text(page.read_text() + "\nA line added meanwhile.\n")
    before = _files(root)
    with pytest.raises(UsageError, match="changed on disk meanwhile; not edited"):
        new.write(root, skeleton)
    assert _files(root) == before and not (root / "artifacts").exists()


@pytest.mark.nvcc
def test_artifact_skeleton_compiles_with_verify_compile_only(root: Path, capsys):
    shutil.copytree(COMMON, root / "artifacts" / "common", ignore=shutil.ignore_patterns("test", "*.py"))
    assert _kwiki(capsys, "new", "page", "technique-scale", "--artifact", "scale_f32_sm90a",
                  "--root", str(root))[0] == 0
    code, out, _ = _kwiki(capsys, "verify", "--compile-only", "--quiet", "--json", "--root", str(root),
                          "technique-scale")
    report = json.loads(out)
    assert code == 0, report["builds"]
    (build,) = report["builds"]
    assert build["ok"] and build["target"] == "sm_90a"
    assert any("vec4_kernel" in k for k in build["kernels"])
    assert {c["claim"]: c["verdict"] for c in report["claims"]} == {"vec4-vs-naive": "not-run"}
    assert os.path.isfile(build["binary"])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (pip install -e '.[torch]')")
def test_python_artifact_recipe_runs_on_cpu(root: Path, capsys):
    """CONTRIBUTING's Python recipe end to end on a CPU: the skeleton, check --strict, --compile-only (the module
    imported and its contract checked) and the harness at --device cpu, whose baseline passes its check."""
    shutil.copytree(COMMON, root / "artifacts" / "common", ignore=shutil.ignore_patterns("test", "*.cu*"))
    code, out, err = _kwiki(capsys, "new", "artifact", "scale_f32_py", "--kind", "python", "--page", "kernel-scale",
                            "--root", str(root))
    assert (code, err) == (0, "")
    assert "wrote artifacts/scale_f32_py/scale_f32_py.py" in out and "wrote artifacts/scale_f32_py/kernels.py" in out
    _check_strict(capsys, root)
    code, out, _ = _kwiki(capsys, "verify", "--compile-only", "--quiet", "--json", "--root", str(root), "kernel-scale")
    report = json.loads(out)
    assert code == 0 and [b["ok"] for b in report["builds"]] == [True], report["builds"]
    assert {c["claim"]: c["verdict"] for c in report["claims"]} == {"triton_b4096-vs-torch_mul": "not-run"}
    done = subprocess.run([sys.executable, str(root / "artifacts/common/kwiki_harness.py"), "run",
                           str(root / "artifacts/scale_f32_py/scale_f32_py.py"), "--device", "cpu",
                           "--variants", "torch_mul", "--max-seconds", "0.05", "--input-sets", "1"],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"kwiki_record"')]
    assert sorted(r["params"]["n"] for r in records) == [16777216, 16777219]
    assert all(r["check"]["passed"] and r["timing"] for r in records)
