"""`kwiki results merge`: another lab's results store in (kwiki.results.merge), and what it added."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def options(p: argparse.ArgumentParser) -> None:
    """The options of `kwiki results` (one subcommand, merge); kept here so `kwiki --help` imports nothing heavy."""
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    merge = sub.add_parser("merge", help="merge another lab's results/*.jsonl as an origin of its own, beside ours")
    merge.add_argument("files", nargs="+", metavar="FILE", help="store files (another checkout's results/*.jsonl)")
    merge.add_argument("--origin", required=True, metavar="NAME",
                       help="whose results these are (lower-case letters, digits, '-'): results/merged/NAME/")
    merge.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    merge.add_argument("--root", metavar="DIR", help="project root holding wiki/ (default: nearest from here)")


def run(args: argparse.Namespace) -> int:
    from kwiki import SCHEMA_VERSION
    from kwiki.results.merge import MergeError, merge
    from kwiki.wiki.catalog import find_root

    root = find_root(args.root)
    try:
        done = merge(root, args.origin, [Path(f) for f in args.files])
    except MergeError as exc:
        for problem in exc.problems:
            print(problem.format(), file=sys.stderr)
        print(f"kwiki results merge: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, **done.as_json()}, indent=2, sort_keys=True))
        return 0
    for rel, n in sorted(done.added.items()):
        print(f"{rel}: {n} rows added")
    print(f"kwiki results merge: {len(done.runs)} runs of {args.origin} merged, {done.already} rows already here"
          + "".join(f"; {rel} summarised to {s.bytes_after} bytes" for rel, s in sorted(done.summarised.items())))
    return 0
