"""The supervisor of one command run by kwiki.core.proc.run_group: when kwiki goes, the command goes.

    python -I -S supervise.py ALIVE_FD STATUS_FD COMMAND...

run_group starts it as the leader of a new session. It starts COMMAND in the same process group
and waits for the first of:

- COMMAND exits: its return code goes to STATUS_FD (`rc N`, negative N for a signal), or
  `start <why>` when COMMAND cannot be started;
- ALIVE_FD, the read end of a pipe whose write end only kwiki holds, becomes readable: kwiki closed
  it to stop the run, or kwiki is gone (the kernel closes the pipe even after a SIGKILL);
- SIGTERM, SIGINT or SIGHUP.

Either way it then SIGKILLs every process COMMAND started, found as its descendants (as a child
subreaper it adopts orphans, also those that left the group with setsid), reaps them (so the GPU
they held is free when it exits) and last kills its own process group, itself included. COMMAND
gets PR_SET_PDEATHSIG, so killing the supervisor alone does not orphan it either. Standard
library only, so it starts in milliseconds; Linux only for the subreaper and the death signal
(elsewhere it still kills its process group).
"""

import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REAP_S = 10.0  # how long to wait for killed processes to be gone (a GPU context takes a moment)

_PRCTL: Callable[..., int] | None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _PRCTL = None


def _prctl(option: int, arg: int) -> None:
    if _PRCTL is not None:
        _PRCTL(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Nothing: the signal's number reaches the wake-up pipe, which _wait watches (no exception can
    cut the clean-up short)."""


def _report(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode("utf-8", errors="replace"))
    except OSError:  # kwiki is gone: nobody to tell
        pass


def _start(command: list[str], me: int) -> int:
    """Fork and exec COMMAND (searched on PATH); its pid. Raises OSError when it cannot start."""
    err_r, err_w = os.pipe()  # close-on-exec: end of file means the exec worked
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid == 0:
        try:
            for signum in (*STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == me:
                os.execvp(command[0], command)
        except OSError as exc:
            os.write(err_w, (exc.strerror or str(exc)).encode("utf-8", errors="replace"))
        finally:
            os._exit(127)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    os.close(err_w)
    try:
        why = os.read(err_r, 4096)
    finally:
        os.close(err_r)
    if why:
        os.waitpid(pid, 0)
        raise OSError(why.decode("utf-8", errors="replace"))
    return pid


def _wait(pid: int, alive_fd: int, stop_fd: int) -> int | None:
    """COMMAND's return code, or None when kwiki closed the pipe (or died) or a stop signal came first."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # older kernel: poll
        pidfd = None
    fds = [alive_fd, stop_fd] + ([] if pidfd is None else [pidfd])
    while True:
        ready, _, _ = select.select(fds, [], [], 0.02 if pidfd is None else None)
        if alive_fd in ready or stop_fd in ready:
            return None
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)


def _descendants(me: int) -> list[int]:
    """The live (not zombie) processes below `me`, read from /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [me]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _kill_all(me: int) -> None:
    """SIGKILL every descendant (again for any that a dying one forked), wait until they are gone,
    then kill the whole group, this process included."""
    killed: set[int] = set()
    for _ in range(50):
        pids = [pid for pid in _descendants(me) if pid not in killed]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            killed.add(pid)
    # orphans were adopted (subreaper): reap them all, so nothing is left, not even a zombie
    deadline = time.monotonic() + REAP_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if not pid:
            time.sleep(0.005)
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    alive_fd, status_fd, command = int(argv[0]), int(argv[1]), argv[2:]
    me = os.getpid()
    for fd in (alive_fd, status_fd):  # kwiki's pipes are not COMMAND's business
        os.set_inheritable(fd, False)
    stop_r, stop_w = os.pipe()
    os.set_blocking(stop_w, False)
    signal.set_wakeup_fd(stop_w)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        try:
            pid = _start(command, me)
        except OSError as exc:
            _report(status_fd, f"start {exc.strerror or exc}")
            return 0
        rc = _wait(pid, alive_fd, stop_r)
        if rc is not None:
            _report(status_fd, f"rc {rc}")
    finally:
        _kill_all(me)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
