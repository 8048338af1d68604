"""Concurrent kwiki processes: the results store loses no row, run ids never collide, one run per GPU."""

from __future__ import annotations

import datetime as real_dt
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kwiki.cli import main
from kwiki.core import lock
from kwiki.results.gpu import Gpu
from kwiki.results.store import RecordRow, append_rows, read_store
from kwiki.verify import pipeline
from kwiki.verify.run import GPU_LOCK_DIR_ENV, RUNS_DIR, gpu_lock, new_run_id
from kwiki.verify.writeback import LOCK, locked

REPO = Path(__file__).resolve().parent.parent
SLEEPER = Path(__file__).parent / "fixtures" / "verify" / "sleeper_project"
GPU = Gpu(index=0, name="Test GPU", uuid="GPU-0000aaaa-test", cc=90)


def _row(run_id: str) -> RecordRow:
    return RecordRow(run_id=run_id, date="2026-01-01", gpu="host", artifact="a", target="host", variant="v",
                     passed=True)


APPENDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kwiki.results.store import RecordRow, append_rows
    path, who, n, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    go.with_name(f"ready-{who}").touch()
    while not go.exists():
        time.sleep(0.002)
    for i in range(n):
        append_rows(path, [RecordRow(run_id=f"{who}-{i}", date="2026-01-01", gpu="host", artifact="a",
                                     target="host", variant="v", passed=True)])
""")


def test_concurrent_appends_lose_no_row(tmp_path):
    store = tmp_path / "results" / "host.jsonl"
    store.parent.mkdir()
    # a store of a realistic size: the longer a rewrite takes, the likelier an unlocked one loses rows
    old = _row("old").model_copy(update={"store_version": 1})  # rows written before commit lines: committed as they are
    line = json.dumps(old.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n"
    store.write_text(line * 1000)
    go = tmp_path / "go"
    writers, n = 3, 10
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(store), f"w{w}", str(n), str(go)], cwd=REPO)
             for w in range(writers)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < writers:  # every writer imported, waiting at the start line
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    rows, problems = read_store(store)
    assert problems == []
    new = sorted(r.run_id for r in rows if r.run_id != "old")
    assert new == sorted(f"w{w}-{i}" for w in range(writers) for i in range(n))
    assert sum(1 for r in rows if r.run_id == "old") == 1000
    assert not list(store.parent.glob(".*.tmp"))


def test_append_creates_the_store(tmp_path):
    store = tmp_path / "results" / "host.jsonl"
    append_rows(store, [_row("r1")])
    append_rows(store, [_row("r2")])
    assert [r.run_id for r in read_store(store)[0]] == ["r1", "r2"]


def test_run_ids_of_one_second_differ_and_sort_by_time():
    now = real_dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=real_dt.UTC)
    ids = {new_run_id(now, "abc123") for _ in range(100)}
    assert len(ids) == 100
    assert all(i.startswith("20260102T030405Z-") and i.endswith("-abc123") for i in ids)
    later = new_run_id(now + real_dt.timedelta(seconds=1), "abc123")
    assert max(ids) < later
    assert new_run_id(now, None).count("-") == 1


def test_two_verify_runs_in_one_second_keep_their_own_logs_and_rows(tmp_path, monkeypatch, capsys):
    root = tmp_path / "project"
    shutil.copytree(SLEEPER, root)
    frozen = real_dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=real_dt.UTC)

    class Frozen(real_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.setattr(pipeline, "dt", SimpleNamespace(datetime=Frozen, UTC=real_dt.UTC))
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(tmp_path / "gpu-locks"))
    run_ids = []
    for _ in range(2):
        main(["verify", "--quiet", "--json", "--root", str(root)])
        run_ids.append(json.loads(capsys.readouterr().out)["run_id"])
    assert run_ids[0] != run_ids[1]
    assert all(r.startswith("20260102T030405Z-") for r in run_ids)
    assert sorted(p.name for p in (root / RUNS_DIR).iterdir()) == sorted(run_ids)
    rows = read_store(root / "results" / "host.jsonl")[0]
    assert {r.run_id for r in rows} == set(run_ids)


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kwiki.results.gpu import Gpu
    from kwiki.verify.run import gpu_lock
    root, held, release = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    with gpu_lock(Gpu(index=0, name="Test GPU", uuid=sys.argv[4], cc=90), root, print):
        held.touch()
        while not release.exists():
            time.sleep(0.01)
""")


def _hold_gpu(tmp_path: Path, root: Path, uuid: str = GPU.uuid or "") -> tuple[subprocess.Popen, Path]:
    """Another process holding the GPU lock, until the returned file is created."""
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), str(held), str(release), uuid], cwd=REPO,
                              env={**os.environ, GPU_LOCK_DIR_ENV: str(tmp_path / "machine")})
    deadline = time.monotonic() + 60
    while not held.exists():
        assert holder.poll() is None and time.monotonic() < deadline, "the holder did not take the lock"
        time.sleep(0.01)
    return holder, release


