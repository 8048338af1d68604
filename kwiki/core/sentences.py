"""Text cut at a sentence's end: what a short view of a page's prose shows (the brief search hit, a skill's
description)."""

from __future__ import annotations


def lead(text: str, limit: int) -> str:
    """`text`, whitespace folded, cut at the last sentence end that fits in `limit` characters (a word end, with an
    ellipsis, if none does past a third of it)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("; "))
    if end > limit // 3:
        return cut[: end + 1]
    return cut[: cut.rfind(" ")].rstrip(",;:") + "..."
