"""bench/merge_written.py: what several GPU-machine calls wrote, each on a fresh copy of the same commit, merged
against HEAD. Extracting their archives in turn (as on 2026-12-02) let a later call's unchanged copies overwrite an
earlier call's pages and store lines."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("merge_written", ROOT / "bench" / "merge_written.py")
assert _spec is not None and _spec.loader is not None
merge_written = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(merge_written)

BASE = {"wiki/a.md": b"page a\n", "wiki/b.md": b"page b\n", "results/gpu.jsonl": b'{"run": 0}\n'}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, data in BASE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], check=True)
    return root


def archive(path: Path, changes: dict[str, bytes]) -> Path:
    """A call's written.tgz: the whole of wiki/ and results/ as that call left them."""
    with tarfile.open(path, "w:gz") as tar:
        for rel, data in {**BASE, **changes}.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_two_calls_keep_both_pages_and_both_runs(repo, tmp_path):
    one = archive(tmp_path / "1.tgz", {"wiki/a.md": b"page a, run 1\n",
                                       "results/gpu.jsonl": BASE["results/gpu.jsonl"] + b'{"run": 1}\n'})
    two = archive(tmp_path / "2.tgz", {"wiki/b.md": b"page b, run 2\n",
                                       "results/gpu.jsonl": BASE["results/gpu.jsonl"] + b'{"run": 2}\n',
                                       "results/audits/gpu.jsonl": b'{"audit": 2}\n'})
    assert merge_written.main([str(one), str(two)], root=repo) == 0
    assert (repo / "wiki/a.md").read_bytes() == b"page a, run 1\n"
    assert (repo / "wiki/b.md").read_bytes() == b"page b, run 2\n"  # not the first call's copy of it
    assert (repo / "results/gpu.jsonl").read_bytes() == b'{"run": 0}\n{"run": 1}\n{"run": 2}\n'
    assert (repo / "results/audits/gpu.jsonl").read_bytes() == b'{"audit": 2}\n'


def test_a_page_two_calls_wrote_differently_is_a_conflict_and_nothing_is_written(repo, tmp_path, capsys):
    one = archive(tmp_path / "1.tgz", {"wiki/a.md": b"one\n",
                                       "results/gpu.jsonl": BASE["results/gpu.jsonl"] + b'{"run": 1}\n'})
    two = archive(tmp_path / "2.tgz", {"wiki/a.md": b"two\n"})
    assert merge_written.main([str(one), str(two)], root=repo) == 2
    assert "wiki/a.md was also changed, differently" in capsys.readouterr().err
    assert (repo / "wiki/a.md").read_bytes() == BASE["wiki/a.md"]
    assert (repo / "results/gpu.jsonl").read_bytes() == BASE["results/gpu.jsonl"]


def test_last_wins_keeps_the_last_calls_page_and_every_run(repo, tmp_path):
    one = archive(tmp_path / "1.tgz", {"wiki/a.md": b"one\n",
                                       "results/gpu.jsonl": BASE["results/gpu.jsonl"] + b'{"run": 1}\n'})
    two = archive(tmp_path / "2.tgz", {"wiki/a.md": b"two\n",
                                       "results/gpu.jsonl": BASE["results/gpu.jsonl"] + b'{"run": 2}\n'})
    assert merge_written.main(["--last-wins", str(one), str(two)], root=repo) == 0
    assert (repo / "wiki/a.md").read_bytes() == b"two\n"
    assert (repo / "results/gpu.jsonl").read_bytes() == b'{"run": 0}\n{"run": 1}\n{"run": 2}\n'


def test_a_later_trace_replaces_an_earlier_one_and_is_not_appended(repo, tmp_path):
    trace = "results/timelines/gpu.jsonl"
    one = archive(tmp_path / "1.tgz", {trace: b'{"trace": 1}\n'})
    two = archive(tmp_path / "2.tgz", {trace: b'{"trace": 2}\n'})
    assert merge_written.main([str(one), str(two)], root=repo) == 0
    assert (repo / trace).read_bytes() == b'{"trace": 2}\n'


def test_a_store_from_another_commit_is_refused(repo, tmp_path, capsys):
    other = archive(tmp_path / "1.tgz", {"results/gpu.jsonl": b'{"run": 9}\n{"run": 1}\n'})
    assert merge_written.main([str(other)], root=repo) == 2
    assert "does not start with the file committed at HEAD" in capsys.readouterr().err


def test_uncommitted_changes_are_refused(repo, tmp_path, capsys):
    (repo / "wiki/a.md").write_bytes(b"edited here\n")
    assert merge_written.main([str(archive(tmp_path / "1.tgz", {}))], root=repo) == 2
    assert "uncommitted changes" in capsys.readouterr().err


def rec(run: str, artifact: str = "x", series: str = "s", **more: object) -> bytes:
    return json.dumps({"kind": "record", "run_id": run, "artifact": artifact, "series": series, **more}).encode()


OLD_RUNS = b"\n".join([rec("r1", v=1), rec("r1", artifact="y", v=1), b'{"kind": "commit", "run_id": "r1"}',
                       b'{"kind": "claim", "claim": "c", "run_id": "r1"}', rec("r2", v=2),
                       b'{"kind": "commit", "run_id": "r2"}']) + b"\n"
