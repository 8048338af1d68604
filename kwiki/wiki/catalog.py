"""The wiki as a whole: every page under `wiki/`, found by id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kwiki.core.errors import EnvironmentProblem

if TYPE_CHECKING:  # pages imports pydantic; `kwiki query` needs find_root only
    from kwiki.wiki.pages import Page

WIKI_DIR = "wiki"
ARTIFACTS_DIR = "artifacts"
# the repository's own folders, present or not (results/: kwiki.results.storelines.RESULTS_DIR): no build writes its
# site, and no export its skills, there
OWN_FOLDERS = (WIKI_DIR, ARTIFACTS_DIR, "results", "schema", "kwiki", "tests", "bench", ".git", ".kwiki")


def find_root(start: Path | str | None = None) -> Path:
    """The project root: `start` itself if it holds `wiki/`, else the nearest parent that does."""
    here = Path(start or os.getcwd()).resolve()
    if start is not None:
        if not here.is_dir():
            raise EnvironmentProblem(f"--root {start}: no such directory")
        if not (here / WIKI_DIR).is_dir():
            raise EnvironmentProblem(f"--root {start}: no '{WIKI_DIR}/' directory there")
        return here
    for candidate in (here, *here.parents):
        if (candidate / WIKI_DIR).is_dir():
            return candidate
    raise EnvironmentProblem(f"no '{WIKI_DIR}/' directory in {here} or its parents (use --root)")


def page_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root / WIKI_DIR):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(Path(dirpath) / name for name in sorted(filenames) if name.endswith(".md"))
    return out


class Wiki:
    """The pages of a project (a plain class: this module is on `kwiki query`'s import path)."""

    def __init__(self, root: Path, pages: list[Page] | None = None):
        self.root = root
        self.pages: list[Page] = pages if pages is not None else []

    @property
    def by_id(self) -> dict[str, Page]:
        out: dict[str, Page] = {}
        for page in self.pages:
            if page.id and page.id not in out:
                out[page.id] = page
        return out


def load_wiki(root: Path, strict: bool = False) -> Wiki:
    from kwiki.wiki.pages import load_page

    return Wiki(root=root, pages=[load_page(f, root, strict) for f in page_files(root)])
