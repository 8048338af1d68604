"""The results store grows by appending: a run costs its own rows, a reader never sees part of a run, and the
rows written before commit lines (store version 1) keep reading."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kwiki.results import store
from kwiki.results.store import STORE_VERSION, RecordRow, append_rows, read_store
from kwiki.results.storelines import store_problems

REPO = Path(__file__).resolve().parent.parent


def _rows(run_id: str, n: int) -> list[RecordRow]:
    return [RecordRow(run_id=run_id, date="2026-01-01T00:00:00+00:00", gpu="host", artifact="a", target="host",
                      variant=f"v{i}", passed=True, figures={"time_us": 1.0 + i}) for i in range(n)]


def _run_ids(path: Path) -> list[str]:
    return sorted({r.run_id for r in read_store(path, warn=False)[0]})


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from kwiki.results.store import RecordRow, append_rows
    path, where = Path(sys.argv[1]), sys.argv[2]
    real, writes = os.pwrite, []
    def killing(fd, data, offset):
        writes.append(offset)
        if where == "before-commit" and len(writes) == 2:  # the rows are written; killed before their commit line
            os.kill(os.getpid(), signal.SIGKILL)
        if where == "mid-row":  # killed halfway through writing the rows: a line cut short
            real(fd, bytes(data)[: len(data) // 2], offset)
            os.kill(os.getpid(), signal.SIGKILL)
        return real(fd, data, offset)
    os.pwrite = killing
    append_rows(path, [RecordRow(run_id="killed", date="2026-01-02", gpu="host", artifact="a", target="host",
                                 variant=f"v{i}", passed=True) for i in range(50)])
""")


@pytest.mark.parametrize("where", ["before-commit", "mid-row"])
def test_a_reader_never_sees_part_of_a_run_whose_writer_was_killed(tmp_path: Path, where: str):
    path = tmp_path / "results" / "host.jsonl"
    append_rows(path, _rows("first", 3))
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path), where], cwd=REPO, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert '"run_id":"killed"' in path.read_text()  # the writer did write rows of its run...
    rows, problems = read_store(path, warn=False)
    assert [r.run_id for r in rows] == ["first"] * 3  # ...and no reader sees any of them
    if where == "before-commit":
        assert [p.message for p in problems] == [
            "50 rows no commit line counts (an append that did not finish), skipped by every reader; the next "
            "append removes them"]
        assert [p.format() for p in store_problems(tmp_path)] == [p.format() for p in problems]  # kwiki check
    append_rows(path, _rows("next", 2))  # the next append cuts the unfinished rows off first
    assert _run_ids(path) == ["first", "next"] and read_store(path, warn=False)[1] == []
    assert "killed" not in path.read_text()


def test_each_append_ends_in_the_commit_line_that_counts_its_rows(tmp_path: Path):
    path = tmp_path / "host.jsonl"
    append_rows(path, _rows("r1", 2))
    append_rows(path, _rows("r2", 1))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(d["kind"], d.get("rows"), d["store_version"]) for d in lines] == [
        ("record", None, STORE_VERSION), ("record", None, STORE_VERSION), ("commit", 2, STORE_VERSION),
        ("record", None, STORE_VERSION), ("commit", 1, STORE_VERSION)]
    assert lines[2]["run_id"] == "r1" and lines[4]["run_id"] == "r2"


def test_rows_before_commit_lines_keep_reading_and_the_committed_store_reads_whole():
    committed = REPO / "results" / "nvidia-h200.jsonl"
    lines = [line for line in committed.read_text().splitlines() if line.strip()]
    rows, problems = read_store(committed, warn=False, summaries=True)  # the summaries of older runs too
    assert problems == []
    assert len(rows) == sum(json.loads(line)["kind"] in ("record", "claim") for line in lines)


def test_version_1_rows_between_runs_need_no_commit_line(tmp_path: Path):
    path = tmp_path / "host.jsonl"
    old = _rows("old", 2)[0].model_copy(update={"store_version": 1})
    path.write_bytes(store.row_line(old) * 2)
    append_rows(path, _rows("new", 1))
    with path.open("ab") as fh:  # an older kwiki appends version-1 rows after a committed run
        fh.write(store.row_line(old.model_copy(update={"run_id": "older-writer"})))
    assert [r.run_id for r in read_store(path, warn=False)[0]] == ["old", "old", "new", "older-writer"]


def test_a_commit_line_that_counts_more_rows_than_precede_it_commits_none(tmp_path: Path):
    path = tmp_path / "host.jsonl"
    path.write_bytes(b"".join(store.row_line(r) for r in _rows("r", 2))
                     + b'{"kind": "commit", "rows": 3, "store_version": 2}\n')
    rows, problems = read_store(path, warn=False)
    assert rows == [] and "a commit line counts 3 rows, but 2 rows" in problems[0].message


