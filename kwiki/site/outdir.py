"""Where a build may write its site: never the repository, its own folders, or a folder no kwiki build wrote
(MkDocs empties its output directory first)."""

from __future__ import annotations

import os
from pathlib import Path

from kwiki.core.errors import UsageError
from kwiki.core.writefile import write_atomic
from kwiki.wiki.catalog import OWN_FOLDERS

STAGE_DIR = ".kwiki/site"
SERVE_DIR = ".kwiki/serve"
SITE_MARK = ".kwiki-site"  # in every output directory kwiki built (MkDocs keeps dot-files when it empties one)


def _built_here(directory: Path) -> bool:
    """Whether `directory` holds a site kwiki built: its mark, a regular file (files named like the agents' files,
    `llms.txt` and `index.json`, are anyone's: a folder holding them is not emptied on their word)."""
    mark_file = directory / SITE_MARK
    return mark_file.is_file() and not mark_file.is_symlink()


def site_dir_problem(root: Path, site_dir: Path) -> str | None:
    """Why the site must not be built into `site_dir`, or None.

    MkDocs empties its output directory before it writes, so that directory must not be the
    repository, contain it, be or lie inside one of its own folders (wiki, artifacts, results,
    ..., any folder at the top of the repository that no kwiki build wrote), nor hold files that
    no kwiki build wrote; its parent must exist.
    """
    empties = "a build empties its output directory first"
    real_root, site = Path(os.path.realpath(root)), Path(os.path.realpath(site_dir))
    if site == real_root:
        return f"is the repository itself; {empties}"
    if site in real_root.parents:
        return f"contains the repository; {empties}"
    if site == real_root / SERVE_DIR:
        return None  # kwiki serve's own folder
    own = {name: Path(os.path.realpath(real_root / name)) for name in OWN_FOLDERS}
    if site.is_relative_to(real_root):
        top = site.relative_to(real_root).parts[0]
        if top not in own and (real_root / top).exists() and not _built_here(real_root / top):
            own[top] = real_root / top
    for name, folder in sorted(own.items()):
        if site == folder or folder in site.parents or site in folder.parents:
            return (f"is, holds or lies inside {name!r}, one of the repository's own folders and files; "
                    f"{empties} (choose a new folder, such as 'site')")
    if site.exists() and not site.is_dir():
        return "is not a directory"
    if not site.parent.is_dir():
        return f"its parent directory {site.parent} does not exist"
    if site.is_dir() and any(site.iterdir()) and not _built_here(site):
        return f"holds files that no kwiki build wrote; {empties} (empty it, or choose a new folder)"
    return None


def output_dir(root: Path, value: str | Path) -> Path:
    """The site directory `value` names (relative to the repository root), resolved; UsageError when refused."""
    path = Path(value)
    site_dir = Path(os.path.realpath(path if path.is_absolute() else root / path))
    why = site_dir_problem(root, site_dir)
    if why:
        raise UsageError(f"output directory {str(value)!r}: {why}")
    return site_dir


def mark(site_dir: Path) -> None:
    """Create `site_dir` and mark it as kwiki's, before MkDocs writes there (a failed build stays rebuildable)."""
    try:
        site_dir.mkdir(parents=True, exist_ok=True)
        if not (site_dir / SITE_MARK).is_file():
            write_atomic(site_dir / SITE_MARK, b"built by kwiki: each 'kwiki build' empties this directory first\n")
    except OSError as exc:
        raise UsageError(f"output directory {str(site_dir)!r}: cannot write there: {exc.strerror or exc}") from None

