"""Plan a verify run: selected pages -> their artifacts -> builds and runs on this machine."""

from __future__ import annotations

import os
from pathlib import Path

from kwiki.core.arch import compatible, parse_arch
from kwiki.core.errors import ManifestError, Problem, UsageError
from kwiki.core.paths import inside
from kwiki.results.gpu import Gpu
from kwiki.verify.build import BuildJob, artifact_hash
from kwiki.verify.env import Environment
from kwiki.verify.types import Plan, PlannedArtifact
from kwiki.wiki.catalog import Wiki
from kwiki.wiki.manifest import HOST, MANIFEST, Manifest, load_manifest
from kwiki.wiki.pages import Page


def _norm(rel: str) -> str:
    return rel.rstrip("/")


def select_pages(wiki: Wiki, ids: list[str], tags: list[str], arch: str | None) -> list[Page]:
    """The valid pages the command line names; a usage error when an id or tag is unknown, or when
    the selection is empty (a run that verifies nothing must not say "ok")."""
    from kwiki.core.suggest import did_you_mean
    from kwiki.wiki.fields import tag as normalize_tag

    by_id = wiki.by_id
    for i in ids:
        if i not in by_id:
            raise UsageError(f"no page has id {i!r}{did_you_mean(i, by_id)}")
    if arch:
        try:
            parse_arch(arch)
        except ValueError as exc:
            raise UsageError(f"--arch: {exc}") from None
    valid = [p for p in wiki.pages if p.meta is not None]
    known = {t for p in valid if p.meta is not None for t in p.meta.tags}
    wanted = []
    for given in tags:
        try:
            name = normalize_tag(given)
        except ValueError as exc:
            raise UsageError(f"--tag: {exc}") from None
        if name not in known:
            raise UsageError(f"--tag {given!r}: no page has this tag{did_you_mean(name, known)}")
        wanted.append(name)
    pages = [by_id[i] for i in ids] if ids else valid
    out = []
    for page in pages:
        meta = page.meta
        assert meta is not None
        if wanted and not all(t in meta.tags for t in wanted):
            continue
        if arch and not any(compatible(a, arch) for a in meta.architectures):
            continue
        out.append(page)
    if not out:
        asked = [*ids, *(f"--tag {t}" for t in tags), *([f"--arch {arch}"] if arch else [])]
        raise UsageError(f"no page matches {' '.join(asked)}: nothing to verify" if asked
                         else "no valid page under wiki/: nothing to verify ('kwiki check' lists what is wrong)")
    return out


def runnable_artifacts(page: Page, root: Path) -> list[str]:
    """The page's `artifacts` entries that are artifact directories (holding artifact.yaml) inside the repository."""
    assert page.meta is not None
    return [_norm(rel) for rel in page.meta.artifacts.values()
            if inside(root, rel, must_exist=False) is None and (root / rel / MANIFEST).is_file()]


def refused_artifacts(page: Page, root: Path) -> list[tuple[str, Problem]]:
    """The page's `artifacts` entries that break the containment rule, each with its located problem.

    Such an entry is never read, built or run, with or without --compile-only.
    """
    assert page.meta is not None
    out = []
    for key, rel in sorted(page.meta.artifacts.items()):
        why = inside(root, rel, must_exist=False)
        if why:
            out.append((_norm(rel), Problem(page.path, page.line_of("artifacts", key), f"artifacts.{key}",
                                            f"{why}; not built or run")))
    return out


def choose_target(manifest: Manifest, gpu: Gpu | None) -> str | None:
    """The target whose build runs here: the exact arch-specific one first, then generic ones."""
    if HOST in manifest.targets:
        return HOST
    if gpu is None:
        return None
    fits = [t for t in manifest.targets if parse_arch(t).runs_on(gpu.cc)]
    fits.sort(key=lambda t: (parse_arch(t).suffix == "a", parse_arch(t).cc), reverse=True)
    return fits[0] if fits else None