def test_appending_reads_the_unfinished_tail_not_the_store(tmp_path: Path, monkeypatch):
    path = tmp_path / "host.jsonl"
    old = _rows("old", 1)[0].model_copy(update={"store_version": 1})
    path.write_bytes(store.row_line(old) * 20000)  # about 3 MB
    append_rows(path, _rows("r1", 10))
    read = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        data = real(fd, n, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("append_rows read the store whole"))
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: pytest.fail("append_rows read the store whole"))
    before = path.stat().st_size
    append_rows(path, _rows("r2", 10))
    assert sum(read) <= store.TAIL_CHUNK + 1  # the last commit line is within the last chunk: nothing more
    added = b"".join(store.row_line(r) for r in _rows("r2", 10)) + store.commit_line(10, ["r2"])
    assert path.stat().st_size == before + len(added)


# ---------------------------------------------------------------- the size bound (kwiki.results.summary)


def _run(artifact: str, series: str, n: int, *, passed: bool = True) -> list[RecordRow]:
    """Run number n of `artifact` in `series`: two variants on two shapes, times that grow with n."""
    return [RecordRow(run_id=f"{series}-r{n}", date=f"2026-01-{n:02d}T00:00:00+00:00", gpu="host", artifact=artifact,
                      artifact_hash="h1", series=series, target="host", variant=v, params={"n": size},
                      passed=passed, figures={"time_us": float(n * size), "gb_per_s": 100.0 / n}, spread=0.01,
                      mechanism={"status": "passed", "kernels": [{"name": "k" * 400}]})
            for v in ("a", "b") for size in (1, 2)]


def test_summarising_keeps_the_last_runs_of_the_current_series_and_the_cited_ones_and_folds_the_rest(tmp_path: Path):
    from kwiki.results.series import run_counts, runs_of
    from kwiki.results.summary import summarise

    path = tmp_path / "host.jsonl"
    for n in range(1, 7):  # a superseded series, then the current one
        append_rows(path, _run("art", "old", n))
    for n in range(7, 12):
        append_rows(path, _run("art", "new", n))
    claim = store.ClaimRow(run_id="old-r2", date="2026-01-02", gpu="host", artifact="art", page="p", claim="c",
                           verdict="reproduced", value=1.0)
    append_rows(path, [claim])
    before = path.stat().st_size
    done = summarise(path, cited={"old-r2"})
    rows, problems = read_store(path, warn=False)
    assert problems == [] and done.bytes_after == path.stat().st_size < before
    kept = {r.run_id for r in rows if isinstance(r, RecordRow)}
    # the current series' last 3, and the cited run; the superseded series keeps nothing else (no verdict reads it)
    assert kept == {"old-r2", "new-r9", "new-r10", "new-r11"}
    assert [r.run_id for r in rows if isinstance(r, store.ClaimRow)] == ["old-r2"]  # claim rows stay
    assert [run[0].run_id for run in runs_of(rows, "new", "art", None)] == ["new-r9", "new-r10", "new-r11"]
    assert run_counts(rows)[("new", "art")] == 3  # a summary is never a run
    summary = [r for r in read_store(path, warn=False, summaries=True)[0] if isinstance(r, RecordRow)
               and r.summary_of]
    old = {(r.variant, r.params["n"]): r for r in summary if r.series == "old"}
    assert len(summary) == 8 and {r.summary_of for r in summary if r.series == "old"} == {5}  # r1, r3 to r6
    assert {r.summary_of for r in summary if r.series == "new"} == {2}  # r7, r8
    assert old[("a", 2)].figures["time_us"] == 8.0 and old[("a", 2)].run_id == "summary:art:old"  # 2, 6, 8, 10, 12
    assert old[("a", 2)].date.startswith("2026-01-06") and old[("a", 2)].artifact_hash == "h1"

    append_rows(path, _run("art", "new", 12))  # summarising again folds the older summary in, weighted by its runs
    summarise(path, cited={"old-r2"})
    again = [r for r in read_store(path, warn=False, summaries=True)[0] if isinstance(r, RecordRow) and r.summary_of]
    new_a2 = next(r for r in again if r.series == "new" and r.variant == "a" and r.params["n"] == 2)
    assert new_a2.summary_of == 3 and new_a2.figures["time_us"] == 15.0  # r7, r8 as their summary (15, x2), r9 (18)


