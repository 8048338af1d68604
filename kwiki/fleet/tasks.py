"""What a Ray worker runs for kwiki: a build (a CPU task), a probe of its GPU, an artifact's run (a GPU task).

Each works in the worker's copy of the repository's `artifacts/` (shipped once per run through Ray's object store,
unpacked once per node) and returns plain values:
a build returns its result and its build folder packed, a run its outcomes and the text of its logs, with every
path relative to the tree, so the driver puts them where a local build and run put them.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import shutil
import tarfile
from pathlib import Path

from kwiki.results.gpu import Gpu
from kwiki.verify.types import BuildResult, PlannedArtifact, RunOutcome
from kwiki.wiki.buildline import BuildJob

log = logging.getLogger(__name__)


def relative(path: str | None, root: Path) -> str | None:
    """`path` relative to `root` where it lies under it (as posix), else as given."""
    if path is None:
        return None
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path


def rebased(path: str | None, root: Path) -> str | None:
    """A path `relative` gave back, under `root` again (absolute paths stay)."""
    return None if path is None or Path(path).is_absolute() else str(root / path)


def pack(folder: Path) -> bytes:
    """A build folder (binary, build.json, build.log) as an uncompressed tar, names relative to the folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(folder.iterdir()):
            if p.is_file() and not p.is_symlink():
                tar.add(p, arcname=p.name, recursive=False)
    return buf.getvalue()


def unpack(data: bytes, folder: Path) -> None:
    """The inverse of `pack`, into `folder` (replaced); only plain files, by name."""
    staging = folder.with_name(folder.name + f".fleet{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(staging, filter="data")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


SHIPPED = "artifacts"  # what of the repository a task gets: the artifacts and their shared code
TREES = "kwiki-fleet"  # the trees tasks work in, one per content digest, under the worker's temporary folder


def pack_tree(root: Path) -> tuple[bytes, str]:
    """The repository's `artifacts/` (sources only: no build outputs, caches or links) as a tar, and its digest."""
    import hashlib

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        base = root / SHIPPED
        for p in sorted(base.rglob("*")) if base.is_dir() else []:
            rel = p.relative_to(root)
            if p.is_symlink() or any(part in ("__pycache__", ".kwiki") for part in rel.parts):
                continue
            if p.is_file():
                tar.add(p, arcname=rel.as_posix(), recursive=False)
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()[:16]


def tree(data: bytes, digest: str) -> Path:
    """The worker's copy of the shipped tree of this digest, unpacked once per node (under a lock)."""
    import tempfile

    from kwiki.core import lock

    root = Path(tempfile.gettempdir()) / TREES / digest
    if (root / ".complete").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with lock.hold(root.parent / f"{digest}.lock"):
        if not (root / ".complete").is_file():
            root.mkdir(exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                tar.extractall(root, filter="data")
            (root / ".complete").write_text(digest)
    return root


def build_task(shipped: bytes, digest: str, job: BuildJob, rel_dir: str) -> tuple[BuildResult, bytes | None]:
    """Build one job in this worker's tree with this worker's compilers: the result (paths relative to the tree)
    and its build folder packed, when it lies under the tree."""
    from kwiki.verify.env import find_nvcc, nvcc_version
    from kwiki.verify.pipeline import build_by_kind

    root = tree(shipped, digest)
    job = dataclasses.replace(job, directory=root / rel_dir)
    nvcc = find_nvcc()
    result = build_by_kind(job, root, nvcc, nvcc_version(nvcc), shutil.which("c++") or shutil.which("g++"), None)
    folder = Path(result.binary).parent if result.ok and result.binary else None
    data = pack(folder) if folder is not None and relative(str(folder), root) != str(folder) else None
    return dataclasses.replace(result, binary=relative(result.binary, root), log=relative(result.log, root)), data


RunTaskResult = tuple[list[tuple[str, list[RunOutcome]]], dict[str, bytes], str | None]  # outcomes, logs, GPU UUID


def gpu_here() -> tuple[Gpu | None, str | None, str | None, int | None]:
    """The GPU Ray gave this task (NVML's view of it, where NVML sees it), the driver, CUDA, and its index."""
    import ray

    from kwiki.verify.env import nvml_gpus

    ids = ray.get_gpu_ids()
    index = int(ids[0]) if ids and str(ids[0]).isdigit() else None
    gpus, driver, cuda, _ = nvml_gpus()
    gpu = next((g for g in gpus if g.index == index), None)
    return gpu, driver, cuda, index


def probe_task() -> tuple[Gpu | None, str | None, str | None]:
    """What the GPU of this task is (None where NVML sees no GPU: a cluster of logical GPUs)."""
    gpu, driver, cuda, _ = gpu_here()
    return gpu, driver, cuda


def run_task(shipped: bytes, digest: str, planned: list[PlannedArtifact], builds: list[BuildResult],
             folders: dict[str, bytes], run_id: str) -> RunTaskResult:
    """Run `planned` (artifacts a claim compares: one GPU, one run), one after another, on the GPU Ray gave this
    task, under its GPU lock: each artifact's outcomes, the logs they name (relative path -> bytes), the GPU's UUID.

    `builds[i]` is what `planned[i]` runs; `folders` maps a build folder (relative) to its packed files."""
    from kwiki.verify.pipeline import run_by_kind
    from kwiki.verify.run import gpu_lock

    root = tree(shipped, digest)
    for rel, data in folders.items():
        unpack(data, root / rel)
    gpu, _, _, index = gpu_here()
    out: list[tuple[str, list[RunOutcome]]] = []
    logs: dict[str, bytes] = {}
    with gpu_lock(gpu, root, log.info):  # other kwiki processes on this node keep off the GPU meanwhile
        for a, build in zip(planned, builds, strict=True):
            a = _rebase_artifact(a, root)
            build = dataclasses.replace(build, binary=rebased(build.binary, root), log=rebased(build.log, root))
            outcomes = run_by_kind(a, build, gpu_index=index, root=root, run_id=run_id)
            for o in outcomes:
                if o.log and (root / o.log).is_file():
                    logs[o.log] = (root / o.log).read_bytes()
            out.append((a.path, outcomes))
    return out, logs, gpu.uuid if gpu else None


def _rebase_artifact(a: PlannedArtifact, root: Path) -> PlannedArtifact:
    owner = _rebase_artifact(a.binary_of, root) if a.binary_of is not None else None
    return dataclasses.replace(a, directory=root / a.path, binary_of=owner)
