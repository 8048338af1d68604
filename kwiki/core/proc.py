"""Run a command in its own process group with a timeout and an output cap; kill the whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None when killed by kwiki (timeout or output cap)
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    output_overflow: bool = False
    start_error: str | None = None

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, when it died of one."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_group(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float,
    max_output: int = 16 * 1024 * 1024,
    poll: float = 0.02,
) -> ProcResult:
    """Run `argv` in a new session; on timeout or more than `max_output` bytes, SIGKILL its group."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            return ProcResult(argv, None, "", "", 0.0, start_error=f"cannot start {argv[0]}: {exc.strerror or exc}")
        timed_out = overflow = False
        while True:
            try:
                proc.wait(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - start > timeout:
                timed_out = True
                _kill_group(proc)
                break
            if os.fstat(out.fileno()).st_size + os.fstat(err.fileno()).st_size > max_output:
                overflow = True
                _kill_group(proc)
                break
            poll = min(poll * 1.5, 0.25)
        # the leader may exit while children of its group live on: end them too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        seconds = time.monotonic() - start
        stdout = _read(out, max_output)
        stderr = _read(err, max_output)
    code = None if (timed_out or overflow) else proc.returncode
    return ProcResult(argv, code, stdout, stderr, seconds, timed_out, overflow)


def _read(fh, limit: int) -> str:
    fh.seek(0)
    return fh.read(limit).decode("utf-8", errors="replace")
