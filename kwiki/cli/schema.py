"""`kwiki schema`: write (or check) the JSON Schema files generated from the models."""

from __future__ import annotations

import argparse
from pathlib import Path

from kwiki.agents.schema import stale, write
from kwiki.wiki.catalog import find_root


def run(args: argparse.Namespace) -> int:
    directory = Path(find_root(args.root)) / "schema"
    if args.check:
        old = stale(directory)
        for name in old:
            print(f"schema/{name}: stale; run 'kwiki schema'")
        return 1 if old else 0
    for name in write(directory):
        print(f"wrote schema/{name}")
    return 0
