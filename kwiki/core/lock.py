"""Locks across processes: fcntl.flock on a lock file, or on a file that writers replace by rename.

A lock is released when its holder closes the file or dies (SIGKILL included): a crashed kwiki
never leaves a lock behind. A holder writes its pid into a lock file, so a waiter can say whom it
waits for.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kwiki.core.errors import printable

_OPEN = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK  # O_NONBLOCK: a FIFO planted there cannot hang us


@contextmanager
def hold(path: Path, *, on_wait: Callable[[str], None] | None = None, owner: str = "",
         shared_dir: bool = False) -> Iterator[None]:
    """Hold the exclusive lock `path` (created if missing); blocks while another process holds it.

    `on_wait` is told once, with who holds the lock ("pid 123: kwiki verify in /x"), before blocking.
    `shared_dir`: the lock lives in a directory shared by every user of the machine (world-writable,
    sticky); the lock file is made writable by all so that any user can take it.
    """
    fd = _open(Path(path), shared_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait(holder(fd))
            fcntl.flock(fd, fcntl.LOCK_EX)
        _stamp(fd, f"pid {os.getpid()}" + (f": {owner}" if owner else "") + "\n")
        try:
            yield
        finally:
            _stamp(fd, "")  # so a waiter never reads a holder that is gone
    finally:
        os.close(fd)  # releases the lock


def holder(fd: int) -> str:
    """Who holds the lock of the open lock file `fd`, as its holder wrote it."""
    try:
        text = os.pread(fd, 300, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return printable(text) or "another process"  # the file is anyone's: its escape sequences are shown


@contextmanager
def hold_replaced(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` itself, a file that writers replace by rename (created empty if missing).

    Re-read `path` inside the lock: the content is the latest. A waiter that wakes on a file that
    was replaced in the meantime retries on the new one, so two writers never hold it at once.
    """
    path = Path(path)
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            mine = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # replaced (or removed) while we waited: lock the current file
    try:
        yield
    finally:
        os.close(fd)


def _open(path: Path, shared_dir: bool) -> int:
    """Open (or create) a lock file: a plain file with one name, never through a symbolic link."""
    fd = _open_any(path, shared_dir)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # kwiki truncates it: it must be nobody's data
        os.close(fd)
        raise OSError(f"{path}: not a plain lock file")
    return fd


def _open_any(path: Path, shared_dir: bool) -> int:
    """Open (or create) `path`, never through a symbolic link; read-only if it is someone else's."""
    if shared_dir:
        _shared_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(path, os.O_RDWR | _OPEN)
    except FileNotFoundError:
        pass
    except PermissionError:
        return os.open(path, os.O_RDONLY | _OPEN)  # flock needs no write access
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN, 0o644)
    except FileExistsError:  # another process created it just now
        return _open_any(path, False)
    if shared_dir:
        try:
            os.fchmod(fd, 0o666)
        except OSError:
            pass
    return fd


def _shared_dir(directory: Path) -> None:
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(directory, 0o1777)  # every user's kwiki takes its locks here
        except OSError:
            pass


def _stamp(fd: int, text: str) -> None:
    try:
        os.ftruncate(fd, 0)
        if text:
            os.pwrite(fd, text.encode("utf-8", errors="replace"), 0)
    except OSError:  # a lock file opened read-only (another user's): the lock still holds
        pass
