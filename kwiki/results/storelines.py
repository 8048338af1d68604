"""The lines of the results store (`results/*.jsonl`): which are rows a reader may use, found cheaply.

Each non-blank line must be a JSON object whose `kind` is "record" or "claim" (a row) or "commit". A run
is appended as its rows, then one commit line that counts them (store version 2): a reader uses a
version-2 row only once the commit line after it counts it, so it never sees part of a run, even one
whose writer was killed mid-append (those rows are skipped, with a warning, and the next append removes
them). Rows of version 1 (written whole, before commit lines) need none. This module imports neither
pydantic nor the row models, so `kwiki check` can afford it on every run; `kwiki.results.store.read_store`
validates each row in full when `verify` and `build` read it. A line that fails is skipped by every
reader, never silently: each is reported as a warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kwiki.core.errors import Problem

RESULTS_DIR = "results"
KINDS = ("record", "claim")
COMMIT = "commit"
COMMITTED_FROM = 2  # the store version from which rows count only once a commit line counts them


READ_BOUND = 80 * 1024 * 1024  # 4x the store's size bound (kwiki.results.summary.BOUND): no store kwiki keeps is larger


class StoreFileError(OSError):
    """A store file kwiki does not read: not a regular file, a link that leads out of the repository, or too large."""


def read_text(path: Path) -> str:
    """A store file's text, read only when it is a regular file (a link to one inside the repository, two levels
    up, is fine) of at most READ_BOUND bytes; StoreFileError (an OSError) otherwise: a FIFO would block every
    command, `/dev/zero` would fill the memory."""
    import os
    import stat

    from kwiki.core.paths import within

    if path.is_symlink() and not within(path.parent.parent, path):
        raise StoreFileError(f"{path.name} is a link that leads out of the repository; not read")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open itself
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreFileError(f"{path.name} is not a regular file (a FIFO, a device or a folder); not read")
        if info.st_size > READ_BOUND:
            raise StoreFileError(f"{path.name} is {info.st_size} bytes, over the {READ_BOUND} bytes kwiki reads "
                                 "(the store's size bound is 20 MB); not read")
        chunks, left = [], READ_BOUND + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > READ_BOUND:
        raise StoreFileError(f"{path.name} grew past {READ_BOUND} bytes while read; not read")
    return data.decode("utf-8", errors="replace")


def display_path(path: Path) -> str:
    """`results/NAME.jsonl` for a store file in a results/ folder, else the path as given."""
    return f"{RESULTS_DIR}/{path.name}" if path.parent.name == RESULTS_DIR else str(path)


def unreadable(path: Path, lineno: int, why: str) -> Problem:
    return Problem(display_path(path), lineno, "results",
                   f"not a result row, skipped by kwiki verify and kwiki build: {why}", "warning")


def parse_line(path: Path, lineno: int, line: str) -> tuple[dict[str, Any] | None, Problem | None]:
    """One line of a store file as a JSON object that may be a row, or why it cannot be one."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, unreadable(path, lineno, f"not JSON ({exc.msg})")
    except ValueError as exc:  # valid JSON that Python refuses: an integer of more than 4300 digits
        return None, unreadable(path, lineno, f"not JSON kwiki can read ({str(exc).split(':')[0]})")
    except RecursionError:
        return None, unreadable(path, lineno, "not JSON kwiki can read (nested too deeply)")
    if not isinstance(data, dict):
        return None, unreadable(path, lineno, f"a JSON {type(data).__name__}, not an object")
    if data.get("kind") not in (*KINDS, COMMIT):
        return None, unreadable(path, lineno, f"'kind' is {data.get('kind')!r}, not 'record', 'claim' or 'commit'")
    if data["kind"] == COMMIT and (not isinstance(data.get("rows"), int) or isinstance(data["rows"], bool)
                                   or data["rows"] < 1):
        return None, unreadable(path, lineno, "a commit line counts no rows ('rows' is not a positive integer)")
    return data, None


def needs_commit(data: dict[str, Any]) -> bool:
    """A row written with commit lines (store version 2 on): a reader uses it once a commit line counts it."""
    version = data.get("store_version", 1)
    return data.get("kind") in KINDS and isinstance(version, int) and version >= COMMITTED_FROM


def unfinished(path: Path, lineno: int, rows: int) -> Problem:
    return Problem(display_path(path), lineno, "results",
                   f"{rows} row{'s' * (rows != 1)} no commit line counts (an append that did not finish), "
                   "skipped by every reader; the next append removes them", "warning")


def committed(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any] | None, Problem | None]]:
    """(line number, row, problem) of the rows of a store file a reader may use, in file order, each problem of a
    line that cannot be one, and of rows no commit line counts. A commit line counting n rows commits the n rows of
    version 2 before it; rows of version 2 before those are left over from an append that did not finish."""
    pending: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        data, problem = parse_line(path, lineno, line)
        if data is None:
            yield lineno, None, problem
        elif data["kind"] == COMMIT:
            n = data["rows"]
            if len(pending) < n:  # not what a writer leaves: a hand edit; none of them is taken
                yield lineno, None, unreadable(path, lineno, f"a commit line counts {n} rows, but {len(pending)} "
                                                             "rows of store version 2 come before it (all skipped)")
            else:
                if len(pending) > n:
                    yield pending[0][0], None, unfinished(path, pending[0][0], len(pending) - n)
                yield from ((at, row, None) for at, row in pending[len(pending) - n:])
            pending = []
        elif needs_commit(data):
            pending.append((lineno, data))
        else:
            yield lineno, data, None
    if pending:
        yield pending[0][0], None, unfinished(path, pending[0][0], len(pending))


def store_problems(root: Path) -> list[Problem]:
    """A warning for each line of each store file under `root`/results that cannot be a row, and for rows no commit
    line counts."""
    directory = Path(root) / RESULTS_DIR
    out: list[Problem] = []
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.jsonl")):
        try:
            text = read_text(path)
        except OSError as exc:
            out.append(Problem(display_path(path), 0, "results", f"cannot read the file ({exc.strerror or exc})"))
            continue
        out += [problem for _, _, problem in committed(path, text) if problem is not None]
    return out
