"""A Ray cluster as kwiki sees it: an address that must answer, and the GPU models its nodes advertise.

A node says what GPUs it has through custom resources, one unit per GPU: `gpu_model:<MODEL>` and
`gpu_arch:<sm_XY>` (`ray start --num-gpus=8 --resources='{"gpu_model:H200": 8, "gpu_arch:sm_90": 8}'`;
`python -m kwiki.fleet.resources` prints them for the GPUs NVML sees). A run asks for one whole GPU and one unit of
its model, so it lands only on that model, and Ray's GPU accounting keeps two runs off one GPU.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kwiki.core.arch import parse_arch
from kwiki.core.errors import EnvironmentProblem

MODEL = "gpu_model:"
ARCH = "gpu_arch:"
CONNECT_TIMEOUT_S = 15.0  # the address must accept a connection, then Ray must attach, each within this
GCS_PORT = 6379  # `ray start --head`'s default
CLIENT_PORT = 10001  # ray:// (Ray Client)
HOW = ("each node advertises its GPUs as resources, one unit per GPU: ray start ... --num-gpus=N "
       "--resources='{\"gpu_model:H200\": N, \"gpu_arch:sm_90\": N}' (python -m kwiki.fleet.resources prints them)")


@dataclass(frozen=True)
class GpuKind:
    """One GPU model of the cluster: its name as nodes advertise it, its architecture and how many GPUs have it."""

    model: str
    arch: str  # 'sm_90'
    count: int

    @property
    def cc(self) -> int:
        return parse_arch(self.arch).cc

    def resources(self) -> dict[str, float]:
        """What a run asks for beside one whole GPU: one unit of this model (and so of nothing else)."""
        return {f"{MODEL}{self.model}": 1.0}


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT`, `HOST` (the GCS port) or `ray://HOST[:PORT]` (Ray Client)."""
    client = address.startswith("ray://")
    rest = address.removeprefix("ray://")
    m = re.fullmatch(r"\[?([^\]\s/]+?)\]?(?::(\d{1,5}))?/?", rest)
    if not m:
        raise EnvironmentProblem(f"--ray {address}: not an address (HOST:PORT, or ray://HOST:PORT)")
    return m.group(1), int(m.group(2) or (CLIENT_PORT if client else GCS_PORT))


def answers(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise EnvironmentProblem unless something accepts a TCP connection at `address` within `timeout_s`."""
    host, port = split_address(address)
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise EnvironmentProblem(
            f"--ray {address}: no Ray cluster answers at {host}:{port} ({why}, after "
            f"{time.monotonic() - t0:.1f} s); start one with `ray start --head` there, or give its address") from None


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """Attach this process to the cluster at `address` as a Ray driver, within `timeout_s` (after the address has
    answered). True when this call attached (the caller detaches), False when this process was already attached
    to that cluster (a test's local cluster)."""
    import kwiki

    try:
        import ray
    except ImportError:
        raise EnvironmentProblem("--ray needs Ray: pip install 'kwiki[fleet]'") from None
    answers(address, timeout_s)
    if ray.is_initialized():
        here = ray.get_runtime_context().gcs_address
        if here == address:
            return False
        raise EnvironmentProblem(f"--ray {address}: this process is attached to another cluster ({here})")
    failed: list[BaseException] = []

    def attach() -> None:
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False,
                     runtime_env={"py_modules": [str(Path(kwiki.__file__).parent)]})  # this kwiki, on every node
        except Exception as exc:  # noqa: BLE001 - whatever Ray raises is reported as the address's problem
            failed.append(exc)

    thread = threading.Thread(target=attach, daemon=True, name="kwiki-ray-connect")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise EnvironmentProblem(f"--ray {address}: the address answers, but no Ray cluster attached within "
                                 f"{timeout_s:g} s (is it a Ray head's GCS port?)")
    if failed:
        first = str(failed[0]).strip().splitlines()[0][:300] if str(failed[0]).strip() else type(failed[0]).__name__
        raise EnvironmentProblem(f"--ray {address}: Ray could not attach: {first}")
    return True


def kinds(nodes: list[dict[str, Any]]) -> list[GpuKind]:
    """The GPU models the live nodes advertise (`ray.nodes()`), each with its architecture and GPU count; a node
    whose model and architecture resources disagree in count, or name no architecture, is an error that names it."""
    found: dict[tuple[str, str], int] = {}
    for node in nodes:
        if not node.get("Alive", True):
            continue
        res: dict[str, float] = node.get("Resources", {})
        models = {k.removeprefix(MODEL): int(v) for k, v in res.items() if k.startswith(MODEL)}
        archs = {k.removeprefix(ARCH): int(v) for k, v in res.items() if k.startswith(ARCH)}
        if not models:
            continue
        where = f"node {node.get('NodeManagerAddress', '?')}"
        if len(models) != 1 or len(archs) != 1:
            raise EnvironmentProblem(f"{where}: resources: advertise one gpu_model and one gpu_arch per node "
                                     f"(found {sorted(models)} and {sorted(archs)}); {HOW}")
        (model, n), (arch, m) = next(iter(models.items())), next(iter(archs.items()))
        try:
            parse_arch(arch)
        except ValueError as exc:
            raise EnvironmentProblem(f"{where}: resources: {ARCH}{arch}: {exc}") from None
        gpus = int(res.get("GPU", 0))
        if n != m or n > gpus:
            raise EnvironmentProblem(f"{where}: resources: {MODEL}{model} x{n}, {ARCH}{arch} x{m} and GPU x{gpus} "
                                     "must agree (one unit of each per GPU)")
        found[(model, arch)] = found.get((model, arch), 0) + n
    return [GpuKind(model, arch, n) for (model, arch), n in sorted(found.items())]


def cluster_kinds(address: str) -> list[GpuKind]:
    """The attached cluster's GPU models; none is an error that says how a lab advertises them."""
    import ray

    found = kinds(ray.nodes())  # type: ignore[no-untyped-call]  # ray.nodes() has no annotations
    if not found:
        raise EnvironmentProblem(f"--ray {address}: the cluster advertises no GPU model (no node has a "
                                 f"'{MODEL}*' resource); {HOW}")
    return found
