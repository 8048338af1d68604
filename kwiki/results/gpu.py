"""A GPU a run measured on, as NVML named it (kwiki.verify.env reads it; the peaks and the site read it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str | None
    cc: int  # compute capability as 90 for 9.0
    sm_count: int | None = None
    memory_gib: float | None = None
    sm_mhz: int | None = None
    sm_mhz_max: int | None = None
    throttle: list[str] = field(default_factory=list)

    @property
    def arch(self) -> str:
        return f"sm_{self.cc}"
