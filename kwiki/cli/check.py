"""`kwiki check`: validate pages, manifests and the results store; one located line per problem, or JSON."""

from __future__ import annotations

import argparse
import json

from kwiki.results.check import check_tree
from kwiki.wiki.catalog import find_root


def run(args: argparse.Namespace) -> int:
    report = check_tree(find_root(args.root), strict=args.strict)
    if args.json:
        print(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        for problem in report.problems:
            print(problem.format())
        errors, warnings = len(report.errors), len(report.problems) - len(report.errors)
        state = "ok" if report.ok else "FAILED"
        print(f"kwiki check: {state}: {report.pages} pages, {errors} errors, {warnings} warnings")
    return 0 if report.ok else 1
