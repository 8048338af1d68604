"""One ladder per artifact: which page owns an artifact's full ladder, and which rows the other pages show.

An artifact named by one page is that page's. Named by several, the page whose front matter lists its key
under `owns` has it; where none does, the page with the most claims that measure it (then the first page by
id), so a shared artifact always has exactly one owner. Every other page that names it shows only the rows
at the shapes its own claims select, and links to the owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kwiki.core.strict import Scalar
from kwiki.wiki.model import PageMeta


@dataclass(frozen=True)
class Owner:
    """The page that shows an artifact's full ladder: its id and its staged path."""

    page_id: str
    rel: str
    title: str


def rel_of(path: str) -> str:
    return path.rstrip("/")


def _measures(meta: PageMeta, rel: str) -> int:
    """How many of the page's claims read a figure of artifact `rel`."""
    keys = {k for k, v in meta.artifacts.items() if rel_of(v) == rel}
    return sum(1 for c in meta.claims if c.measure is not None and keys & {
        c.measure.artifact, c.measure.of.artifact or c.measure.artifact,
        *([c.measure.per.artifact or c.measure.artifact] if c.measure.per else [])})


def owners(pages: Iterable[tuple[PageMeta, str]]) -> dict[str, Owner]:
    """Artifact path (as the pages name it, no trailing '/') -> the page that owns its ladder; `pages` are
    (front matter, staged path) pairs."""
    naming: dict[str, list[tuple[PageMeta, str]]] = {}
    for meta, rel in pages:
        for path in {rel_of(p) for p in meta.artifacts.values()}:
            naming.setdefault(path, []).append((meta, rel))
    out = {}
    for path, named in naming.items():
        declared = [(m, r) for m, r in named if any(rel_of(m.artifacts[k]) == path for k in m.owns)]
        pool = declared or named
        meta, rel = min(pool, key=lambda mr: (-_measures(mr[0], path), mr[0].id))
        out[path] = Owner(meta.id, rel, meta.title)
    return out


def claimed_params(meta: PageMeta, rel: str) -> list[dict[str, Scalar]]:
    """The parameter sets the page's claims select from artifact `rel` (their `of` and `per`), in claim order."""
    keys = {k for k, v in meta.artifacts.items() if rel_of(v) == rel}
    out: list[dict[str, Scalar]] = []
    for c in meta.claims:
        m = c.measure
        if m is None:
            continue
        for sel in m.selectors:
            if m.key_of(sel) in keys and sel.params not in out:
                out.append(dict(sel.params))
    return out


def matches(params: Mapping[str, Scalar], wanted: Mapping[str, Scalar]) -> bool:
    """Whether a record's parameters hold every parameter a claim selects (compared as text: 4096 == '4096')."""
    return all(k in params and str(params[k]) == str(v) for k, v in wanted.items())