def plan(wiki: Wiki, pages: list[Page], env: Environment, *, compile_only: bool, gpu_index: int = 0) -> Plan:
    root = wiki.root
    gpu = None if compile_only else next((g for g in env.gpus if g.index == gpu_index), None)
    artifacts: dict[str, PlannedArtifact] = {}
    problems: list[Problem] = []
    for page in pages:
        for rel, problem in refused_artifacts(page, root):
            problems.append(problem)
            refused = artifacts.setdefault(rel, PlannedArtifact(
                rel, root, None, error=problem.message, why_not_run="outside the repository"))
            refused.pages.append(page.id or page.path)
        for rel in runnable_artifacts(page, root):
            if rel not in artifacts:
                artifacts[rel] = _plan_artifact(rel, root, env, gpu, compile_only)
            artifacts[rel].pages.append(page.id or page.path)
    builders: dict[str, PlannedArtifact] = {}
    for a in list(artifacts.values()):
        if a.manifest is not None and a.manifest.build.binary_of:
            _borrow(a, root, env, builders)
    owners = {a.path: a for a in artifacts.values() if not (a.manifest and a.manifest.build.binary_of)} | builders
    builds = [
        BuildJob(a.name, a.directory, a.manifest, target)
        for a in sorted(owners.values(), key=lambda a: a.path)
        if a.manifest is not None
        for target in a.manifest.targets
    ]
    planned = Plan(root, pages, artifacts, builds, gpu, compile_only, problems)
    _sustained(planned)
    return planned


def _sustained(plan: Plan) -> None:
    """Each artifact's variants that a claim selects in the sustained regime (its run gets --sustained)."""
    for page in plan.pages:
        if page.meta is None:
            continue
        for claim in page.meta.claims:
            m = claim.measure
            if m is None:
                continue
            for sel in m.selectors:
                if sel.regime != "sustained":
                    continue
                target = plan.artifact_for(page, m.key_of(sel))
                if target is not None and sel.variant not in target.sustained:
                    target.sustained.append(sel.variant)


def _borrow(a: PlannedArtifact, root: Path, env: Environment, builders: dict[str, PlannedArtifact]) -> None:
    """Point `a` at the artifact whose binary it runs (build.binary_of), planned as a build only."""
    assert a.manifest is not None and a.manifest.build.binary_of
    rel = Path(os.path.normpath(Path(a.path) / a.manifest.build.binary_of)).as_posix()
    why = inside(root, rel) or (None if (root / rel / MANIFEST).is_file() else f"{rel!r} has no {MANIFEST}")
    if why is None and rel not in builders:
        builders[rel] = _plan_artifact(rel, root, env, None, compile_only=True)
    owner = builders.get(rel)
    if why is None and owner is not None and owner.manifest is None:
        why = owner.error or "invalid manifest"
    if why is None and owner is not None and owner.manifest is not None:
        if owner.manifest.build.binary_of:
            why = f"{rel} borrows its binary too; binary_of must name an artifact that builds one"
        else:
            unknown = sorted({v.name for v in a.manifest.variants} - {v.name for v in owner.manifest.variants})
            missing = sorted(set(a.manifest.targets) - set(owner.manifest.targets))
            if unknown:
                why = f"variants {unknown} are not variants of {rel}"
            elif missing:
                why = f"targets {missing} are not built by {rel}"
    if why is not None:
        a.error = f"build.binary_of: {why}"
        a.problem = Problem(f"{a.path}/{MANIFEST}", 1, "build.binary_of", why)
        a.why_not_run = "its build.binary_of cannot be used"
        a.run_target = None
        return
    a.binary_of = owner
    a.hash = artifact_hash(a.directory, root, also=[owner.directory]) if owner is not None else a.hash


def _plan_artifact(rel: str, root: Path, env: Environment, gpu: Gpu | None, compile_only: bool) -> PlannedArtifact:
    directory = root / rel
    try:
        manifest = load_manifest(directory, root)
    except ManifestError as exc:
        return PlannedArtifact(rel, directory, None, error=str(exc), problem=exc.problem(),
                               why_not_run="invalid manifest")
    planned = PlannedArtifact(rel, directory, manifest, hash=artifact_hash(directory, root))
    target = choose_target(manifest, gpu)
    if compile_only:
        planned.why_not_run = "--compile-only"
    elif target is None and gpu is None:
        planned.why_not_run = f"no GPU here ({env.gpu_error})" if env.gpu_error else "no GPU here"
    elif target is None and gpu is not None:
        planned.why_not_run = f"{gpu.name} ({gpu.arch}) runs none of its targets {manifest.targets}"
    if planned.why_not_run or target is None:
        return planned
    planned.run_target = target
    runnable = set(manifest.variants_for(target))
    for v in manifest.variants:
        if v.name not in runnable:
            planned.not_applicable.append(v.name)
        elif v.isolated:
            planned.isolated.append(v.name)
        else:
            planned.run_variants.append(v.name)
    return planned
