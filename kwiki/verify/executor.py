"""Where a timed run's builds and runs happen, when not on this machine: the one hook the pipeline offers.

The pipeline (kwiki.verify.pipeline) plans, gates, judges and writes; an `Executor` only says which GPU the runs
land on, builds one job and runs the plan's artifacts, returning what a local build and run return. kwiki.fleet's
Ray backend (`kwiki verify --ray ADDRESS`) is one; without an executor the pipeline builds and runs here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kwiki.verify.env import Environment
from kwiki.verify.types import BuildResult, Plan, RunOutcome
from kwiki.wiki.buildline import BuildJob

RunStage = tuple[dict[str, list[RunOutcome]], float, int]  # outcomes by artifact path, run seconds, artifacts run


class Executor(Protocol):
    """A backend for one GPU model: its environment (the GPU the plan is made for), one build, and the run stage."""

    def environment(self, local: Environment) -> Environment:
        """This machine's environment with the GPUs, driver and CUDA of the machines the runs land on."""
        ...

    def build_one(self, job: BuildJob, root: Path, nvcc: str | None, nvcc_version: str | None, cxx: str | None,
                  started: Callable[[BuildJob], None] | None = None) -> BuildResult:
        """One job's build (a BuildOne): its binary is under `root` afterwards, as a local build leaves it."""
        ...

    def run_stage(self, plan: Plan, builds: list[BuildResult], root: Path, run_id: str,
                  progress: Callable[[str], None]) -> RunStage:
        """Every runnable artifact's outcomes, with its logs under `root`, as the local run stage returns them."""
        ...
