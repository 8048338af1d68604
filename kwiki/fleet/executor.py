"""The pipeline's Executor on a Ray cluster, for one GPU model: builds as CPU tasks, each run a task on one whole GPU.

A run asks Ray for one GPU and one unit of the model's resource, so it lands only on that model and no other run
shares its GPU meanwhile; the artifacts a claim compares go in one task (one GPU, one run). Runs are not retried: a
worker that dies gives its artifacts a `crash` outcome, a task past its time limit is cancelled (its worker killed)
and gives `timeout`; the other tasks go on. Outcomes and logs come back to the driver, which writes them where a
local run does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kwiki.fleet import tasks
from kwiki.fleet.cluster import GpuKind
from kwiki.results.gpu import Gpu
from kwiki.verify.build import BUILD_DIR
from kwiki.verify.env import Environment
from kwiki.verify.executor import RunStage
from kwiki.verify.types import BuildResult, Plan, PlannedArtifact, RunOutcome
from kwiki.wiki.buildline import BuildJob

TASK_MARGIN_S = 120.0  # a task's limit beyond its manifests' own timeouts: worker start, tree unpacking, the lock


def groups(plan: Plan, runnable: list[PlannedArtifact]) -> list[list[PlannedArtifact]]:
    """`runnable` split into the sets a claim's figures join (`of` and `per` of two artifacts): each set runs in
    one task, on one GPU, in one run. In path order."""
    parent = {a.path: a.path for a in runnable}

    def find(p: str) -> str:
        while parent[p] != p:
            p = parent[p]
        return p

    for page in plan.pages:
        meta = page.meta
        if meta is None:
            continue
        for claim in meta.claims:
            m = claim.measure
            if m is None:
                continue
            keys = {m.artifact, m.of.artifact or m.artifact, *([m.per.artifact or m.artifact] if m.per else [])}
            paths = sorted({meta.artifacts[k].rstrip("/") for k in keys if k in meta.artifacts} & set(parent))
            for p in paths[1:]:
                parent[find(p)] = find(paths[0])
    out: dict[str, list[PlannedArtifact]] = {}
    for a in runnable:
        out.setdefault(find(a.path), []).append(a)
    return [out[k] for k in sorted(out)]


def other_models(plan: Plan) -> list[tuple[PlannedArtifact, set[str]]]:
    """The planned artifacts every claim of which (on the selected pages) names a GPU model other than the plan's:
    a claim naming a model runs only on that model, so these are not run here (each with the models named)."""
    name = plan.gpu.name.lower() if plan.gpu else ""
    named: dict[str, set[str]] = {}
    free: set[str] = set()
    for page in plan.pages:
        meta = page.meta
        if meta is None:
            continue
        for claim in meta.claims:
            m = claim.measure
            if m is None:
                continue
            keys = {m.artifact, m.of.artifact or m.artifact, *([m.per.artifact or m.artifact] if m.per else [])}
            for path in {meta.artifacts[k].rstrip("/") for k in keys if k in meta.artifacts}:
                model = claim.conditions.gpu
                if model is None or model.lower() in name:
                    free.add(path)
                else:
                    named.setdefault(path, set()).add(model)
    return [(a, named[a.path]) for a in sorted(plan.artifacts.values(), key=lambda a: a.path)
            if a.run_target and a.path in named and a.path not in free]


def limit_s(group: list[PlannedArtifact], margin_s: float = TASK_MARGIN_S) -> float:
    """A task's time limit: the sum of its runs' own timeouts (each variant run alone at its own), plus `margin_s`."""
    total = 0.0
    for a in group:
        assert a.manifest is not None
        if a.manifest.kind == "python":
            total += a.manifest.run.timeout_s
            continue
        total += a.manifest.run.timeout_s if a.run_variants else 0.0
        for name in a.isolated:
            v = a.manifest.variant(name)
            total += v.timeout_s if v is not None and v.timeout_s else a.manifest.run.timeout_s
    return total + margin_s


def failed(a: PlannedArtifact, status: str, message: str) -> RunOutcome:
    """The outcome of an artifact whose task never returned."""
    assert a.run_target is not None
    return RunOutcome(a.name, a.run_target, [*a.run_variants, *a.isolated], "crash" if status == "crash" else "timeout",
                      message=message)


@dataclasses.dataclass
class RayExecutor:
    """kwiki.verify.executor.Executor on the attached cluster, for the GPUs of one model."""

    kind: GpuKind
    gpu: Gpu  # the plan's GPU: the model's, as a probe task's NVML saw it (or as the nodes advertise it)
    driver: str | None
    cuda: str | None
    root: Path
    shipped: Any  # the ObjectRef of tasks.pack_tree's bytes
    digest: str
    task_timeout_s: float | None = None  # every run task's limit (default: limit_s of its artifacts)
    margin_s: float = TASK_MARGIN_S

    def environment(self, local: Environment) -> Environment:
        return dataclasses.replace(local, gpus=[self.gpu], driver=self.driver, cuda=self.cuda, gpu_error=None)

    def build_one(self, job: BuildJob, root: Path, nvcc: str | None, nvcc_version: str | None, cxx: str | None,
                  started: Callable[[BuildJob], None] | None = None) -> BuildResult:
        import ray

        if started is not None:
            started(job)
        task = ray.remote(tasks.build_task).options(num_cpus=1, max_retries=1)
        ref = task.remote(self.shipped, self.digest, job, str(job.directory.relative_to(root)))
        limit = job.manifest.build.timeout_s + self.margin_s
        try:
            result, data = ray.get(ref, timeout=limit)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            return BuildResult(job.artifact, job.target, False, False, "", error=f"the Ray build task did not "
                               f"finish within {limit:g} s; cancelled")
        except ray.exceptions.RayError as exc:
            return BuildResult(job.artifact, job.target, False, False, "",
                               error=f"the Ray build task failed: {_first_line(exc)}")
        if data is not None and result.binary is not None:
            tasks.unpack(data, root / Path(result.binary).parent)
        return dataclasses.replace(result, binary=tasks.rebased(result.binary, root),
                                   log=tasks.rebased(result.log, root))

    def run_stage(self, plan: Plan, builds: list[BuildResult], root: Path, run_id: str,
                  progress: Callable[[str], None]) -> RunStage:
        import ray

        by_key = {(b.artifact, b.target): b for b in builds}
        for a, models in other_models(plan):
            a.run_target, a.why_not_run = None, f"its claims name only {', '.join(sorted(models))}; this run is on " \
                                                f"{plan.gpu.name if plan.gpu else '?'}"
            progress(f"not run on this model: {a.name}: {a.why_not_run}")
        runnable = [a for a in sorted(plan.artifacts.values(), key=lambda a: a.path)
                    if a.run_target and a.manifest and (a.build_name, a.run_target) in by_key
                    and by_key[(a.build_name, a.run_target)].ok]
        todo = groups(plan, runnable)
        task = ray.remote(tasks.run_task).options(num_gpus=1, num_cpus=1, resources=self.kind.resources(),
                                                  max_retries=0)
        outcomes: dict[str, list[RunOutcome]] = {}
        pending: dict[Any, tuple[list[PlannedArtifact], float, float]] = {}  # ref -> (group, start, limit)
        t0 = time.monotonic()
        while todo or pending:
            while todo and len(pending) < self.kind.count:  # queued tasks would start their clocks too early
                group = todo.pop(0)
                built = [by_key[(a.build_name, a.run_target or "")] for a in group]
                folders = {str(Path(b.binary).parent.relative_to(root)): tasks.pack(Path(b.binary).parent)
                           for b in built if b.binary and Path(b.binary).parent.is_relative_to(root / BUILD_DIR)}
                rel = [dataclasses.replace(b, binary=tasks.relative(b.binary, root), log=tasks.relative(b.log, root))
                       for b in built]
                limit = self.task_timeout_s or limit_s(group, self.margin_s)
                progress(f"run task {', '.join(a.name for a in group)} on a {self.kind.model} "
                         f"(limit {limit:g} s)")
                ref = task.remote(self.shipped, self.digest, group, rel, folders, run_id)
                pending[ref] = (group, time.monotonic(), limit)
            soonest = min(start + limit for _, start, limit in pending.values())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, soonest - time.monotonic()))
            for ref in ready:
                group, _, _ = pending.pop(ref)
                self._collect(ref, group, outcomes, root, progress)
            for ref, (group, start, limit) in list(pending.items()):
                if time.monotonic() - start >= limit:
                    ray.cancel(ref, force=True)
                    pending.pop(ref)
                    for a in group:
                        outcomes[a.path] = [failed(a, "timeout", f"the Ray task did not finish within {limit:g} s; "
                                                                 "cancelled (its worker killed)")]
                        progress(f"    timeout: {a.name}: {outcomes[a.path][0].message}")
        return outcomes, time.monotonic() - t0, len(runnable)

    def _collect(self, ref: Any, group: list[PlannedArtifact], outcomes: dict[str, list[RunOutcome]], root: Path,
                 progress: Callable[[str], None]) -> None:
        """One finished task's outcomes and logs, written where a local run writes them; a task that died gives
        each of its artifacts a `crash` outcome."""
        import ray

        try:
            results, logs, uuid = ray.get(ref)
        except ray.exceptions.RayError as exc:
            why = f"the Ray task died mid-run ({type(exc).__name__}: {_first_line(exc)}); not retried"
            for a in group:
                outcomes[a.path] = [failed(a, "crash", why)]
                progress(f"    crash: {a.name}: {why}")
            return
        for rel, data in logs.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for path, outs in results:
            outcomes[path] = outs
            for o in outs:
                progress(f"    {o.status}: {o.artifact}: {len(o.records)} records in {o.seconds:.1f} s"
                         + (f" on {uuid}" if uuid else "") + (f" ({o.message})" if o.message else ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]
