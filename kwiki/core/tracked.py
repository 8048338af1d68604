"""What a build may read to publish: files git tracks, under their own folder, named without a dot-component.

A checkout holds more than its committed sources: `.git/config` (where CI keeps its job token), `.env`,
`.venv/`, kwiki's own caches under `.kwiki/`. The containment rule (kwiki.core.paths) keeps a path
inside the repository; this rule narrows what the site may publish from there:

- no path with a dot-component (`.git/...`, `.env`, `wiki/.secret`) is read for publishing, before or
  after its links are resolved;
- a file resolves inside the folder it is published from (`wiki/` for a page's files, `artifacts/`
  for an artifact's sources), so a committed link `wiki/x.txt -> ../.git/config` is never read;
- in a git work tree, the file (and the link that names it) is one git tracks (`git ls-files`: committed
  or added). Outside one (an unpacked archive) the first two rules still hold.

Standard library only: `kwiki check` imports it on its start-up path.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath

from kwiki.core.errors import EnvironmentProblem, Problem
from kwiki.core.paths import within

CACHE_DIR = ".kwiki"


def dotted(rel: str) -> bool:
    """Whether the relative path `rel` has a part that starts with '.' ('.', '..', '.git', '.env')."""
    return any(part.startswith(".") for part in PurePosixPath(rel.replace("\\", "/")).parts)


def tracked(root: Path) -> frozenset[str] | None:
    """The paths (relative to `root`, '/'-separated) that git tracks, or None when `root` is not
    in a git work tree, git cannot say, or git tracks nothing there (a copy in an ignored folder of another
    repository: nobody committed it, so the rule has nothing to go by)."""
    argv = ["git", "-c", "core.fsmonitor=false", "ls-files", "-z", "--cached", "--", "."]
    try:
        done = subprocess.run(argv, cwd=root, capture_output=True, timeout=60, check=False,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return frozenset(os.fsdecode(p) for p in done.stdout.split(b"\0") if p) or None


def is_tracked(files: frozenset[str] | None, rel: str) -> bool:
    """Whether `rel` (a file, or a folder: something under it) is tracked; True outside a git work tree."""
    if files is None:
        return True
    if rel in files:
        return True
    prefix = rel.rstrip("/") + "/"
    return any(f.startswith(prefix) for f in files)


def _rel(root: Path | str, path: Path | str) -> str | None:
    """`path` relative to `root` ('/'-separated), or None when it lies outside."""
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return None


def unpublishable(root: Path, path: Path | str, base: str, files: frozenset[str] | None) -> str | None:
    """Why the file `path` must not be read for publishing from folder `base` (relative to `root`), or None.

    `files` is `tracked(root)` (None outside a git work tree).
    """
    rel = _rel(root, path)
    if rel is None or dotted(rel):
        return f"{rel or path!r}: a path with a dot-component is never published"
    if not within(root / base, path):
        return f"{rel!r} is a link that leads out of {base}/ (or is broken); not published"
    real = _rel(os.path.realpath(root), os.path.realpath(path))
    if real is None or dotted(real):
        return f"{rel!r} is a link to a path with a dot-component; not published"
    if not (is_tracked(files, rel) and is_tracked(files, real)):
        return f"{rel!r} is not tracked by git; only committed (or added) files are published"
    return None


def artifact_entry_problem(root: Path, rel: str, files: frozenset[str] | None, *, must_exist: bool = True
                           ) -> str | None:
    """Why a page's `artifacts` entry `rel` must not be built or published, or None: it names a folder (or a file)
    under `artifacts/`, without a dot-component, inside `artifacts/` once links are resolved, that git tracks."""
    from kwiki.core.paths import inside

    why = inside(root, rel, must_exist=must_exist)
    if why:
        return why
    clean = rel.rstrip("/")
    parts = PurePosixPath(clean).parts
    if dotted(clean):
        return f"{rel!r} has a dot-component; an artifact is a folder under artifacts/ that git tracks"
    if len(parts) < 2 or parts[0] != "artifacts":
        return f"{rel!r} is not under artifacts/; an artifact is a folder under artifacts/ that git tracks"
    if not os.path.lexists(root / clean):
        return None  # must_exist=False: the caller reports a missing artifact its own way
    real = _rel(os.path.realpath(root), os.path.realpath(root / clean))
    if real is None or dotted(real) or not (real == "artifacts" or real.startswith("artifacts/")):
        return f"{rel!r} is a link that leads out of artifacts/; an artifact is a folder under artifacts/"
    if not (is_tracked(files, clean) and is_tracked(files, real)):
        return f"{rel!r} is not tracked by git; only committed (or added) artifacts are published"
    return None


def wiki_files(top: Path) -> list[Path]:
    """Every file (or link) under `top` the site would publish as it is: not a page (`.md`), no dot-component in
    its name or its folders; linked folders are not entered. Sorted."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(".") and not os.path.islink(os.path.join(dirpath, d)))
        out += [Path(dirpath) / n for n in filenames if not n.startswith(".") and not n.endswith(".md")]
    return sorted(out)


def cache_problems(files: frozenset[str] | None) -> list[Problem]:
    """A located error for each file under `.kwiki/` that git tracks (`files`: `tracked(root)`): kwiki's caches are
    per machine, and what a checkout carries there (a prebuilt binary, a profile, a site key) is never used."""
    return [Problem(rel, 0, "", f"git tracks this file, but {CACHE_DIR}/ holds this machine's caches, which kwiki "
                                f"never takes from a checkout (run: git rm -r --cached {CACHE_DIR})")
            for rel in sorted(f for f in files or () if f.startswith(CACHE_DIR + "/"))]


def refuse_tracked_caches(root: Path, files: frozenset[str] | None = None) -> None:
    """EnvironmentProblem, naming them, when git tracks files under `.kwiki/`; `files` defaults to `tracked(root)`."""
    problems = cache_problems(tracked(root) if files is None else files)
    if problems:
        shown = "; ".join(p.format() for p in problems[:3]) + (f"; and {len(problems) - 3} more"
                                                                if len(problems) > 3 else "")
        raise EnvironmentProblem(shown)


def linked_folders(top: Path) -> list[Path]:
    """Every link under `top` (dot-names included, not followed) that leads to a folder, sorted."""
    out: list[Path] = []
    for dirpath, dirnames, _ in os.walk(top):
        out += [Path(dirpath) / d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
    return sorted(out)
