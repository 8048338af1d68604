"""Every params of a Python artifact's GRID passes that artifact's own validation (`_validate`, where it has one).

On the H200 on 2026-12-02, gemm_epilogue_sm90a's third shape (K = 4040, not a multiple of 16) was refused by its
own `_validate` at run time: the process exited, and the claims of every variant it shared (the unfused chain and
torch.compile) read "error". A GRID its module refuses is a defect a CPU finds in milliseconds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
VALIDATED = sorted(p for p in ARTIFACTS.glob("*/*.py") if "def _validate(" in p.read_text(encoding="utf-8"))


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"grid_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the modules import torch and Triton inside functions only
    return mod


def test_some_artifacts_validate_their_params():
    assert len(VALIDATED) >= 4


@pytest.mark.parametrize("path", VALIDATED, ids=lambda p: p.parent.name)
def test_every_grid_params_passes_the_artifacts_own_validation(path):
    mod = _module(path)
    grid = getattr(mod, "GRID", None)
    if grid is None:
        pytest.skip(f"{path.name} is a helper module (no GRID)")
    refused = []
    for params in grid:
        try:
            mod._validate(dict(params))
        except ValueError as e:
            refused.append(str(e))
    assert not refused, "\n".join(refused)