def test_summarising_keeps_the_runs_a_new_series_follows_and_every_caught_run(tmp_path: Path):
    """A series with fewer than 3 runs follows the series before it (kwiki.results.series.follows: a taint there is
    its taint), so those keep their last 3 runs, up to the first series that has 3; and a run in which a variant was
    caught stays a run wherever it lies, or summarising would launder it."""
    from kwiki.results.summary import summarise

    path = tmp_path / "host.jsonl"
    for n in range(1, 4):  # the oldest series: 3 runs, one of them caught; no verdict reads it any more
        append_rows(path, _run("art", "z", n, passed=n != 2))
    for n in range(4, 9):  # 5 runs, the second caught: the series the current one follows
        append_rows(path, _run("art", "a", n, passed=n != 5))
    for n in range(9, 11):  # the current series: 2 runs
        append_rows(path, _run("art", "b", n))
    summarise(path, cited=set())
    kept = {r.run_id for r in read_store(path, warn=False)[0] if isinstance(r, RecordRow)}
    assert kept == {"b-r9", "b-r10", "a-r6", "a-r7", "a-r8", "a-r5", "z-r2"}  # z-r1, z-r3, a-r4 summarised
    for n in range(11, 12):  # a third run: the current series no longer follows a; its runs are summarised but
        append_rows(path, _run("art", "b", n))  # the caught ones
    summarise(path, cited=set())
    kept = {r.run_id for r in read_store(path, warn=False)[0] if isinstance(r, RecordRow)}
    assert kept == {"b-r9", "b-r10", "b-r11", "a-r5", "z-r2"}


def test_a_store_past_its_threshold_is_summarised_under_the_bound_after_a_run(tmp_path: Path):
    from kwiki.results.summary import summarise_if_large

    path = tmp_path / "results" / "host.jsonl"
    (tmp_path / "wiki").mkdir()
    for n in range(1, 31):
        append_rows(path, _run("art", "s1" if n < 20 else "s2", n))
    size = path.stat().st_size
    assert summarise_if_large(path, tmp_path, at=size) is None  # not past the threshold: untouched
    # s1-r5: a run the claims being written back stand on (the pages will name it): kept whole
    done = summarise_if_large(path, tmp_path, also={"s1-r5"}, at=size // 2, bound=size // 3)
    assert done is not None and done.runs == 26 and path.stat().st_size < size // 3
    assert {r.run_id for r in read_store(path, warn=False)[0]} == {"s1-r5", "s2-r28", "s2-r29", "s2-r30"}


def test_the_runs_the_pages_name_are_the_ones_their_blocks_cite():
    from kwiki.results.summary import cited_runs

    cited = cited_runs(REPO)
    stored = {r.run_id for r in read_store(REPO / "results" / "nvidia-h200.jsonl", warn=False)[0]}
    assert cited and cited <= stored  # every run a page names is in the store (else the page would not trace)


def test_summarising_leaves_a_variants_evidence_on_its_first_row_of_each_run_and_the_ladder_keeps_it(tmp_path: Path):
    """One binary ran every record of a run's variant, so its SASS evidence is said once a run (it was a third of
    the H200's store, 2026-12-04); the ladder of a run still shows each variant's."""
    from kwiki.results.ladders import from_store
    from kwiki.results.summary import summarise
    from kwiki.wiki.manifest import Manifest

    path = tmp_path / "host.jsonl"
    for n in range(1, 6):
        append_rows(path, _run("art", "s", n))
    before = path.stat().st_size
    summarise(path, cited=set())
    rows = [r for r in read_store(path, warn=False, summaries=True)[0] if isinstance(r, RecordRow)]
    kept = [r for r in rows if not r.summary_of]
    assert {r.run_id for r in kept} == {"s-r3", "s-r4", "s-r5"}
    carrying = [(r.run_id, r.variant) for r in kept if r.mechanism is not None]
    assert sorted(carrying) == sorted({(r.run_id, r.variant) for r in kept})  # once per run and variant
    assert [r.params["n"] for r in kept if r.mechanism is not None] == [1] * 6  # on the run's first row
    assert all(r.mechanism is None for r in rows if r.summary_of)
    assert path.stat().st_size < before - 3 * 2 * 400  # the repeated lists are gone
    manifest = Manifest.model_validate({"name": "art", "title": "t", "targets": ["host"], "build": {"sources": ["a.c"]},
                                        "variants": [{"name": "a"}, {"name": "b"}]})
    ladder, = from_store(manifest, [r for r in rows if not r.summary_of])
    assert set(ladder.mechanisms) == {"a", "b"}
    assert {r.figures["time_us"] for r in kept if r.variant == "a" and r.params["n"] == 2} == {6.0, 8.0, 10.0}


def test_every_committed_store_file_is_within_its_size_bound():
    """What a GPU model's runs add is summarised past SUMMARISE_AT (kwiki.results.summary); a store the pages' runs
    no longer fit in BOUND is a change to look at before it lands (the H200's had reached 30.4 MB, 2026-12-04)."""
    from kwiki.results.summary import BOUND

    files = sorted((REPO / "results").glob("*.jsonl"))
    assert files and {f.name: f.stat().st_size for f in files if f.stat().st_size > BOUND} == {}
