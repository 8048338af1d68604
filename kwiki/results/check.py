"""`kwiki check` as one call, which the CLI, the tests and the agents share: the wiki's own checks
(kwiki.wiki.check: schema, ids, references, links, artifact paths, generated regions), each measured figure
against the results store (kwiki.results.trace), and the store's lines that no reader can use
(kwiki.results.storelines). Reads only; never writes a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kwiki.core.errors import Problem
from kwiki.results.storelines import store_problems
from kwiki.wiki.check import Report, check
from kwiki.wiki.siteconfig import config_problems

if TYPE_CHECKING:
    from kwiki.wiki.model import PageMeta


def check_tree(root: Path, *, strict: bool = False, jobs: int = 0) -> Report:
    """Every problem of the tree under `root`, sorted. Under `strict` the wiki's warnings and the store's unreadable
    lines are errors; a block written before run ids, and figures of earlier code (kwiki.results.freshness), stay
    warnings (only a `kwiki verify` on a GPU can write them again)."""
    from kwiki.results.freshness import problems as earlier_code
    from kwiki.results.trace import check_pages  # pydantic and the row models: only when the check runs

    def traced(root: Path, pages: list[tuple[str, PageMeta, int]]) -> list[Problem]:
        return check_pages(root, pages) + earlier_code(root, pages)

    report = check(root, strict=strict, jobs=jobs, traced=traced)
    stored = store_problems(root)  # lines of results/ that verify and build skip
    report.problems = sorted(report.problems + [p._replace(severity="error") if strict else p for p in stored]
                             + config_problems(root))
    return report
