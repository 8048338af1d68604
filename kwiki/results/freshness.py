"""The code a series measures, and figures of earlier code: the measured claims of a page whose series is not the
series its artifact's code would start now.

A series key (`<gpu model>/p<protocol>/<code>`, kwiki.verify.series) ends in `code_key`: a hash of the artifact's own
files, the headers they include, its build settings and the work its records declare. A measured claim names the
series its runs belong to; when the artifact's code is edited after those runs, the page still shows their figures
(they are true of the code they ran) until `kwiki verify` measures the new code. A reader, and above all an agent that
acts on a figure without doubting it, must see that the figure is of earlier code: `show`, `query`, the MCP tools,
`check` and the site say so per claim (kwiki.results.trace.PageTrace carries it), and no page state changes because
of it.

Only the claim's own artifact (`measure.artifact`) is compared: the page does not record the series of a
cross-artifact claim's other artifact. Nothing is built or run, and no GPU is needed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kwiki.core.errors import ManifestError, Problem
from kwiki.core.paths import COMMON_DIR, included_files, inside
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.wiki.manifest import MANIFEST, Manifest, load_manifest
from kwiki.wiki.model import Claim, PageMeta

HARNESS = ("kwiki_harness.py", "kwiki_bench.py")  # what checks and times a Python artifact (artifacts/common)


def code_key(directory: Path, manifest: Manifest, root: Path, builder: tuple[Path, Manifest] | None = None) -> str:
    """The code part of a series key: 12 hex digits over the files that make the artifact at `directory` (those of
    `builder`, the artifact whose binary it runs under build.binary_of, where it has one), the headers they include,
    the build settings and the FLOP dtypes its manifest declares."""
    build_dir, build_manifest = builder or (directory, manifest)
    b = build_manifest.build
    own = [build_dir / f for f in [*b.sources, *b.headers, *filter(None, [b.script])]]
    own += [directory / part for part in manifest.run.command if "{" not in part and (directory / part).is_file()]
    if manifest.kind == "python":  # its module's helpers beside it, and the harness that checks and times it
        own += [*sorted(directory.glob("*.py")), *(root / COMMON_DIR / f for f in HARNESS)]
    files = {*own, *included_files(own, [root / COMMON_DIR])}
    h = hashlib.sha256()
    h.update(json.dumps(b.model_dump(mode="json", exclude={"timeout_s"}), sort_keys=True).encode())
    if manifest.flops_dtypes:  # the work its records declare, where the manifest says it (without: as before)
        h.update(json.dumps(manifest.flops_dtypes, sort_keys=True).encode())
    for name, path in sorted((_name(p, root), p) for p in files):
        h.update(name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:12]


def _name(path: Path, root: Path) -> str:
    """The file's name in the hash: relative to the root, so every checkout of the tree agrees."""
    resolved, base = path.resolve(), root.resolve()
    return resolved.relative_to(base).as_posix() if resolved.is_relative_to(base) else resolved.name


def _resolve(root: Path, rel: str) -> tuple[Manifest, tuple[Path, Manifest] | None, str | None] | None:
    """The manifest of the artifact at `rel`, that of the artifact whose binary it runs (build.binary_of) with its
    directory and path; None where one cannot be read or is not inside the repository (`kwiki check` reports why):
    nothing outside the checkout is ever read."""
    if inside(root, rel) is not None:
        return None
    try:
        manifest = load_manifest(root / rel, root)
        if not manifest.build.binary_of:
            return manifest, None, None
        owner = Path(os.path.normpath(Path(rel) / manifest.build.binary_of)).as_posix()
        if inside(root, owner) is not None or not (root / owner / MANIFEST).is_file():
            return None
        return manifest, (root / owner, load_manifest(root / owner, root)), owner
    except ManifestError:
        return None


def current(root: Path, rel: str) -> str | None:
    """'p3/4f76b3678682': the protocol and code part of the series the artifact at `rel` would start now; None where
    its manifests cannot be read (`_resolve`)."""
    found = _resolve(root, rel)
    if found is None:
        return None
    manifest, builder, _ = found
    return f"p{PROTOCOL_VERSION}/{code_key(root / rel, manifest, root, builder)}"


def code_dirs(root: Path, meta: PageMeta) -> list[str]:
    """The artifact folders whose files a page's figures depend on: those its claims measure, and the folders of
    the artifacts whose binaries they run (the shared `artifacts/common` is everyone's, and not listed)."""
    own = {rel for claim in meta.claims if (rel := _measured(meta, claim))}
    owners = {found[2] for rel in own if (found := _resolve(root, rel)) is not None and found[2]}  # one read each
    return sorted(own | owners)


def _measured(meta: PageMeta, claim: Claim) -> str | None:
    """The path of the artifact a claim measures (its `measure.artifact`), or None."""
    rel = meta.artifacts.get(claim.measure.artifact) if claim.measure is not None else None
    return rel.rstrip("/") if rel else None


def _code(series: str) -> str:
    """'p3/c2f24cba3ea8' of 'nvidia-h200/p3/c2f24cba3ea8': a series without its GPU model."""
    return series.split("/", 1)[1] if series.count("/") >= 2 else series


def changed(root: Path, pages: list[tuple[str, PageMeta]], now: dict[str, str | None] | None = None
            ) -> dict[str, dict[str, str]]:
    """page path -> claim id -> why its figure is of earlier code, over (path, meta) of pages: every measured claim
    whose artifact's code (or the protocol) changed since the runs of its series. A page without a measurements
    block costs nothing; each artifact is hashed once (`now`, artifact path -> `current`, may carry the keys over
    from an earlier call while no file under artifacts/ changed)."""
    now = {} if now is None else now
    out: dict[str, dict[str, str]] = {}
    for path, meta in pages:
        if meta.measurements is None:
            continue
        for claim in meta.claims:
            mc = meta.measurements.claims.get(claim.id)
            rel = _measured(meta, claim)
            if mc is None or not mc.series or not rel:
                continue
            if rel not in now:
                now[rel] = current(root, rel)
            code = now[rel]
            if code is None or code == _code(mc.series):
                continue
            gpu = mc.series.split("/", 1)[0]
            out.setdefault(path, {})[claim.id] = (
                f"measured on series {mc.series}; {rel} is now {gpu}/{code} (its code, headers, build settings or the "
                "protocol changed since those runs): kwiki verify measures the current code")
    return out


def problems(root: Path, pages: list[tuple[str, PageMeta, int]]) -> list[Problem]:
    """`kwiki check`'s warnings over (path, meta, line of `measurements`): one per page and artifact whose code changed
    since the runs its claims show. A warning under --strict too: only a `kwiki verify` on a GPU resolves it."""
    found = changed(root, [(path, meta) for path, meta, _ in pages])
    out: list[Problem] = []
    for path, _, line in pages:
        by_reason: dict[str, list[str]] = {}
        for cid, why in sorted(found.get(path, {}).items()):
            by_reason.setdefault(why, []).append(cid)
        for why, ids in sorted(by_reason.items()):
            out.append(Problem(path, line, "measurements", f"{len(ids)} figure(s) of earlier code "
                                                           f"({', '.join(ids)}): {why}", "warning"))
    return out


__all__ = ["HARNESS", "changed", "code_dirs", "code_key", "current", "problems"]
