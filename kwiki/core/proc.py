"""Run a command in its own process group with a timeout and an output cap; kill the whole group.

Each command runs under a small supervisor (kwiki/core/supervise.py) that leads a new session
and holds the read end of a pipe from this process. However kwiki ends (an exception, SIGTERM,
Ctrl-C, even SIGKILL), the pipe closes and the supervisor kills everything the command started,
grandchildren included, so no artifact outlives the `kwiki verify` that started it. Inside
`stop_on_signals`, SIGINT, SIGTERM and SIGHUP stop every running command at once (`stop_all`),
start no new one, and raise `Stopped`.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SUPERVISOR = str(Path(__file__).resolve().with_name("supervise.py"))
GRACE_S = 5.0  # how long a supervisor asked to stop may take before its group is SIGKILLed

_live: dict[int, None] = {}  # supervisor pid (= its process group id) of every running command
_stopping = False


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None when killed by kwiki (timeout, output cap, stop_all)
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    output_overflow: bool = False
    start_error: str | None = None
    stopped: bool = False  # stopped (or never started) by stop_all

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, when it died of one."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None


def find_tool(name: str, env_var: str, places: list[str], environ: Mapping[str, str] | None = None) -> str | None:
    """An executable from $env_var, the PATH, or the first of `places` (globs, newest version first); None
    when absent. The one search behind kwiki's optional tools (ncu, compute-sanitizer)."""
    env = os.environ if environ is None else environ
    tried = [env.get(env_var) or "", shutil.which(name, path=env.get("PATH")) or ""]
    for pattern in places:
        tried += sorted(glob.glob(pattern), reverse=True)
    return next((p for p in tried if p and os.access(p, os.X_OK)), None)


def stop_all() -> None:
    """Stop every command run_group is running, with all it started; start none until allow_starts().

    Safe in a signal handler: it only sets a flag and signals the supervisors.
    """
    global _stopping
    _stopping = True
    for pid in list(_live):
        try:
            os.kill(pid, signal.SIGTERM)  # the supervisor kills its command's processes, then itself
        except (ProcessLookupError, PermissionError):
            pass


def allow_starts() -> None:
    """Undo stop_all's refusal to start commands (a new verify in the same process)."""
    global _stopping
    _stopping = False


class Stopped(BaseException):
    """A stop signal arrived (a BaseException, as KeyboardInterrupt: no `except Exception` hides it)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGINT, SIGTERM and SIGHUP call stop_all() and raise Stopped (once; a second
    signal only stops again, so cleanup is not cut short). Signals ignored on entry stay ignored
    (nohup); outside the main thread nothing is installed."""
    allow_starts()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stop_all()
        if not raised:
            raised.append(signum)
            raise Stopped(signum)

    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, handler in old.items():
        if handler != signal.SIG_IGN:
            signal.signal(s, on_signal)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen[bytes], alive_w: int) -> None:
    """Ask the supervisor to clean up (end of file on its pipe); SIGKILL its group if it takes too long."""
    os.close(alive_w)
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)
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
    """Run `argv` in a new session; on timeout or more than `max_output` bytes, kill all it started."""
    if _stopping:
        return ProcResult(argv, None, "", "", 0.0, start_error="not started: kwiki is stopping", stopped=True)
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        alive_r, alive_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", SUPERVISOR, str(alive_r), str(status_w), *argv],
                                    cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True, pass_fds=(alive_r, status_w))
        except OSError as exc:
            for fd in (alive_r, alive_w, status_r, status_w):
                os.close(fd)
            return ProcResult(argv, None, "", "", 0.0, start_error=f"cannot start {argv[0]}: {exc.strerror or exc}")
        os.close(alive_r)
        os.close(status_w)
        _live[proc.pid] = None
        timed_out = overflow = stopped = False
        try:
            while True:
                if _stopping:  # checked after registering: stop_all either saw this run or is seen here
                    stopped = True
                    break
                try:
                    proc.wait(timeout=poll)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - start > timeout:
                    timed_out = True
                    break
                if os.fstat(out.fileno()).st_size + os.fstat(err.fileno()).st_size > max_output:
                    overflow = True
                    break
                poll = min(poll * 1.5, 0.25)
        finally:
            if proc.returncode is None:
                _stop(proc, alive_w)
            else:
                os.close(alive_w)
            _live.pop(proc.pid, None)
            _killpg(proc.pid)  # in case the supervisor itself was killed before it could clean up
            status = _read_status(status_r)
        seconds = time.monotonic() - start
        stdout = _read(out, max_output)
        stderr = _read(err, max_output)
    if status.startswith("start "):
        return ProcResult(argv, None, stdout, stderr, seconds, start_error=f"cannot start {argv[0]}: {status[6:]}")
    code: int | None
    if timed_out or overflow or stopped:
        code = None
    elif status.startswith("rc "):
        code = int(status[3:])
    else:  # the supervisor died before the command ended: report how it died
        code = proc.returncode
    return ProcResult(argv, code, stdout, stderr, seconds, timed_out, overflow, stopped=stopped)


def _read_status(fd: int) -> str:
    """What the supervisor reported (it has exited, so this never blocks), then close the pipe."""
    try:
        os.set_blocking(fd, False)
        return os.read(fd, 4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _read(fh: IO[bytes], limit: int) -> str:
    fh.seek(0)
    return fh.read(limit).decode("utf-8", errors="replace")
