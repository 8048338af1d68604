"""CI compiles every artifact of the wiki for every target it declares, and checks each CUDA binary's
`--list-variants` against its manifest (issue 12, item 5): a broken artifact or shared header fails
here, on a machine without a GPU, instead of on the H200."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.nvcc
def test_every_artifact_of_the_wiki_builds_and_lists_its_manifests_variants(capsys):
    assert shutil.which("nvcc") is not None
    code = main(["verify", "--compile-only", "--no-write", "--quiet", "--json", "--root", str(REPO)])
    report = json.loads(capsys.readouterr().out)
    failed = [f"{b['artifact']} [{b['target']}]: {b['error']}" for b in report["builds"] if not b["ok"]]
    assert failed == []
    assert [p for p in report["problems"] if p["severity"] == "error"] == []
    built = {(b["artifact"], b["target"]) for b in report["builds"]}
    manifests = {p.parent.name for p in (REPO / "artifacts").glob("*/artifact.yaml")}
    borrowers = {"tile_order_sm90a"}  # runs gemm_bf16_sm90a's binary (build.binary_of): nothing of its own
    assert {name for name, _ in built} == manifests - borrowers
    # every variant's SASS expectations hold on the binaries just built (issue 12: mechanism gate)
    mechanism = report["mechanism"]
    assert mechanism, "no variant declares SASS expectations"
    assert [f"{m['manifest']}: {m['variant']} [{m['target']}]: {m['status']} {m['note'] or ''} {m['mismatches']}"
            for m in mechanism if m["status"] != "passed"] == []
    assert code == 0
