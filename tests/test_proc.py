"""Process hygiene: nothing an artifact starts outlives the `kwiki verify` that started it.

The artifact (tests/fixtures/verify/sleeper_project) starts a grandchild in its process group and
one that leaves the group with setsid, then sleeps; `kwiki verify` is stopped by SIGKILL, SIGTERM
or SIGINT while it runs, and /proc must then show none of them alive.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kwiki.core import proc
from kwiki.core.proc import Stopped, run_group, stop_on_signals

REPO = Path(__file__).resolve().parent.parent
SLEEPER = Path(__file__).parent / "fixtures" / "verify" / "sleeper_project"
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...); None if gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rfind(")") + 2 :].split()


def _live(pid: int, started: str) -> bool:
    """PID is the same process as when first seen (start time) and not dead (zombie)."""
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] not in ("Z", "X")


def _group(pgid: int) -> list[int]:
    """Live processes of process group `pgid`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                found.append(int(name))
    return found


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


class Sleepers:
    """The processes the fixture started: pid -> start time, and the process group they ran in."""

    def __init__(self, pids_file: Path, leader: str):
        lines = dict(line.split() for line in pids_file.read_text().splitlines())
        self.pids = {role: int(pid) for role, pid in lines.items()}
        self.started = {pid: _stat(pid)[19] for pid in self.pids.values()}  # type: ignore[index]
        self.pgid = int(_stat(self.pids[leader])[2])  # type: ignore[index]

    def survivors(self) -> list[str]:
        alive = [f"{role} {pid}" for role, pid in self.pids.items() if _live(pid, self.started[pid])]
        return alive + [f"group member {pid}" for pid in _group(self.pgid)]

    def kill(self) -> None:  # a failed test must not leave sleepers behind
        pids = [pid for pid in self.pids.values() if _live(pid, self.started[pid])] + _group(self.pgid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _verify_until_running(tmp_path: Path, stage: str = "run") -> tuple[subprocess.Popen, Sleepers]:
    """A real `kwiki verify` subprocess, once the fixture's build or run and its sleepers all run."""
    root = tmp_path / "project"
    shutil.copytree(SLEEPER, root)
    pids_file = tmp_path / "pids"
    roles, leader, var = ((["artifact", "grandchild", "escaped"], "artifact", "KWIKI_TEST_PIDS") if stage == "run"
                          else (["build", "grandchild"], "build", "KWIKI_TEST_BUILD_PIDS"))
    env = {**os.environ, var: str(pids_file), "KWIKI_TEST_PYTHON": sys.executable}
    # a shell without job control starts background jobs with SIGINT ignored, and kwiki keeps an ignored
    # signal ignored (nohup): give verify the default, as a terminal would, whatever started the tests
    verify = subprocess.Popen([sys.executable, "-m", "kwiki.cli", "verify", "--root", str(root), "--no-write"],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True, preexec_fn=_default_sigint)

    def all_started() -> bool:
        if verify.poll() is not None:
            pytest.fail(f"kwiki verify ended early: {verify.communicate()}")
        text = pids_file.read_text() if pids_file.exists() else ""
        return all(f"{role} " in text for role in roles)

    _wait_for(all_started, 60, f"the {stage} and its sleepers to start")
    return verify, Sleepers(pids_file, leader)


def _assert_none_survive(sleepers: Sleepers) -> None:
    deadline = time.monotonic() + 10
    while sleepers.survivors() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers.survivors() == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_stopping_verify_leaves_no_artifact_process(tmp_path, signum):
    verify, sleepers = _verify_until_running(tmp_path)
    try:
        assert sleepers.pgid != os.getpgid(verify.pid)  # the artifact runs in a group of its own
        assert len(sleepers.survivors()) >= 3  # artifact, grandchild, escapee: all run now
        os.kill(verify.pid, signum)
        _, err = verify.communicate(timeout=30)
        _assert_none_survive(sleepers)
        if signum == signal.SIGKILL:
            assert verify.returncode == -signal.SIGKILL
        else:
            assert verify.returncode == 128 + signum
            assert f"stopped by {signal.Signals(signum).name}" in err.decode()
    finally:
        verify.kill()
        verify.wait()
        sleepers.kill()


def test_ctrl_c_during_parallel_builds_stops_them_at_once(tmp_path):
    """Builds run in worker threads, which a KeyboardInterrupt alone would wait for (here: forever)."""
    verify, sleepers = _verify_until_running(tmp_path, "build")
    try:
        assert len(sleepers.survivors()) >= 2
        os.kill(verify.pid, signal.SIGINT)
        _, err = verify.communicate(timeout=20)
        assert verify.returncode == 128 + signal.SIGINT
        assert "stopped by SIGINT" in err.decode()
        _assert_none_survive(sleepers)
    finally:
        verify.kill()
        verify.wait()
        sleepers.kill()


def test_grandchildren_end_with_the_command(tmp_path):
    pids = tmp_path / "pids"
    res = run_group(["sh", "-c", f"sleep 100 & echo $! > {pids}; setsid sleep 101 & echo $! >> {pids}; echo hi"],
                    cwd=tmp_path, timeout=30)
    assert (res.returncode, res.stdout) == (0, "hi\n")
    for pid in map(int, pids.read_text().split()):
        fields = _stat(pid)
        assert fields is None or fields[0] in ("Z", "X"), f"pid {pid} outlived its command"


def test_exit_status_signal_and_start_error_come_through(tmp_path):
    assert run_group(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=30).returncode == 3
    crashed = run_group(["sh", "-c", "kill -SEGV $$"], cwd=tmp_path, timeout=30)
    assert (crashed.returncode, crashed.signal) == (-signal.SIGSEGV, signal.SIGSEGV)
    missing = run_group([str(tmp_path / "no-such-binary")], cwd=tmp_path, timeout=30)
    assert missing.returncode is None
    assert missing.start_error == f"cannot start {tmp_path / 'no-such-binary'}: No such file or directory"


def test_timeout_kills_the_whole_tree(tmp_path):
    pids = tmp_path / "pids"
    res = run_group(["sh", "-c", f"sleep 100 & echo $! > {pids}; sleep 100"], cwd=tmp_path, timeout=0.5)
    assert res.timed_out and res.returncode is None
    fields = _stat(int(pids.read_text()))
    assert fields is None or fields[0] in ("Z", "X")


def test_stop_signal_in_process_kills_the_running_command_and_raises(tmp_path):
    pids = tmp_path / "pids"

    def send_when_started() -> None:
        _wait_for(pids.exists, 30, "the command to start")
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send_when_started)
    sender.start()
    try:
        with pytest.raises(Stopped) as stopped, stop_on_signals():
            run_group(["sh", "-c", f"sleep 100 & echo $! > {pids}; sleep 100"], cwd=tmp_path, timeout=60)
    finally:
        sender.join()
    assert stopped.value.signum == signal.SIGTERM
    fields = _stat(int(pids.read_text()))
    assert fields is None or fields[0] in ("Z", "X")
    # once stopped, no new command starts until the next stop_on_signals
    refused = run_group(["true"], cwd=tmp_path, timeout=30)
    assert refused.stopped and refused.start_error
    proc.allow_starts()
    assert run_group(["true"], cwd=tmp_path, timeout=30).returncode == 0