def test_second_process_waits_for_the_gpu_and_says_for_whom(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(tmp_path / "machine"))
    # another checkout: only the machine-wide lock can keep the two runs apart
    holder, release = _hold_gpu(tmp_path, tmp_path / "other-checkout")
    released_at: list[float] = []

    def release_soon() -> None:
        time.sleep(0.5)
        released_at.append(time.monotonic())
        release.touch()

    threading.Thread(target=release_soon).start()
    messages: list[str] = []
    try:
        with gpu_lock(GPU, tmp_path / "this-checkout", messages.append):
            acquired = time.monotonic()
    finally:
        release.touch()
        holder.wait(timeout=30)
    assert released_at and acquired >= released_at[0]
    assert messages == [(f"waiting for GPU 0 (Test GPU), held by pid {holder.pid}: "
                         f"kwiki verify in {tmp_path / 'other-checkout'}")]


def test_verify_waits_for_a_gpu_that_another_process_times_on(tmp_path, monkeypatch, capsys):
    root = tmp_path / "project"
    shutil.copytree(SLEEPER, root)
    real_plan = pipeline.make_plan

    def plan_on_test_gpu(*args, **kwargs):  # as if this machine had GPU 0 (its host artifact still runs)
        the_plan = real_plan(*args, **kwargs)
        the_plan.gpu = GPU
        return the_plan

    monkeypatch.setattr(pipeline, "make_plan", plan_on_test_gpu)
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(tmp_path / "machine"))
    holder, release = _hold_gpu(tmp_path, tmp_path / "other-checkout")
    threading.Timer(0.5, release.touch).start()
    try:
        code = main(["verify", "--root", str(root), "--no-write"])
    finally:
        release.touch()
        holder.wait(timeout=30)
    err = capsys.readouterr().err
    assert code == 0
    other = tmp_path / "other-checkout"
    assert f"waiting for GPU 0 (Test GPU), held by pid {holder.pid}: kwiki verify in {other}" in err
    assert err.index("waiting for GPU 0") < err.index("run 1/1 host_sleeper")


def test_other_gpu_does_not_wait(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(tmp_path / "machine"))
    holder, release = _hold_gpu(tmp_path, tmp_path / "checkout", uuid="GPU-1111bbbb-other")
    messages: list[str] = []
    try:
        with gpu_lock(GPU, tmp_path / "checkout", messages.append):
            pass
    finally:
        release.touch()
        holder.wait(timeout=30)
    assert messages == []


def test_checkout_lock_holds_when_the_machine_wide_one_cannot_be_made(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    root = tmp_path / "checkout"
    holder, release = _hold_gpu(tmp_path, root)  # its machine-wide lock is in tmp_path/machine
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(blocker / "locks"))  # ours cannot exist
    threading.Timer(0.3, release.touch).start()
    messages: list[str] = []
    try:
        with gpu_lock(GPU, root, messages.append):
            pass
    finally:
        release.touch()
        holder.wait(timeout=30)
    assert messages[0].startswith("note: no machine-wide lock for GPU 0 (Test GPU)")
    assert messages[1] == f"waiting for GPU 0 (Test GPU), held by pid {holder.pid}: kwiki verify in {root}"


def test_no_gpu_takes_no_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_DIR_ENV, str(tmp_path / "machine"))
    with gpu_lock(None, tmp_path, pytest.fail):
        pass
    assert not (tmp_path / "machine").exists()


@pytest.mark.parametrize("plant", ["symlink", "hardlink"])
def test_a_lock_file_planted_onto_other_data_is_refused(tmp_path, plant):
    """The lock directory may be world-writable (/tmp): a lock file there must not lead kwiki to
    truncate a file of the user's."""
    target = tmp_path / "victim"
    target.write_text("keep me\n")
    planted = tmp_path / "locks" / "x.lock"
    planted.parent.mkdir()
    planted.symlink_to(target) if plant == "symlink" else os.link(target, planted)
    with pytest.raises(OSError), lock.hold(planted):
        pass
    assert target.read_text() == "keep me\n"


def test_a_fifo_as_lock_file_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "x.lock")
    with pytest.raises(OSError, match="not a plain lock file"), lock.hold(tmp_path / "x.lock"):
        pass


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kwiki.verify.writeback import locked
    root, held, release = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    with locked(root):
        held.touch()
        while not release.exists():
            time.sleep(0.01)
""")


def test_write_back_lock_is_one_writer_at_a_time(tmp_path):
    held, release = tmp_path / "held", tmp_path / "release"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(held), str(release)], cwd=REPO)
    deadline = time.monotonic() + 60
    while not held.exists():
        assert writer.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    waited: list[str] = []
    threading.Timer(0.3, release.touch).start()
    try:
        with lock.hold(tmp_path / LOCK, on_wait=waited.append):
            pass
        with locked(tmp_path):  # free again
            pass
    finally:
        release.touch()
        writer.wait(timeout=30)
    assert waited == [f"pid {writer.pid}: kwiki verify write-back"]
