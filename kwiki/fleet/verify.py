"""`kwiki verify --ray ADDRESS`: the pipeline once per GPU model of the cluster, its builds and runs there.

Each GPU model gets a run of its own (its own run id and store file, as a machine of that model would write),
made for the GPU a probe task finds on it. An artifact no GPU of the cluster can run is a located problem, never a
task Ray would wait on forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from kwiki.core.arch import parse_arch
from kwiki.core.errors import EnvironmentProblem, Problem
from kwiki.fleet import cluster, tasks
from kwiki.fleet.cluster import GpuKind
from kwiki.fleet.executor import TASK_MARGIN_S, RayExecutor
from kwiki.results.gpu import Gpu
from kwiki.verify.pipeline import Report, verify
from kwiki.verify.types import Options, Plan
from kwiki.wiki.manifest import HOST, MANIFEST

PROBE_TIMEOUT_S = 300.0  # a GPU of the model must come free for the probe within this
PROBE_RETRIES = 2  # Ray's retries of a probe whose worker died (system failures only: an exception is not retried)


def verify_on(root: Path, options: Options, address: str, progress: Callable[[str], None], *,
              connect_timeout_s: float = cluster.CONNECT_TIMEOUT_S, task_timeout_s: float | None = None,
              probe_timeout_s: float = PROBE_TIMEOUT_S) -> list[Report]:
    """One report per GPU model of the cluster at `address` (in model order)."""
    attached = cluster.connect(address, connect_timeout_s)
    try:
        import ray

        found = cluster.cluster_kinds(address)
        data, digest = tasks.pack_tree(root)
        shipped = ray.put(data)
        progress(f"cluster {address}: " + ", ".join(f"{k.model} ({k.arch}) x{k.count}" for k in found))
        reports = []
        for kind in found:
            gpu, driver, cuda = probe(kind, probe_timeout_s)
            progress(f"--- {kind.model}: {gpu.name} ({gpu.arch}), driver {driver or '?'}, CUDA {cuda or '?'}")
            # the runs spread over every GPU of the model: the rows name the model, not the probed board (each
            # task's progress line names the board it ran on)
            gpu = dataclasses.replace(gpu, uuid=None, index=0)
            executor = RayExecutor(kind, gpu, driver, cuda, root, shipped, digest, task_timeout_s=task_timeout_s,
                                   margin_s=TASK_MARGIN_S)
            reports.append(verify(root, options, progress, executor))
        if reports:
            reports[0].problems += unplaceable(reports[0].plan, found, address)
        return reports
    finally:
        if attached:
            import ray

            ray.shutdown()


def probe(kind: GpuKind, timeout_s: float) -> tuple[Gpu, str | None, str | None]:
    """The GPU a task of this model lands on, as its NVML sees it; a cluster of logical GPUs (no NVML there) gets
    a GPU named after the model. A GPU whose architecture is not the one its node advertises is an error."""
    import ray

    # a probe only reads NVML: a worker that died under it (a system failure, not an exception of the task; seen
    # under load on a 2-core CI machine) is retried, where a run task never is (its samples would be taken twice)
    task = ray.remote(tasks.probe_task).options(num_gpus=1, num_cpus=0, resources=kind.resources(),
                                                max_retries=PROBE_RETRIES)
    ref = task.remote()
    try:
        gpu, driver, cuda = ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        raise EnvironmentProblem(f"--ray: no {kind.model} GPU came free for a probe within {timeout_s:g} s") from None
    except ray.exceptions.RayError as exc:
        raise EnvironmentProblem(f"--ray: the probe of a {kind.model} GPU failed: {str(exc).strip()[:300]}") from None
    if gpu is None:
        return Gpu(index=0, name=f"NVIDIA {kind.model.replace('-', ' ')}", uuid=None, cc=kind.cc), driver, cuda
    if gpu.cc != kind.cc:
        raise EnvironmentProblem(f"--ray: a node advertises {cluster.MODEL}{kind.model} as {kind.arch}, but its GPU "
                                 f"is {gpu.name} ({gpu.arch}); fix the node's resources ({cluster.HOW})")
    return gpu, driver, cuda


def unplaceable(plan: Plan, found: list[GpuKind], address: str) -> list[Problem]:
    """A located error for each planned artifact that no GPU model of the cluster can run (it was not sent)."""
    have = ", ".join(f"{k.model} ({k.arch}) x{k.count}" for k in found)
    out = []
    for a in sorted(plan.artifacts.values(), key=lambda a: a.path):
        m = a.manifest
        if m is None or HOST in m.targets:
            continue
        if not any(parse_arch(t).runs_on(k.cc) for t in m.targets for k in found):
            out.append(Problem(f"{a.path}/{MANIFEST}", 1, "targets",
                               f"no GPU of the cluster at {address} runs any of {m.targets} (it has {have}); "
                               "not run"))
    return out
