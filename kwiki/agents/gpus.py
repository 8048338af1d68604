"""GPU names as agents say them, as the architecture a query needs: 'H200', 'Hopper', 'sm_90a' -> sm_90.

A query names hardware (kwiki.core.arch.compatible ignores its suffix), so a product or family name maps to
the compute capability of its GPUs: H100, H200, GH200 and Hopper to sm_90; B200, B100, GB200 and
Blackwell to sm_100 (the datacenter Blackwell family); A100 and Ampere to sm_80; L4, L40 and Ada to
sm_89. Every spelling kwiki.core.arch accepts (sm_90, sm90, sm_90a, 90a) passes through unchanged.
"""

from __future__ import annotations

import re

ALIASES: dict[str, str] = {
    "h100": "sm_90", "h200": "sm_90", "h800": "sm_90", "h20": "sm_90", "gh200": "sm_90", "hopper": "sm_90",
    "b200": "sm_100", "b100": "sm_100", "gb200": "sm_100", "b300": "sm_103", "gb300": "sm_103",
    "blackwell": "sm_100",
    "a100": "sm_80", "a800": "sm_80", "a30": "sm_80", "ampere": "sm_80",
    "l4": "sm_89", "l40": "sm_89", "l40s": "sm_89", "ada": "sm_89", "rtx4090": "sm_89",
}
_NOISE = re.compile(r"^(?:nvidia)|(?:sxm\d*|pcie|nvl|\d+gb|gpu)$")


def hardware_arch(name: str) -> str:
    """The architecture `name` stands for: a GPU or family name (case, spaces, 'NVIDIA' and form factors such as
    'SXM' ignored: 'NVIDIA H200 SXM' -> 'sm_90'), else `name` as given, for kwiki.core.arch to parse."""
    words = [w for w in re.split(r"[\s_-]+", name.strip().lower()) if w and not _NOISE.fullmatch(w)]
    key = "".join(words)
    return ALIASES.get(key, name)
