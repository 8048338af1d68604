"""Front-matter fields whose rules are plain functions, shared by the page model and the index.

`kwiki.wiki.model` validates every field with pydantic; the rules of a few simple fields are
written here as plain functions, which the model's validators call, so the index
(`kwiki/agents/index.py`) can re-index the most common edits of a page (its title, summary or
tags) without importing pydantic, which costs a query about 200 ms.

`SIMPLE` maps each such field to a function that returns the value the model would store,
or raises `Unsure` whenever the value is anything but plainly valid: the index then reads
the page with the model, which reports what is wrong. A test checks, on random values,
that whatever these functions accept, the model accepts and stores the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_TAG_WORD = re.compile(r"[a-z0-9+#.*/]+(?:-[a-z0-9+#.*/]+)*")


def tag(value: object) -> str:
    """A tag as the model stores it: lower-case, runs of spaces and '_' made '-'."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a tag must be a non-empty string, not {value!r}")
    out = re.sub(r"[\s_]+", "-", value.strip().lower())
    if not _TAG_WORD.fullmatch(out):
        raise ValueError(f"tag {value!r} has characters other than letters, digits and '-'")
    return out


def unique(items: list[T]) -> list[T]:
    """`items` without repeats, first occurrence kept; linear time (a page may list 200,000 tags)."""
    try:
        return list(dict.fromkeys(items))
    except TypeError:  # an unhashable item: the slow way, only for values that are not plain tags
        seen: list[T] = []
        for item in items:
            if item not in seen:
                seen.append(item)
        return seen


class Unsure(Exception):
    """The plain rules cannot vouch for a value: let the page model validate the page."""


def _title(value: Any) -> str:
    # the model strips whitespace, then wants one character; accept only what stripping keeps as is
    if isinstance(value, str) and value and value == value.strip():
        return value
    raise Unsure


def _summary(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Unsure


def _tags(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value  # a lone tag, as the model's `_lists` allows
    if not isinstance(items, list):
        raise Unsure
    try:
        return unique([tag(item) for item in items])
    except ValueError:
        raise Unsure from None


# field -> (normalize, required): what a simple edit may change
SIMPLE: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "title": (_title, True),
    "summary": (_summary, False),
    "tags": (_tags, False),
}
