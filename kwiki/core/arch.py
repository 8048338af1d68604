"""GPU architecture names: one canonical spelling, and which code runs on which GPU.

Canonical form is ``sm_<major><minor>[a|f]`` (``sm_90a``, ``sm_100a``, ``sm_80``).
Accepted spellings: ``sm90``, ``sm_90``, ``SM90a``, ``sm_90a``, ``90a``, ``compute_90a``.

Compatibility rule (used by ``kwiki query --arch`` and by ``kwiki verify`` to pick a build):

* code for an arch-specific target (``sm_90a``, suffix ``a``) runs only on GPUs of exactly
  that compute capability: ``sm_90a`` runs on sm_90 hardware (H100, H200); ``sm_100a`` does not;
* code for a family target (``sm_100f``) runs on the same major version with an equal or
  higher minor version;
* generic code (``sm_80``, no suffix) runs on its own and on every later compute capability.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# compute capabilities nvcc 13 knows, plus the ones older pages name
KNOWN_CC: frozenset[int] = frozenset(
    {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121}
)
SUFFIX_OK: dict[str, Callable[[int], bool]] = {"a": lambda cc: cc >= 90, "f": lambda cc: cc >= 100,
                                               "": lambda cc: True}

_PATTERN = re.compile(r"^(?:sm|compute)?_?(\d{2,3})([af]?)$")


class ArchError(ValueError):
    """A string that is not a known GPU architecture."""


@dataclass(frozen=True, order=True)
class Arch:
    cc: int
    suffix: str = ""

    @property
    def name(self) -> str:
        return f"sm_{self.cc}{self.suffix}"

    @property
    def major(self) -> int:
        return self.cc // 10

    def __str__(self) -> str:
        return self.name

    def runs_on(self, device_cc: int) -> bool:
        """Whether code built for this target runs on a GPU of compute capability `device_cc`."""
        if self.suffix == "a":
            return device_cc == self.cc
        if self.suffix == "f":
            return device_cc // 10 == self.major and device_cc >= self.cc
        return device_cc >= self.cc

    def gencode(self) -> str:
        """The nvcc flag that builds SASS for this target (and only this target)."""
        return f"-gencode=arch=compute_{self.cc}{self.suffix},code=sm_{self.cc}{self.suffix}"


def parse_arch(text: object) -> Arch:
    """Parse any accepted spelling; raise ArchError with a readable message otherwise."""
    if not isinstance(text, str):
        raise ArchError(f"{text!r} is not an architecture name (expected a string such as 'sm_90a')")
    m = _PATTERN.match(text.strip().lower())
    if not m:
        raise ArchError(f"{text!r} is not an architecture name (expected e.g. 'sm_90a', 'sm90', 'sm_100a')")
    cc, suffix = int(m.group(1)), m.group(2)
    if cc not in KNOWN_CC:
        raise ArchError(f"{text!r} is not a known architecture (known: sm_{', sm_'.join(map(str, sorted(KNOWN_CC)))})")
    if not SUFFIX_OK[suffix](cc):
        raise ArchError(f"{text!r}: suffix '{suffix}' does not exist for sm_{cc}")
    return Arch(cc, suffix)


def normalize_arch(text: object) -> str:
    return parse_arch(text).name


def device_arch(major: int, minor: int) -> int:
    """Compute capability of a device as the integer used here (9, 0 -> 90)."""
    return major * 10 + minor


def compatible(page_arch: str, query_arch: str) -> bool:
    """Whether a page written for `page_arch` applies to hardware named by `query_arch`.

    The query names hardware, so its suffix is ignored: ``--arch sm_90`` and ``--arch sm_90a``
    both mean an sm_90 GPU, and match pages for sm_90a, sm_90 and earlier generic targets.
    """
    return parse_arch(page_arch).runs_on(parse_arch(query_arch).cc)
