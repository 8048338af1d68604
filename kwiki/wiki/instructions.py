"""The SASS pattern language of a manifest's `sass:` expectations, and its matcher.

A SASS instruction is spelled OPCODE.MOD.MOD... (`LDG.E.NA.128.CONSTANT`, `HGMMA.64x256x16.F32.BF16`).
nvcc spells one PTX instruction several ways (a 16-byte load is `LDG.E.128`, `LDG.E.128.CONSTANT`,
`LDG.E.NA.128`, `LDG.E.EL.128`, `LDG.E.LTC256B.128`, ...), so a pattern names an opcode and the
modifiers an instruction must HAVE, never its whole spelling, and never a substring:

    LDG.128                 an LDG with the modifier 128, whatever else it has (E, NA, CONSTANT, ...)
    LDG.E.128               the same, also with E (the order of modifiers does not matter)
    HGMMA.F32.BF16          a bf16 wgmma with fp32 accumulators, any shape
    HGMMA.64x256x*.BF16     a glob inside one modifier: any K
    UTMALDG                 any tensor TMA load
    LDG.128 >= 8            at least 8 such instructions in the kernel's code (default: >= 1)
    HGMMA.BF16 == 4         exactly 4

One operand is spelled as a modifier, because it is the mechanism of a variant: the depth of a wgmma wait
(`wgmma.wait_group N`, SASS `WARPGROUP.DEPBAR.LE gsb0, 0xN`) reads `WARPGROUP.DEPBAR.LE.DEPTH<N>`, so
`WARPGROUP.DEPBAR.DEPTH1` proves a consumer that keeps one wgmma group in flight (kwiki.verify.sass). A
variant about register pressure bounds ptxas's choice with `max_registers` beside `require` and `forbid`.

Opcode and modifiers are case-sensitive, as cuobjdump prints them; `*`, `?` and `[...]` are shell
globs within one part (never across a dot). Counts are static: instructions in the code, not
executions. `LDG` never matches `LDGSTS` or `LDGDEPBAR` (the opcode is compared whole).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

_PART = r"[A-Za-z0-9_*?\[\]!]+"
_OPCODE = r"[A-Z0-9_*?\[\]!]+"  # SASS opcodes are capitals: 'ld.global' (PTX) is refused, not matched to nothing
_PATTERN = re.compile(rf"^(?P<opcode>{_OPCODE})(?P<mods>(?:\.{_PART})*)(?:\s*(?P<op>>=|==)\s*(?P<count>\d+))?$")


@dataclass(frozen=True)
class Pattern:
    """One parsed pattern: opcode glob, required modifier globs, and the count it asks for."""

    text: str
    opcode: str
    modifiers: tuple[str, ...]
    op: str = ">="  # '>=' or '=='
    count: int = 1

    def matches(self, spelling: str) -> bool:
        """Whether the instruction spelled `spelling` (e.g. 'LDG.E.NA.128') is one this pattern names."""
        return _matches(self.opcode, self.modifiers, spelling)

    def count_in(self, opcodes: dict[str, int]) -> int:
        """How many instructions of a kernel (spelling -> occurrences) this pattern matches."""
        if any(c in self.opcode for c in "*?[!"):
            return sum(n for spelling, n in opcodes.items() if self.matches(spelling))
        head = self.opcode + "."  # a literal opcode: only its own spellings can match
        return sum(n for spelling, n in opcodes.items()
                   if (spelling == self.opcode or spelling.startswith(head)) and self.matches(spelling))

    def holds(self, found: int) -> bool:
        return found == self.count if self.op == "==" else found >= self.count

    @property
    def wanted(self) -> str:
        """What a require pattern asks for, in words: 'at least 8' or 'exactly 4'."""
        return f"exactly {self.count}" if self.op == "==" else f"at least {self.count}"


def parse_pattern(text: str, *, counted: bool = True) -> Pattern:
    """Parse one pattern; ValueError says what is wrong. `counted` False (a forbid list) refuses a count."""
    m = _PATTERN.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a SASS pattern: OPCODE(.MODIFIER)* [>= N | == N], "
                         "e.g. 'LDG.E.128' or 'HGMMA.F32.BF16 >= 4' (SASS as cuobjdump -sass prints it, not PTX)")
    if m["op"] and not counted:
        raise ValueError(f"{text!r}: a forbidden instruction takes no count (any one of them fails)")
    count = int(m["count"]) if m["count"] else 1
    if m["op"] == ">=" and count == 0:
        raise ValueError(f"{text!r}: '>= 0' always holds; write the pattern under forbid to rule it out, or drop it")
    mods = tuple(p for p in m["mods"].split(".") if p)
    return Pattern(text.strip(), m["opcode"], mods, m["op"] or ">=", count)


@functools.lru_cache(maxsize=65536)  # a run asks the same few patterns of the same few spellings thousands of times
def _matches(opcode_glob: str, modifier_globs: tuple[str, ...], spelling: str) -> bool:
    opcode, mods = split_spelling(spelling)
    return fnmatchcase(opcode, opcode_glob) and all(any(fnmatchcase(m, want) for m in mods)
                                                    for want in modifier_globs)


@functools.lru_cache(maxsize=4096)
def split_spelling(spelling: str) -> tuple[str, frozenset[str]]:
    """'LDG.E.NA.128' -> ('LDG', {'E', 'NA', '128'})."""
    opcode, *mods = spelling.split(".")
    return opcode, frozenset(mods)