SUMMARY = rec("summary:x:s", summary_of=2)


def summarised_repo(repo: Path) -> Path:
    """HEAD's store holds two runs of artifact x (the first with artifact y too) and a claim row."""
    (repo / "results/gpu.jsonl").write_bytes(OLD_RUNS)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "runs"],
                   check=True)
    return repo


def test_a_store_the_calls_summarised_gets_their_new_runs_appended_to_heads(repo, tmp_path):
    """A verify that grows a store past its bound summarises it (kwiki.results.summary): the call's copy no longer
    starts with HEAD's. It is accepted when every run of HEAD's is in it whole or under its series' summary row,
    and what it adds is its new runs. Two calls that both summarised it (2026-12-03: the second call's archive was
    refused, and its runs with it) each add theirs."""
    repo = summarised_repo(repo)
    kept = b"\n".join([rec("r1", artifact="y", v=1), b'{"kind": "claim", "claim": "c", "run_id": "r1"}', SUMMARY,
                       b'{"kind": "commit", "run_id": "summary:x:s"}']) + b"\n"
    r3 = rec("r3", store_version=2) + b"\n"  # committed, in the summarised copy, with the rows the summary kept
    one = archive(tmp_path / "1.tgz", {"results/gpu.jsonl": kept + r3 + b'{"kind": "commit", "rows": 3}\n'})
    two = archive(tmp_path / "2.tgz", {"results/gpu.jsonl": OLD_RUNS + rec("r4") + b"\n"})
    three = archive(tmp_path / "3.tgz", {"results/gpu.jsonl": kept + rec("r5") + b"\n"})
    assert merge_written.main([str(one), str(two), str(three)], root=repo) == 0
    commit = b'{"kind":"commit","rows":1,"run_id":"r3","store_version":2}\n'  # the one r3's rows need
    assert (repo / "results/gpu.jsonl").read_bytes() == OLD_RUNS + r3 + commit + rec("r4") + b"\n" + rec("r5") + b"\n"


@pytest.mark.parametrize("lost", ["claim", "unsummarised run", "other artifact of the run"])
def test_a_rewritten_store_that_lost_a_run_or_a_claim_is_refused(repo, tmp_path, capsys, lost):
    repo = summarised_repo(repo)
    rows = [rec("r1", artifact="y", v=1), b'{"kind": "claim", "claim": "c", "run_id": "r1"}', SUMMARY]
    if lost == "claim":
        rows.pop(1)
    elif lost == "unsummarised run":
        rows.pop(2)
    else:
        rows.pop(0)
    one = archive(tmp_path / "1.tgz", {"results/gpu.jsonl": b"\n".join(rows) + b"\n"})
    assert merge_written.main([str(one)], root=repo) == 2
    assert "does not start with the file committed at HEAD" in capsys.readouterr().err
    assert (repo / "results/gpu.jsonl").read_bytes() == OLD_RUNS


def test_an_audit_a_call_replaced_is_replaced_here_and_new_audits_of_every_call_are_kept(repo, tmp_path):
    """The audits are keyed (kwiki.results.keyed): a re-audit replaces the record's line, so the call's copy does
    not start with HEAD's. HEAD's lines less the replaced ones, then each call's new lines."""
    audits = "results/audits/gpu.jsonl"
    (repo / audits).parent.mkdir(parents=True)
    (repo / audits).write_bytes(b'{"v": "a", "old": 1}\n{"v": "b", "old": 1}\n')
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"],
                   check=True)
    one = archive(tmp_path / "1.tgz", {audits: b'{"v": "b", "old": 1}\n{"v": "a", "new": 1}\n'})
    two = archive(tmp_path / "2.tgz", {audits: b'{"v": "a", "old": 1}\n{"v": "b", "old": 1}\n{"v": "c", "new": 2}\n'})
    assert merge_written.main([str(one), str(two)], root=repo) == 0
    assert (repo / audits).read_bytes() == b'{"v": "b", "old": 1}\n{"v": "a", "new": 1}\n{"v": "c", "new": 2}\n'


def test_a_call_whose_summary_left_a_runs_repeated_evidence_out_is_still_summarised_from_heads(tmp_path):
    """Summarising keeps a variant's SASS evidence on the run's first row only (kwiki.results.summary): the kept
    rows after it lose bytes, and are still HEAD's rows."""
    from kwiki.results.store import RecordRow, append_rows
    from kwiki.results.summary import summarise

    path = tmp_path / "gpu.jsonl"
    append_rows(path, [RecordRow(run_id="r1", date="2026-01-01T00:00:00+00:00", gpu="g", artifact="x", series="s",
                                 target="t", variant="v", params={"n": n}, passed=True, figures={"time_us": 1.0},
                                 mechanism={"status": "passed", "kernels": [{"name": "k"}]}) for n in (1, 2)])
    base = path.read_bytes()
    summarise(path, cited=set())
    data = path.read_bytes()
    assert data != base and data.count(b'"mechanism"') == 1
    assert merge_written.summarised_from(base, data)
    assert not merge_written.summarised_from(base, data.replace(b'"n":2', b'"n":3'))  # a row changed: not HEAD's
