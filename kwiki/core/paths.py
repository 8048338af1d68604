"""The containment rule: what a page or a manifest names must stay inside the repository.

One rule, applied by every command that reads, builds, runs, stages or publishes a path that
a page, a manifest or a committed link supplies: the path is relative (no absolute path, no
'~'), has no '..' part, and lies inside the repository once every symbolic link is resolved;
a broken or looping link is refused too. `inside` checks a path as written (a page's
`artifacts` entry); `within` checks a file found on disk (a file under `wiki/`, a file in an
artifact's directory) that may be a committed link.

Imported by `kwiki query`'s start-up path through `kwiki.wiki`: standard library only.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path, PurePosixPath


def _real(path: Path | str) -> str:
    """`path` with every link resolved; OSError when it is missing, broken or looping."""
    try:
        return os.path.realpath(path, strict=True)
    except ValueError:  # a NUL in the name
        raise OSError(errno.EINVAL, "invalid file name") from None


def shown(path: Path, root: Path) -> str:
    """`path` as a message names it: relative to `root` (with '/') when it lies under it, else as it is."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def within(root: Path, path: Path | str) -> bool:
    """Whether `path` exists and, with every link resolved, is `root` or lies under it."""
    try:
        real, base = _real(path), _real(root)
    except OSError:
        return False
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def links_out(root: Path, top: Path) -> list[Path]:
    """Every committed link under `top` that breaks the rule (leads out of `root`, broken, looping), sorted.

    Folders and files whose names start with '.' are skipped, as the site skips them; linked
    folders are not entered (nothing kwiki reads follows them).
    """
    out: list[Path] = []
    stack = [str(top)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                found = list(entries)
        except OSError:  # top missing, or a folder that cannot be listed
            continue
        for entry in found:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if not within(root, entry.path):
                    out.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return sorted(out)


def inside(root: Path, rel: str, *, must_exist: bool = True) -> str | None:
    """Why the path `rel` (relative to `root`) breaks the containment rule, or None when it keeps it.

    With `must_exist=False` a path that names nothing is accepted (the caller reports a missing
    file its own way); a broken link is still refused.
    """
    if os.path.isabs(rel) or rel.startswith(("~", "\\")) or PurePosixPath(rel).is_absolute():
        return f"{rel!r} is an absolute path; artifact paths are relative to the repository root"
    if ".." in Path(rel).parts:
        return f"{rel!r} leaves the repository ('..')"
    if "\0" in rel:
        return f"{rel!r} is not a valid file name"
    target = root / rel
    if not os.path.lexists(target):
        return f"{rel!r} does not exist" if must_exist else None
    try:
        _real(target)
    except OSError as exc:
        kind = "looping" if exc.errno == errno.ELOOP else "broken"
        return f"{rel!r} is a {kind} link"
    if not within(root, target):
        return f"{rel!r} is a link that leads out of the repository"
    return None


COMMON_DIR = "artifacts/common"  # the headers and harnesses artifacts share
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def included_files(sources: list[Path], search: list[Path]) -> list[Path]:
    """Every local header reachable from `sources` through #include "..." (sorted, unique)."""
    seen: set[Path] = set()
    stack = list(sources)
    while stack:
        path = stack.pop()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in _INCLUDE.findall(text):
            for base in (path.parent, *search):
                candidate = (base / name).resolve()
                if candidate.is_file():
                    if candidate not in seen:
                        seen.add(candidate)
                        stack.append(candidate)
                    break
    return sorted(seen)
