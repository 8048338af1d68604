"""Kernel names against a variant's `kernels:` globs (artifact.yaml): one matching rule for every stage.

A manifest names a variant's kernels as shell globs (fnmatch, case-sensitive) over demangled names. A
demangled name is long (`void ws_gemm<128, 4>(bf16 const*, ...)`, `(anonymous namespace)::k(float*)`),
so a glob matches a name when it matches any of its forms:

  full         the demangled name as the tools print it
  short        without the return type and the parameter list: `ws_gemm<128, 4>`, `(anonymous namespace)::k`
  unqualified  the short form without its namespaces and classes: `ws_gemm<128, 4>`, `k`

so `ws_gemm<*>`, `*ws_gemm*` and `void ws_gemm<128, 4>(*` all name the kernel above. A mangled or
extern "C" name is its own only form (`_Z*` globs match mangled names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

_RETURN = re.compile(r"^(?:void|int|unsigned|float|double|bool|auto)\s+")


def _close(text: str, i: int) -> int:
    """The index just past the bracket group that opens at text[i] ('(' or '<'), or len(text)."""
    pairs = {"(": ")", "<": ">"}
    depth = 0
    stack: list[str] = []
    for j in range(i, len(text)):
        c = text[j]
        if c in pairs:
            stack.append(pairs[c])
            depth += 1
        elif stack and c == stack[-1]:
            stack.pop()
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def short_name(name: str) -> str:
    """`void k<128>(float*, int)` -> `k<128>`; a name without a parameter list is returned as is."""
    text = _RETURN.sub("", name.strip(), count=1)
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            i = _close(text, i)
            continue
        if c == "(":
            if text.startswith("(anonymous namespace)", i):
                i += len("(anonymous namespace)")
                continue
            return text[:i].strip()
        i += 1
    return text


def unqualified(name: str) -> str:
    """The short name without its scopes: `ns::(anonymous namespace)::k<a::b>` -> `k<a::b>`."""
    text = short_name(name)
    i, last = 0, 0
    while i < len(text):
        if text[i] in "<(":
            if text.startswith("(anonymous namespace)", i):
                i += len("(anonymous namespace)")
                continue
            i = _close(text, i)
            continue
        if text.startswith("::", i):
            last = i + 2
            i += 2
            continue
        i += 1
    return text[last:]


def forms(name: str) -> tuple[str, ...]:
    """The forms of a kernel name a glob is tried against (distinct, full name first)."""
    out: list[str] = []
    for form in (name, short_name(name), unqualified(name)):
        if form and form not in out:
            out.append(form)
    return tuple(out)


def matches(pattern: str, name: str) -> bool:
    """Whether glob `pattern` names kernel `name` (any of its forms)."""
    return any(fnmatchcase(form, pattern) for form in forms(name))


def declared(name: str, patterns: Iterable[str]) -> bool:
    """Whether any of `patterns` names kernel `name`."""
    return any(matches(p, name) for p in patterns)


def prefilter(patterns: Iterable[str]) -> str | None:
    """A regular expression that every name a glob of `patterns` matches contains: the longest literal run of
    identifier characters of each glob, alternated (for a profiler's `--kernel-name regex:`, a superset that
    kwiki narrows with `matches` afterwards). None when a glob has no literal of 3 characters or more (`*`):
    then nothing may be filtered out."""
    parts = []
    for p in patterns:
        runs = re.findall(r"[A-Za-z0-9_]+", re.sub(r"\[[^\]]*\]", "*", p))
        longest = max(runs, key=len, default="")
        if len(longest) < 3:
            return None
        parts.append(longest)
    return "|".join(sorted(set(parts))) if parts else None
