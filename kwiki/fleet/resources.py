"""`python -m kwiki.fleet.resources`: the Ray resources this node should advertise for its GPUs, as JSON.

`ray start --address=HEAD:6379 --num-gpus=8 --resources="$(python -m kwiki.fleet.resources)"`.
"""

from __future__ import annotations

import json
import sys

from kwiki.fleet.cluster import ARCH, MODEL
from kwiki.results.gpu import Gpu


def model_name(gpu_name: str) -> str:
    """'NVIDIA H200' -> 'H200', 'NVIDIA H100 80GB HBM3' -> 'H100-80GB-HBM3': a resource name without spaces."""
    return "-".join(gpu_name.removeprefix("NVIDIA ").split())


def node_resources(gpus: list[Gpu]) -> dict[str, int]:
    """One unit of `gpu_model:` and `gpu_arch:` per GPU (a node of one model; mixed nodes are refused by kinds())."""
    out: dict[str, int] = {}
    for gpu in gpus:
        for key in (f"{MODEL}{model_name(gpu.name)}", f"{ARCH}{gpu.arch}"):
            out[key] = out.get(key, 0) + 1
    return out


def main() -> int:
    from kwiki.verify.env import nvml_gpus

    gpus, _, _, error = nvml_gpus()
    if not gpus:
        sys.stderr.write(f"kwiki.fleet.resources: no GPU here ({error or 'NVML saw none'})\n")
        return 2
    sys.stdout.write(json.dumps(node_resources(gpus), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
