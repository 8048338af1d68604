"""Atomic file writes: a temporary file beside the target, fsync, rename.

The temporary file is named `.NAME.kwiki-PID-RANDOM.tmp`. A writer killed before its rename (SIGKILL,
a power cut) leaves it behind; the next write into the same directory removes every such file whose
writer is no longer running (see `_clean_stale`), once per directory and process.

A target that is a symbolic link is refused: renaming over it would replace the link with a regular
file, and writing through it could change a file anywhere.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from kwiki.core.errors import WriteBackError

STALE_S = 60.0  # a temporary file this old whose writer has exited is left over from a crash

_cleaned: set[str] = set()  # directories this process has cleaned


class LinkRefused(WriteBackError):
    """The file to be replaced is a symbolic link; kwiki writes only regular files."""


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash at any moment leaves the old or the new file."""
    path = Path(path)
    if path.is_symlink():
        raise LinkRefused(f"{path} is a symbolic link; kwiki does not replace a link or write through it "
                          "(make it a regular file, or write to the file it points to)")
    _clean_stale(path.parent)
    tmp = path.parent / f".{path.name}.kwiki-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _clean_stale(directory: Path) -> None:
    """Remove temporary files of `write_atomic` in `directory` left by writers that have exited."""
    key = str(directory)
    if key in _cleaned:
        return
    _cleaned.add(key)
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(".tmp") and ".kwiki-" in name):
            continue
        pid = name.rsplit(".kwiki-", 1)[1].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and now - entry.stat(follow_symlinks=False).st_mtime > STALE_S:
                os.unlink(entry.path)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:
        return False
    return True
