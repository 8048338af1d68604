""""Did you mean": the known names closest to a name that is not known (ids, tags, page types)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from difflib import SequenceMatcher


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` known names like `name`: those containing it (or contained in it) first, shortest
    first, then the closest by `difflib` (so `gemv` finds `kernel-gemv-bf16`, `tma-multcast` finds
    `technique-tma-multicast`, `kernal` finds `kernel`)."""
    import difflib

    word = name.strip().lower()
    if not word:
        return []
    names = sorted(set(known))
    lowered = {k: k.lower() for k in names}
    contains = sorted((k for k in names if word in lowered[k] or (len(lowered[k]) >= 3 and lowered[k] in word)),
                      key=lambda k: (len(k), k))
    scored = []
    for k in names:
        score = _similarity(word, lowered[k], difflib.SequenceMatcher)
        if score >= 0.6:
            scored.append((-score, k))
    out = list(dict.fromkeys([*contains, *(k for _, k in sorted(scored))]))
    return out[:n]


def _similarity(word: str, name: str, matcher: type[SequenceMatcher[str]]) -> float:
    """difflib's ratio, 0 when what follows a shared prefix is not alike: ids share prefixes such
    as 'technique-', which alone must not make 'technique-nope' look like 'technique-wgmma-pipeline'."""
    ratio = matcher(None, word, name).ratio()
    if ratio < 0.6:
        return 0.0
    k = 0
    while k < min(len(word), len(name)) and word[k] == name[k]:
        k += 1
    rest_a, rest_b = word[k:], name[k:]
    if max(len(rest_a), len(rest_b)) <= 3 or matcher(None, rest_a, rest_b).ratio() >= 0.5:
        return ratio
    return 0.0


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'a' or 'b'?)', or '' when nothing known is close."""
    names = close_names(name, known)
    if not names:
        return ""
    quoted = [repr(k) for k in names]
    choice = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f" (did you mean {choice}?)"
