"""`kwiki new`: plan, validate and write a page or an artifact skeleton (`kwiki.wiki.skeletons`).

`plan_page` and `plan_artifact` render every file and validate it (the page against the page model,
the manifest against the manifest model) before anything touches the disk; `write` then creates the
files without ever replacing one, and removes what it created if any step fails, so nothing is
half-written. The results pass `kwiki check --strict` and compile with `kwiki verify --compile-only`.

A page and an artifact come in pairs when asked: `kwiki new page ID --artifact NAME` writes the
artifact too when it does not exist yet, and `kwiki new artifact NAME --page ID` writes the page
when no page has that id, or adds the artifact to the existing page's `artifacts` mapping (an edit
that is checked to change nothing else).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kwiki.core.arch import ArchError, parse_arch
from kwiki.core.errors import FrontMatterError, ManifestError, MarkerError, UsageError
from kwiki.core.paths import shown, within
from kwiki.core.writefile import write_atomic
from kwiki.wiki.catalog import ARTIFACTS_DIR, page_files
from kwiki.wiki.frontmatter import parse_page, parse_yaml
from kwiki.wiki.manifest import MANIFEST, Manifest, load_manifest
from kwiki.wiki.markers import scan
from kwiki.wiki.model import SLUG as MODEL_SLUG
from kwiki.wiki.skeletons import (
    NO_CLAIMS,
    OUTCOME_CLAIM,
    PAGE_FOLDERS,
    PAGE_KEY,
    PY_RUNGS,
    PY_SIZE_VALUES,
    RATIO_CLAIM,
    RUNGS,
    SIZE_VALUES,
    page_path,
    render_manifest,
    render_page,
    render_python_kernels,
    render_python_manifest,
    render_python_module,
    render_source,
    stem,
)

DEFAULT_ARCH = "sm_90a"
DEFAULT_TYPE = "technique"
KINDS = ("cuda", "python")  # what `kwiki new artifact --kind` writes: a .cu on the shared main, or a harness module
RESERVED = frozenset({"common"})  # artifacts/common holds the shared protocol, not an artifact
SLUG = re.compile(MODEL_SLUG)  # the page model's rule for ids, also used for artifact names
MAX_ID = 120  # the model's limit for a page id
MAX_NAME = 80  # the manifest's limit for an artifact name

# ---------------------------------------------------------------- what gets written


@dataclass(frozen=True)
class FileChange:
    """One file `write` creates, or (action 'edit') rewrites only if it still holds `before`."""

    path: str  # relative to the project root, '/' separators
    data: bytes
    what: str  # for people: 'page technique-x', 'artifact manifest', ...
    action: Literal["create", "edit"] = "create"
    before: bytes | None = None


@dataclass(frozen=True)
class Skeleton:
    """The files of one `kwiki new` command, rendered and validated, not yet written."""

    changes: tuple[FileChange, ...]
    page_id: str | None
    artifact: str | None


# ---------------------------------------------------------------- names and options


def check_page_id(page_id: str) -> str:
    if not SLUG.fullmatch(page_id) or len(page_id) > MAX_ID:
        raise UsageError(f"page id {page_id!r} is not a slug: lower-case letters and digits joined by single "
                         f"'-', '_' or '.' (at most {MAX_ID} characters), e.g. technique-vectorized-loads")
    return page_id


def check_artifact_name(name: str) -> str:
    if not SLUG.fullmatch(name) or len(name) > MAX_NAME:
        raise UsageError(f"artifact name {name!r} is not a slug: lower-case letters and digits joined by single "
                         f"'-', '_' or '.' (at most {MAX_NAME} characters), e.g. scale_f32_sm90a")
    if name in RESERVED:
        raise UsageError(f"artifact name {name!r} is reserved (artifacts/{name}/ holds the shared protocol)")
    return name


def _arch(arch: str) -> str:
    try:
        return parse_arch(arch).name
    except (ArchError, ValueError) as exc:
        raise UsageError(f"--arch: {exc}") from None


def _type(page_type: str | None, page_id: str) -> str:
    """The page type asked for; by default the one the id starts with (`kernel-x`), else a technique."""
    if page_type is None:
        return next((t for t in PAGE_FOLDERS if page_id.startswith(f"{t}-")), DEFAULT_TYPE)
    if page_type not in PAGE_FOLDERS:
        raise UsageError(f"--type: {page_type!r} is not a page type (one of: {', '.join(sorted(PAGE_FOLDERS))})")
    return page_type


def _title(title: str | None, file_stem: str) -> str:
    if title is None:
        words = re.split(r"[-_.]+", file_stem)
        return " ".join(words).capitalize()
    if not title.strip() or any(ord(c) < 32 or c == "\x7f" for c in title) or "<!--" in title:
        raise UsageError(f"--title: {title!r} is not one line of plain text (no control characters, no '<!--')")
    return title.strip()


def _page_ids(root: Path) -> dict[str, str]:
    """id -> relative path of every page that has one (pages that do not parse are skipped)."""
    from kwiki.wiki.pages import read_page

    out: dict[str, str] = {}
    for file in page_files(root):
        page = read_page(file, root)
        page_id = page.fm.data.get("id") if page.fm is not None else None
        if isinstance(page_id, str):
            out.setdefault(page_id, page.path)
    return out


def _free(root: Path, rel: str) -> None:
    """Refuse a destination that exists, or whose nearest existing folder leads out of the repository."""
    target = root / rel
    if os.path.lexists(target):
        raise UsageError(f"{rel} already exists; not overwritten")
    parent = target.parent
    while not os.path.lexists(parent) and parent != root:
        parent = parent.parent
    if not within(root, parent):
        where = shown(parent, root)
        raise UsageError(f"{where} leads out of the repository (a link?); {rel} not written")


# ---------------------------------------------------------------- validation before writing


def _validate_page(text: str, rel: str) -> None:
    """The rendered page parses, validates (no unknown field) and has sound markers; else a bug here."""
    from pydantic import ValidationError

    from kwiki.wiki.model import PageMeta

    try:
        fm = parse_page(text.encode("utf-8"))
        meta = PageMeta.model_validate(fm.data)
        scan(fm.body, first_line=fm.body_line)
    except (FrontMatterError, MarkerError) as exc:
        raise UsageError(f"{rel}:{exc.line}: the skeleton would not parse: {exc.message}") from None
    except ValidationError as exc:
        raise UsageError(f"{rel}: the skeleton would not validate: {exc.errors()[0]['msg']}") from None
    if meta.unknown_fields:
        raise UsageError(f"{rel}: the skeleton has unknown fields {meta.unknown_fields}")


def _validate_manifest(text: str, rel: str) -> Manifest:
    from pydantic import ValidationError

    try:
        data, _ = parse_yaml(text)
        return Manifest.model_validate(data)
    except FrontMatterError as exc:
        raise UsageError(f"{rel}:{exc.line}: the skeleton would not parse: {exc.message}") from None
    except ValidationError as exc:
        raise UsageError(f"{rel}: the skeleton would not validate: {exc.errors()[0]['msg']}") from None


# ---------------------------------------------------------------- plans


def _artifact_changes(root: Path, name: str, arch: str, kind: str = "cuda") -> list[FileChange]:
    directory = f"{ARTIFACTS_DIR}/{name}"
    _free(root, directory)
    if kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: an artifact is one of {', '.join(KINDS)}")
    if kind == "python":
        manifest = render_python_manifest(name, arch)
        _validate_manifest(manifest, f"{directory}/{MANIFEST}")
        return [
            FileChange(f"{directory}/{MANIFEST}", manifest.encode("utf-8"),
                       f"artifact manifest, kind python: {len(PY_RUNGS)} variants on rungs 0-{len(PY_RUNGS) - 1}"),
            FileChange(f"{directory}/{name}.py", render_python_module(name).encode("utf-8"),
                       "the harness's module: GRID, VARIANTS, TOLERANCES, inputs, outputs, reference, work, load"),
            FileChange(f"{directory}/kernels.py", render_python_kernels(name).encode("utf-8"), "its Triton kernel"),
        ]
    manifest = render_manifest(name, arch)
    _validate_manifest(manifest, f"{directory}/{MANIFEST}")
    return [
        FileChange(f"{directory}/{MANIFEST}", manifest.encode("utf-8"),
                   f"artifact manifest: {len(RUNGS)} variants on rungs 0-{len(RUNGS) - 1}, target {arch}"),
        FileChange(f"{directory}/{name}.cu", render_source(name, arch).encode("utf-8"),
                   "CUDA source on the kwiki_bench.cuh protocol"),
    ]


def _page_change(root: Path, page_id: str, page_type: str, title: str | None, arch: str,
                 artifact: str | None, manifest: Manifest | None, kind: str = "cuda") -> FileChange:
    ids = _page_ids(root)
    if page_id in ids:
        raise UsageError(f"page id {page_id!r} is already used by {ids[page_id]}; not overwritten")
    rel = page_path(page_id, page_type)
    _free(root, rel)
    if artifact is None:
        claims = NO_CLAIMS
    elif manifest is None and kind == "python":  # the Python skeleton: its top rung against the baseline
        claims = RATIO_CLAIM.format(of=PY_RUNGS[-1][0], per=PY_RUNGS[0][0], arch=arch, key=PAGE_KEY,
                                    n=PY_SIZE_VALUES[0])  # one record each: the GRID has two sizes
    elif manifest is None:  # the skeleton artifact: its top rung against the rung below
        claims = RATIO_CLAIM.format(of=RUNGS[-1].name, per=RUNGS[-2].name, arch=arch, key=PAGE_KEY,
                                    n=SIZE_VALUES[0])  # one record each: the skeleton runs two sizes
    else:  # an existing artifact: its last variant passes its check
        variant = manifest.variants[-1].name
        claim_id = re.sub(r"[^a-z0-9]+", "-", variant.lower()).strip("-") + "-passes"
        claims = OUTCOME_CLAIM.format(claim_id=claim_id, variant=variant, arch=arch, key=PAGE_KEY)
    text = render_page(page_id, page_type, _title(title, stem(page_id, page_type)), arch, claims, artifact)
    _validate_page(text, rel)
    return FileChange(rel, text.encode("utf-8"), f"page {page_id}, type {page_type}")


def plan_page(root: Path, page_id: str, *, page_type: str | None = None, title: str | None = None,
              arch: str = DEFAULT_ARCH, artifact: str | None = None, kind: str = "cuda") -> Skeleton:
    """A new page (and, with `artifact`, the artifact it measures when that does not exist yet)."""
    check_page_id(page_id)
    page_type, arch = _type(page_type, page_id), _arch(arch)
    changes: list[FileChange] = []
    manifest = None
    if artifact is not None:
        check_artifact_name(artifact)
        directory = root / ARTIFACTS_DIR / artifact
        if os.path.lexists(directory):
            try:
                manifest = load_manifest(directory, root)
            except ManifestError as exc:
                raise UsageError(f"--artifact {artifact}: {exc}") from None
        else:
            changes.extend(_artifact_changes(root, artifact, arch, kind))
    changes.insert(0, _page_change(root, page_id, page_type, title, arch, artifact, manifest, kind))
    return Skeleton(tuple(changes), page_id, artifact)


def plan_artifact(root: Path, name: str, *, arch: str = DEFAULT_ARCH, page: str | None = None,
                  kind: str = "cuda") -> Skeleton:
    """A new artifact; with `page`, linked to that page (a new skeleton page when no page has that id)."""
    check_artifact_name(name)
    arch = _arch(arch)
    _free(root, f"{ARTIFACTS_DIR}/{name}")
    if page is None:
        return Skeleton(tuple(_artifact_changes(root, name, arch, kind)), None, name)
    check_page_id(page)
    ids = _page_ids(root)
    if page not in ids:
        return plan_page(root, page, arch=arch, artifact=name, kind=kind)
    link = _link_change(root, ids[page], name)
    return Skeleton(tuple(_artifact_changes(root, name, arch, kind) + ([link] if link else [])), page, name)


# ---------------------------------------------------------------- linking an artifact into an existing page

_MEASUREMENTS_OPEN = re.compile(r"^#\s*kwiki:measurements\b")


def _encode(text: str, newline: str, bom: bool) -> bytes:
    data = (text.replace("\n", newline) if newline != "\n" else text).encode("utf-8")
    return b"\xef\xbb\xbf" + data if bom else data


def add_artifact_entry(raw: bytes, key: str, rel: str) -> bytes:
    """The page `raw` with `key: rel` added to its `artifacts` mapping, every other byte kept.

    The result is parsed again and must differ from the page only by that entry; UsageError otherwise
    (an `artifacts` field written in flow style, say), and the page is left as it is.
    """
    fm = parse_page(raw)
    if _encode(fm.text, fm.newline, fm.bom) != raw:
        raise UsageError("the page mixes line endings; kwiki cannot edit it byte-exactly")
    lines = fm.text.split("\n")
    current = fm.data.get("artifacts")
    if "artifacts" not in fm.data:
        at = next((i for i in range(1, fm.end_line - 1) if _MEASUREMENTS_OPEN.match(lines[i])), fm.end_line - 1)
        lines[at:at] = ["artifacts:", f"  {key}: {rel}"]
    elif isinstance(current, dict) and current and fm.lines[("artifacts",)] < max(
            fm.lines[("artifacts", k)] for k in current):
        last = max(fm.lines[("artifacts", k)] for k in current)  # 1-based: the index of the line after it
        indent = lines[last - 1][: len(lines[last - 1]) - len(lines[last - 1].lstrip())]
        lines[last:last] = [f"{indent}{key}: {rel}"]
    else:
        raise UsageError("its 'artifacts' field is not a block mapping kwiki can extend")
    new = _encode("\n".join(lines), fm.newline, fm.bom)
    try:
        after = parse_page(new)
    except FrontMatterError:
        after = None
    want = dict(fm.data)
    want["artifacts"] = {**(current or {}), key: rel}
    if after is None or after.data != want or after.body != fm.body:
        raise UsageError("adding the entry would change more than the 'artifacts' field")
    return new


def _link_change(root: Path, page_rel: str, name: str) -> FileChange | None:
    """The edit that adds artifacts/<name> to an existing page, or None when the page names it already."""
    rel = f"{ARTIFACTS_DIR}/{name}"
    raw = (root / page_rel).read_bytes()
    try:
        data = parse_page(raw).data
    except FrontMatterError as exc:
        raise UsageError(f"{page_rel}:{exc.line}: {exc.message}; the artifact is not added to it") from None
    found = data.get("artifacts")
    current: dict[str, object] = found if isinstance(found, dict) else {}
    if any(str(v).rstrip("/") == rel for v in current.values()):
        return None
    key = next((k for k in (PAGE_KEY, name) if k not in current), None)
    if key is None:
        raise UsageError(f"{page_rel}: its 'artifacts' already has the keys {PAGE_KEY!r} and {name!r}")
    if not within(root, root / page_rel):
        raise UsageError(f"{page_rel} leads out of the repository (a link?); not edited")
    try:
        new = add_artifact_entry(raw, key, rel)
    except (UsageError, FrontMatterError) as exc:
        raise UsageError(f"{page_rel}: cannot add the artifact by itself: {exc.message}; add '{key}: {rel}' "
                         f"under its 'artifacts:' by hand, or leave out --page") from None
    return FileChange(page_rel, new, f"artifacts.{key}: {rel} added", action="edit", before=raw)


# ---------------------------------------------------------------- writing


def _create(path: Path, data: bytes) -> None:
    """Write a new file in one step (a temporary file linked into place): never replaces an existing one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.link(tmp, path)  # FileExistsError if something appeared there meanwhile
    finally:
        os.unlink(tmp)


def write(root: Path, skeleton: Skeleton) -> list[FileChange]:
    """Write the skeleton's files: all of them, or (when a step fails) none; returns what was written."""
    made_dirs: list[Path] = []
    made_files: list[Path] = []
    try:
        for change in skeleton.changes:
            target = root / change.path
            if change.action == "edit":
                if target.read_bytes() != change.before:
                    raise UsageError(f"{change.path} changed on disk meanwhile; not edited (run kwiki new again)")
                write_atomic(target, change.data)
                continue
            missing = [p for p in (target.parent, *target.parent.parents) if not os.path.lexists(p)]
            for directory in reversed(missing):
                directory.mkdir()
                made_dirs.append(directory)
            try:
                _create(target, change.data)
            except FileExistsError:
                raise UsageError(f"{change.path} already exists; not overwritten") from None
            made_files.append(target)
    except BaseException:
        for file in reversed(made_files):
            file.unlink(missing_ok=True)
        for directory in reversed(made_dirs):
            try:
                directory.rmdir()
            except OSError:
                pass
        raise
    return list(skeleton.changes)
