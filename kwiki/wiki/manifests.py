"""Check the artifacts a page names: valid manifests, and claims that select existing variants."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kwiki.core.errors import ManifestError, Problem
from kwiki.core.paths import inside
from kwiki.wiki.manifest import MANIFEST, Manifest, load_manifest
from kwiki.wiki.pages import Page


@lru_cache(maxsize=256)
def _load(directory: Path, root: Path) -> Manifest | ManifestError:
    try:
        return load_manifest(directory, root)
    except ManifestError as exc:
        return exc


def check_manifests(page: Page, root: Path) -> list[Problem]:
    """Problems of the artifact directories a page names and of its claims' `measure` selectors."""
    meta = page.meta
    assert meta is not None
    out: list[Problem] = []
    manifests: dict[str, Manifest] = {}
    for key, rel in sorted(meta.artifacts.items()):
        directory = root / rel
        if inside(root, rel, must_exist=False) or not (directory / MANIFEST).is_file():
            continue  # check_artifacts reports a path that breaks the containment rule; it is not read
        loaded = _load(directory.resolve(), root.resolve())
        if isinstance(loaded, ManifestError):
            problem = loaded.problem()
            out.append(Problem(problem.path, problem.line, problem.field or MANIFEST, problem.message))
        else:
            manifests[key] = loaded
    for i, claim in enumerate(meta.claims):
        m = claim.measure
        if m is None:
            continue
        rel = meta.artifacts.get(m.artifact, "")
        where = page.line_of("claims", i, "measure")
        if m.artifact not in manifests:
            if not (root / rel / MANIFEST).is_file():
                out.append(Problem(page.path, where, f"claims[{i}].measure.artifact",
                                   f"{rel!r} is not an artifact directory (no {MANIFEST})"))
            continue
        names = {v.name for v in manifests[m.artifact].variants}
        for label, sel in (("of", m.of), ("per", m.per)):
            if sel is not None and sel.variant not in names:
                line = page.line_of("claims", i, "measure", label, "variant")
                out.append(Problem(page.path, line, f"claims[{i}].measure.{label}.variant",
                                   f"variant {sel.variant!r} is not in {rel}/{MANIFEST}"))
    return out
