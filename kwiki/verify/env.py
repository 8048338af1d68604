"""The environment a verify run happens in: GPUs (through NVML), toolchain, repository state."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from kwiki import __version__
from kwiki.core.errors import EnvironmentProblem
from kwiki.results.gpu import Gpu

T = TypeVar("T")

_COMMIT_ID = re.compile(r"[0-9a-fA-F]{7,40}")


@dataclass
class Environment:
    gpus: list[Gpu]
    driver: str | None
    cuda: str | None
    nvcc: str | None  # 'release 13.0, V13.0.88'
    nvcc_path: str | None
    cxx_path: str | None
    commit: str | None
    dirty: bool | None
    kwiki: str = __version__
    gpu_error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# FP32 cores per SM, to turn NVML's core count into an SM count
_CORES_PER_SM = {70: 64, 75: 64, 80: 64, 86: 128, 87: 128, 89: 128, 90: 128, 100: 128, 103: 128, 120: 128}

_THROTTLE_NAMES = {
    0x1: "gpu-idle", 0x2: "app-clocks", 0x4: "sw-power-cap", 0x8: "hw-slowdown",
    0x20: "sw-thermal", 0x40: "hw-thermal", 0x80: "hw-power-brake",
}


def nvml_gpus() -> tuple[list[Gpu], str | None, str | None, str | None]:
    """GPUs seen by NVML, the driver version, the CUDA version the driver supports, an error."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return [], None, None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], None, None, f"NVML: {exc}"
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda_v = pynvml.nvmlSystemGetCudaDriverVersion()
        cuda = f"{cuda_v // 1000}.{(cuda_v % 1000) // 10}"
        gpus = [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        return gpus, driver, cuda, None
    finally:
        pynvml.nvmlShutdown()


def _nvml_gpu(pynvml: Any, i: int) -> Gpu:
    """GPU `i` as NVML describes it; the optional queries are None where the driver lacks them."""
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
    return Gpu(
        index=i,
        name=_text(pynvml.nvmlDeviceGetName(h)),
        uuid=_text(pynvml.nvmlDeviceGetUUID(h)),
        cc=major * 10 + minor,
        sm_count=_try(lambda: pynvml.nvmlDeviceGetNumGpuCores(h) // _CORES_PER_SM.get(major * 10 + minor, 128)),
        memory_gib=round(pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30, 1),
        sm_mhz=_try(lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
        sm_mhz_max=_try(lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
        throttle=_try(lambda: _reasons(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h))) or [],
    )


def clocks(index: int) -> dict[str, Any]:
    """Current SM clock and throttle reasons of one GPU (empty when NVML is missing)."""
    gpus, _, _, _ = nvml_gpus()
    for gpu in gpus:
        if gpu.index == index:
            return {"sm_mhz": gpu.sm_mhz, "throttle": gpu.throttle}
    return {}


def _reasons(mask: int) -> list[str]:
    return sorted(name for bit, name in _THROTTLE_NAMES.items() if mask & bit)


def _try(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - optional NVML queries differ between drivers
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvcc_version(nvcc: str | None) -> str | None:
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"release {m.group(1)}, {m.group(2)}" if m else out.strip().splitlines()[-1:][0] if out.strip() else None


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """(short commit, dirty) of the checkout; KWIKI_COMMIT / KWIKI_DIRTY=0|1 stand in where there is
    no .git (a copy of the tree sent to a GPU machine, a source tarball)."""
    if os.environ.get("KWIKI_COMMIT"):
        commit, dirty = os.environ["KWIKI_COMMIT"].strip(), os.environ.get("KWIKI_DIRTY", "0")
        # the commit goes into every record and run id: a placeholder or a branch name would be provenance
        # no reader can open, so anything but a hex commit id is refused before a kernel is built
        if not _COMMIT_ID.fullmatch(commit):
            raise EnvironmentProblem(f"KWIKI_COMMIT={commit!r} is not a commit id (7 to 40 hex digits): "
                                     "pass `git rev-parse --short=12 HEAD` of the checkout being measured")
        if dirty not in ("0", "1"):
            raise EnvironmentProblem(f"KWIKI_DIRTY={dirty!r} must be 0 or 1")
        return commit.lower(), dirty == "1"
    git = shutil.which("git")
    if not git:
        return None, None
    try:
        head = subprocess.run([git, "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=30)
        if head.returncode != 0:
            return None, None
        # what kwiki itself writes (pages' generated blocks, the results store) does not make the
        # measured code dirty: a second run right after a first one measures the same code
        status = subprocess.run([git, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                 ":(exclude)results", ":(exclude)wiki"], cwd=root,
                                capture_output=True, text=True, timeout=60)
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in ("/usr/local/cuda/bin/nvcc",):
        if Path(candidate).exists():
            return candidate
    return None


def capture(root: Path, want_gpu: bool = True) -> Environment:
    gpus, driver, cuda, err = nvml_gpus() if want_gpu else ([], None, None, "not asked for (--compile-only)")
    nvcc = find_nvcc()
    commit, dirty = git_state(root)
    return Environment(
        gpus=gpus, driver=driver, cuda=cuda, nvcc=nvcc_version(nvcc), nvcc_path=nvcc,
        cxx_path=shutil.which("c++") or shutil.which("g++"), commit=commit, dirty=dirty, gpu_error=err,
    )
