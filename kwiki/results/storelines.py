"""Lines of the results store (`results/*.jsonl`) that cannot be result rows, found cheaply.

Each non-blank line must be a JSON object whose `kind` is "record" or "claim". This module
imports neither pydantic nor the row models, so `kwiki check` can afford it on every run;
`kwiki.results.store.read_store` validates each row in full when `verify` and `build` read it.
A line that fails is skipped by every reader, never silently: each is reported as a warning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kwiki.core.errors import Problem

RESULTS_DIR = "results"
KINDS = ("record", "claim")


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
    if data.get("kind") not in KINDS:
        return None, unreadable(path, lineno, f"'kind' is {data.get('kind')!r}, not 'record' or 'claim'")
    return data, None


def store_problems(root: Path) -> list[Problem]:
    """A warning for each line of each store file under `root`/results that cannot be a row."""
    directory = Path(root) / RESULTS_DIR
    out: list[Problem] = []
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            out.append(unreadable(path, 0, f"cannot read the file ({exc.strerror or exc})"))
            continue
        for lineno, line in enumerate(text.split("\n"), 1):
            if line.strip():
                problem = parse_line(path, lineno, line)[1]
                if problem is not None:
                    out.append(problem)
    return out
