"""`kwiki check`: validate pages and manifests; one located line per problem, or JSON."""

from __future__ import annotations

import argparse
import json

from kwiki.results.storelines import store_problems
from kwiki.wiki.catalog import find_root
from kwiki.wiki.check import check


def run(args: argparse.Namespace) -> int:
    # each measured figure of the pages against the results store (imported here: it imports pydantic)
    from kwiki.results.trace import check_pages

    root = find_root(args.root)
    report = check(root, strict=args.strict, traced=check_pages)
    stored = store_problems(root)  # lines of results/ that verify and build skip
    report.problems = sorted(report.problems + [p._replace(severity="error") if args.strict else p for p in stored])
    if args.json:
        print(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        for problem in report.problems:
            print(problem.format())
        errors, warnings = len(report.errors), len(report.problems) - len(report.errors)
        state = "ok" if report.ok else "FAILED"
        print(f"kwiki check: {state}: {report.pages} pages, {errors} errors, {warnings} warnings")
    return 0 if report.ok else 1
