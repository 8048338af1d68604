"""A Python artifact's module with its GRID replaced: what `kwiki verify --sanitize` gives the harness.

The harness (artifacts/common/kwiki_harness.py) runs every entry of a module's GRID, and a module's GRID holds
the shapes its claims measure (GiB copies, 8192^3 GEMMs): too large for compute-sanitizer, whose tools slow a
kernel by one to two orders of magnitude. The harness takes no shape option, and neither it nor an artifact's
module is edited for the sanitizer, so kwiki hands the harness this file instead of the module:

    KWIKI_SANITIZE_MODULE=<the artifact's module>  KWIKI_SANITIZE_GRID=<JSON list of params mappings>

It loads the artifact's module exactly as the harness would (the same module name, its folder first on the
import path, for its `kernels.py`), takes every public name of it, and sets GRID to the manifest's
`sanitize.params`. The module's own functions still see their own globals: only the harness reads this GRID.
The harness checks these entries as it checks any GRID (scalars, a dtype with a tolerance); the module's
`applies(name, params)` still says which variants run at each.

Loaded by path in the harness's Python (which need not have kwiki): it imports the standard library only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

MODULE_ENV = "KWIKI_SANITIZE_MODULE"
GRID_ENV = "KWIKI_SANITIZE_GRID"


def _load(path: Path) -> Any:
    """The artifact's module, loaded as kwiki_harness.load_module loads it (same name, its folder on the path)."""
    spec = importlib.util.spec_from_file_location(f"kwiki_artifact_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look a module up by name
    sys.path.insert(0, str(path.resolve().parent))
    spec.loader.exec_module(module)
    return module


def _grid(text: str) -> list[dict[str, Any]]:
    grid = json.loads(text)
    if not isinstance(grid, list) or not all(isinstance(p, dict) for p in grid):
        raise ValueError(f"${GRID_ENV} is not a JSON list of params mappings: {text[:200]!r}")
    return grid


_module = _load(Path(os.environ[MODULE_ENV]))
globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
GRID = _grid(os.environ[GRID_ENV])
