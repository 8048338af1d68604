"""`kwiki results merge`: another lab's store in, beside ours; bad input located; the matrix of claims by GPU model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results import matrix, merge
from kwiki.results.store import read_all
from kwiki.wiki.catalog import load_wiki

INCOMING = Path(__file__).parent / "fixtures" / "merge" / "incoming"


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("merge/project", "project")


def merge_cli(capsys, project: Path, *files: str, origin: str = "lab-b") -> tuple[int, str, str]:
    code = main(["results", "merge", "--root", str(project), "--origin", origin, *(str(INCOMING / f) for f in files)])
    out, err = capsys.readouterr()
    return code, out, err


def test_merged_rows_keep_their_origin_and_stay_out_of_our_store(project, capsys):
    ours = (project / "results" / "nvidia-h200.jsonl").read_bytes()
    code, out, _ = merge_cli(capsys, project, "nvidia-b200.jsonl", "nvidia-h200.jsonl")
    assert code == 0
    assert "results/merged/lab-b/nvidia-b200.jsonl: 8 rows added" in out
    assert "results/merged/lab-b/nvidia-h200.jsonl: 4 rows added" in out  # the run that is ours is already here
    assert "4 rows already here" in out
    assert (project / "results" / "nvidia-h200.jsonl").read_bytes() == ours
    assert {r.run_id for r in read_all(project)} == {"20261201T100000Z-aaaaaaaa-abc123def456"}
    lines = (project / "results" / "merged" / "lab-b" / "nvidia-b200.jsonl").read_text().splitlines()
    assert [json.loads(ln)["kind"] for ln in lines].count("commit") == 2  # one commit line per run, as verify writes
    again = merge_cli(capsys, project, "nvidia-b200.jsonl")
    assert again[0] == 0 and "0 runs of lab-b merged, 8 rows already here" in again[1]


def test_a_merge_never_changes_a_local_verdict(project, capsys):
    """Their H200 run says 'worse' at 6 us; the series our verdicts are judged on never sees it."""
    from kwiki.results.gpu import Gpu
    from kwiki.verify.series import store_rows
    from kwiki.verify.types import Plan

    gpu = Gpu(0, "NVIDIA H200", None, 90)
    plan = Plan(project, [], {}, [], gpu, False)
    before = store_rows(plan)
    assert merge_cli(capsys, project, "nvidia-h200.jsonl")[0] == 0
    assert store_rows(plan) == before
    wiki = load_wiki(project)
    page = wiki.by_id["technique-nap"]
    m = matrix.matrix(project, "technique-nap", page.meta.claims)
    h200 = m.models.index("H200")
    cell = m.cells["nap-time"][h200]
    assert (cell.verdict, cell.median, cell.origin) == ("reproduced", 5.0, "local")


@pytest.mark.parametrize(("file", "where", "message"), [
    ("newer.jsonl", "newer.jsonl:1: store_version:", "3 is a newer store format than this kwiki reads (2)"),
    ("older.jsonl", "older.jsonl:1: store_version:", "1 is an older store format"),
    ("duplicate.jsonl", "duplicate.jsonl:1: run_id:", "duplicate run id: run 20261201T100000Z-aaaaaaaa-abc123def456 "
                                                      "is already in results/nvidia-h200.jsonl with other rows"),
    ("conflicting.jsonl", "conflicting.jsonl:5: record:", "conflicting rows: line 1 says otherwise about record "
                                                          "host_nap nap[n=1] (host) of run 20261201T160000Z-99999999"),
])
def test_bad_input_is_a_located_error_and_nothing_is_written(project, capsys, file, where, message):
    code, _, err = merge_cli(capsys, project, "nvidia-b200.jsonl", file)
    assert code == 1
    (line,) = [ln for ln in err.splitlines() if where in ln]
    assert message in line and line.startswith(str(INCOMING))
    assert "nothing merged" in err and "Traceback" not in err
    assert not (project / "results" / "merged").exists()


def test_a_run_id_in_two_files_is_a_duplicate(project, capsys, tmp_path):
    copy = tmp_path / "again.jsonl"
    copy.write_bytes((INCOMING / "nvidia-b200.jsonl").read_bytes())
    code = main(["results", "merge", "--root", str(project), "--origin", "lab-b", str(INCOMING / "nvidia-b200.jsonl"),
                 str(copy)])
    err = capsys.readouterr().err
    assert code == 1  # a run is on one GPU, in one store file: said once per run, at its first row
    assert [ln.split(": run_id: ")[0] for ln in err.splitlines() if "duplicate run id" in ln] == [
        f"{copy}:1", f"{copy}:6"]
    assert main(["results", "merge", "--root", str(project), "--origin", "lab-b",
                 str(INCOMING / "nvidia-b200.jsonl")]) == 0
    capsys.readouterr()
    other = tmp_path / "other.jsonl"
    text = (INCOMING / "nvidia-b200.jsonl").read_text().replace('"time_us": 4.0', '"time_us": 4.5')
    other.write_text(text)
    code = main(["results", "merge", "--root", str(project), "--origin", "lab-c", str(other)])
    err = capsys.readouterr().err
    assert code == 1 and "duplicate run id: run 20261201T110000Z-bbbbbbbb-abc123def456 is already in " \
                         "results/merged/lab-b/nvidia-b200.jsonl" in err


def test_an_origin_must_be_a_plain_name(project, capsys):
    code, _, err = merge_cli(capsys, project, "nvidia-b200.jsonl", origin="../ours")
    assert code == 2 and "--origin '../ours'" in err
    assert merge_cli(capsys, project, "nvidia-b200.jsonl", origin="local")[0] == 2


def test_merged_files_keep_to_the_store_size_bound(project, monkeypatch):
    calls = []
    monkeypatch.setattr(merge, "summarise_if_large", lambda path, root: calls.append(path.name))
    merge.merge(project, "lab-b", [INCOMING / "nvidia-b200.jsonl"])
    assert calls == ["nvidia-b200.jsonl"]


def test_the_matrix_shows_each_claim_per_gpu_model_and_not_applicable_where_a_claim_names_another(project, capsys):
    assert merge_cli(capsys, project, "nvidia-b200.jsonl", "nvidia-h200.jsonl")[0] == 0
    page = load_wiki(project).by_id["technique-nap"]
    m = matrix.matrix(project, "technique-nap", page.meta.claims)
    assert m.models == ["B200", "H200"]
    b200, h200 = m.cells["nap-time"]
    assert b200.verdict == "not-applicable" and "stated for H200" in b200.why  # not failed
    assert (h200.verdict, h200.origin) == ("reproduced", "local")
    b200, h200 = m.cells["nap-vs-nap2"]
    assert (b200.verdict, b200.median, b200.origin, b200.run_id) == (
        "worse", 1.0, "lab-b", "20261201T120000Z-cccccccc-abc123def456")  # the latest of theirs
