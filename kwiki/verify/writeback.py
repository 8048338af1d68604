"""Write measured numbers back into pages: the front-matter measurements block and body regions.

kwiki owns exactly these places; every other byte of a page stays identical (newline style and
byte-order mark included). Writes are atomic and serialized by a lock; the new page is parsed and
validated before it replaces the old one, so a page is always either as it was or as it should be.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import yaml
from pydantic import ValidationError

from kwiki.core import lock
from kwiki.core.errors import FrontMatterError, MarkerError, Problem, WriteBackError
from kwiki.core.numbers import round_sig
from kwiki.core.writefile import write_atomic
from kwiki.results.store import gpu_slug
from kwiki.results.tables import MEASURED, claims_table, provenance_line
from kwiki.verify import tables
from kwiki.verify.claims import evidence_for
from kwiki.verify.types import ClaimResult, Gating, Plan, RunOutcome
from kwiki.wiki import markers
from kwiki.wiki.frontmatter import decode, parse_page, split
from kwiki.wiki.model import Board, MeasuredClaim, Measurements, PageMeta, Provenance
from kwiki.wiki.owners import claimed_params, owners, rel_of
from kwiki.wiki.verdict import Verdict

LOCK = ".kwiki/write.lock"


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the write lock of a project (one writer at a time, across processes)."""
    with lock.hold(root / LOCK, owner="kwiki verify write-back"):
        yield


def measurements_yaml(m: Measurements) -> str:
    data = {"measurements": m.model_dump(mode="json", exclude_none=True)}
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def apply(raw: bytes, measurements: str | None, regions: dict[str, str]) -> bytes:
    """The page `raw` with its measurements block and body regions replaced (or appended).

    Pure function: raises WriteBackError when the page cannot be rewritten byte-exactly.
    """
    try:
        text, newline, bom = decode(raw)
        _, end_line, _, _ = split(text)
    except FrontMatterError as exc:
        raise WriteBackError(exc.message, line=exc.line) from None
    if _encode(text, newline, bom) != raw:
        raise WriteBackError("page mixes line endings; kwiki cannot rewrite it byte-exactly (normalize it first)")
    lines = text.split("\n")
    fm_text = "\n".join(lines[1 : end_line - 1])
    body = "\n".join(lines[end_line:])
    try:
        if measurements is not None:
            fm_text = _put_yaml(fm_text, measurements)
        for name in sorted(regions):
            body = _put_body(body, name, regions[name])
    except MarkerError as exc:
        raise WriteBackError(f"cannot write region: {exc.message}", line=exc.line) from None
    new = "\n".join([lines[0], fm_text, lines[end_line - 1]]) + "\n" + body
    return _encode(new, newline, bom)


def _encode(text: str, newline: str, bom: bool) -> bytes:
    data = (text.replace("\n", newline) if newline != "\n" else text).encode("utf-8")
    return b"\xef\xbb\xbf" + data if bom else data


def _put_yaml(fm_text: str, content: str) -> str:
    replaced = markers.replace(fm_text, "measurements", content, yaml=True)
    if replaced is not None:
        return replaced
    if any(line.startswith("measurements:") for line in fm_text.split("\n")):
        raise WriteBackError("front matter has a 'measurements:' field outside kwiki's markers; "
                             "remove it (kwiki writes that block)")
    block = markers.render("measurements", content, yaml=True).rstrip("\n")
    return f"{fm_text}\n{block}" if fm_text else block


def _put_body(body: str, name: str, content: str) -> str:
    replaced = markers.replace(body, name, content)
    if replaced is not None:
        return replaced
    sep = "" if body.endswith("\n") or not body else "\n"
    return f"{body}{sep}\n{markers.render(name, content)}"


def validate_new(raw: bytes, path: str) -> None:
    try:
        fm = parse_page(raw)
        PageMeta.model_validate(fm.data)
        markers.scan(fm.body)
    except (FrontMatterError, MarkerError) as exc:
        raise WriteBackError(f"rewritten page would not parse: {exc.message}", path=path, line=exc.line) from None
    except ValidationError as exc:
        raise WriteBackError(f"rewritten page would not validate: {exc.errors()[0]['msg']}", path=path) from None


def write_page(file: Path, rel: str, planned: str, measurements: str | None, regions: dict[str, str]) -> bool:
    """Rewrite one page; False when nothing changed.

    `planned` is the page's decoded text when the run read it: a page edited since is left alone.
    """
    current = file.read_bytes()
    try:
        unchanged = decode(current)[0] == planned
    except FrontMatterError:
        unchanged = False
    if not unchanged:
        raise WriteBackError("page changed on disk during the verify run; not overwritten (run again)", path=rel)
    try:
        new = apply(current, measurements, regions)
    except WriteBackError as exc:
        raise WriteBackError(exc.message, path=rel, line=exc.line) from None
    if new == current:
        return False
    validate_new(new, rel)
    write_atomic(file, new)
    return True


__all__ = ["apply", "locked", "measurements_yaml", "write_page"]


# ---------------------------------------------------------------- one run's write-back


def other_gpu_model(measurements: Measurements | None, gpu: str | None) -> str | None:
    """Why a run on GPU `gpu` leaves a page whose measurements block is another GPU model's as it is (None: it
    writes it). A page measured on an H200 keeps those figures when a run lands on an H100: the run's figures go to
    the results store, not over the H200's on the page, unless --other-gpu asks for it."""
    was = measurements.verified_on if measurements else None
    if not was or not gpu or gpu_slug(was) == gpu_slug(gpu):  # a GPU model as the results store names it
        return None
    return f"its measurements are the {was}'s and this run is on an {gpu}"


def write_back(root: Path, plan: Plan, outcomes: dict[str, list[RunOutcome]], claims: list[ClaimResult],
               base: Provenance, progress: Callable[[str], None],
               gating: Gating | None = None, *, other_gpu: bool = False,
               notes: list[str] | None = None) -> tuple[list[str], list[Problem]]:
    """Write each measured page's measurements block, claims table and ladders; returns the pages
    written and a problem for each page that could not be. No figure a gate refused is written. A page measured
    on another GPU model than this run's is left as it is, with a line in `notes`, unless `other_gpu`."""
    by_page: dict[str, list[ClaimResult]] = {}
    for c in claims:
        by_page.setdefault(c.page, []).append(c)
    written: list[str] = []
    problems: list[Problem] = []
    kept: list[str] = []
    every = _every_page(root)
    owner_of = owners(every)
    with locked(root):
        for page in plan.pages:
            meta = page.meta
            assert meta is not None and page.fm is not None
            results = [c for c in by_page.get(meta.id or "", []) if c.artifact is not None]
            before = meta.measurements.claims if meta.measurements else {}
            level = evidence_for([_kept(c, before) for c in results])
            if level is None:
                continue
            why = None if other_gpu else other_gpu_model(meta.measurements, plan.gpu.name if plan.gpu else None)
            if why is not None:
                kept.append(page.path)
                progress(f"kept {page.path}: {why} (--other-gpu writes over them)")
                continue
            hashes = {c.artifact: plan.artifacts[c.artifact].hash for c in results if c.artifact in plan.artifacts}
            m = Measurements(
                evidence_level=level,
                verified_on=plan.gpu.name if plan.gpu else None,
                date=base.date[:10],
                claims={c.claim: before[c.claim] if c.verdict == Verdict.not_run and c.claim in before
                        else _measured(c, base.model_copy(update={"artifact_hash": hashes.get(c.artifact or "")}))
                        for c in results},
            )
            page_prov = base.model_copy(update={"artifact_hash": ", ".join(sorted({h for h in hashes.values() if h}))
                                                or None})
            measured = [claim for claim in meta.claims if claim.id in m.claims]
            over_runs = any(mc.runs is not None for mc in m.claims.values())
            regions = {"claims": claims_table(measured, m.claims) + "\n"
                       + provenance_line(page_prov, "series" if over_runs else "run")}
            ladders, ran = [], []
            earlier = earlier_ladders(page.fm.body, [rel_of(rel) for rel in meta.artifacts.values()])
            for key in sorted(meta.artifacts):
                rel = rel_of(meta.artifacts[key])
                planned = plan.artifact_for(page, key)
                if planned is None or planned.path not in outcomes:  # left out of this run (--until-runs, a filter)
                    if rel in earlier:
                        ladders.append(earlier[rel])
                    continue
                ran.append(planned.hash)
                owner = owner_of.get(rel)
                if owner is None or owner.rel == page.path:  # one ladder per artifact: whole on its owner's page
                    ladders.append(tables.ladder_table(planned, outcomes[planned.path], gating))
                    continue
                link = (owner.title, posixpath.relpath(owner.rel, posixpath.dirname(page.path)))
                ladders.append(tables.ladder_table(planned, outcomes[planned.path], gating,
                                                   claimed_params(meta, rel), link))
            if ran:  # the line under the ladders names the code that ran; a kept ladder carries its own
                regions["ladder"] = "\n".join(ladders) + "\n" + provenance_line(
                    page_prov.model_copy(update={"artifact_hash": ", ".join(sorted({h for h in ran if h})) or None}))
            try:
                if write_page(page.file, page.path, page.fm.text, measurements_yaml(m), regions):
                    written.append(page.path)
                    progress(f"wrote {page.path} ({level})")
            except WriteBackError as exc:
                problems.append(exc.problem())
                progress(f"NOT written: {exc}")
    if kept and notes is not None:
        notes.append(f"{len(kept)} page{'s' * (len(kept) != 1)} measured on another GPU model left as they are (this "
                     f"run's figures are in the results store; --other-gpu writes them over the pages): "
                     + ", ".join(kept))
    behind = left_behind(plan, outcomes, every)
    if behind and notes is not None:
        notes.append(f"{len(behind)} page{'s' * (len(behind) != 1)} not verified in this run measure an artifact it "
                     f"ran, so their figures are now behind the results store (`kwiki check` says so): "
                     f"`kwiki verify {' '.join(behind)}` judges this run in")
    return written, problems


KEPT = "*The ladder above is an earlier run's"  # how the line under a ladder kept from one begins


def earlier_ladders(body: str, paths: Sequence[str]) -> dict[str, str]:
    """The table of each artifact (by its path) in the page's ladder region as kwiki last wrote it, each followed by
    the line that says which run measured it: a run that leaves one of a page's artifacts out (--until-runs)
    keeps that artifact's ladder as it stood instead of dropping it. Empty where the page has no such region."""
    try:
        region = next((r for r in markers.scan(body) if r.name == "ladder"), None)
    except MarkerError:
        return {}
    lines = region.content.rstrip("\n").split("\n") if region is not None else []
    heads = {i: path for i, line in enumerate(lines) for path in paths
             if line.startswith("**") and tables.ladder_lead(path) in line}
    foot = max((i for i, line in enumerate(lines) if line.startswith(MEASURED)), default=None)
    if foot is None:
        return {}
    starts = sorted(i for i in heads if i < foot)
    out = {}
    for n, i in enumerate(starts):
        table = lines[i:starts[n + 1] if n + 1 < len(starts) else foot]
        while table and not table[-1].strip():
            table.pop()
        if not any(line.startswith(KEPT) for line in table):
            which = lines[foot].removeprefix("*").rstrip()
            table += ["", f"{KEPT} (a later one left `{heads[i]}` out): {which[0].lower()}{which[1:]}"]
        out[heads[i]] = "\n".join(table) + "\n"
    return out


def _every_page(root: Path) -> list[tuple[PageMeta, str]]:
    """(meta, path from the repository root) of every page of the wiki: a run may measure only some of them."""
    from kwiki.wiki.catalog import load_wiki

    return [(p.meta, p.path) for p in load_wiki(root).pages if p.meta is not None]


def left_behind(plan: Plan, outcomes: dict[str, list[RunOutcome]], every: list[tuple[PageMeta, str]]) -> list[str]:
    """The ids of the pages this run did not verify whose measurements block is of this GPU model and which name an
    artifact it ran: the run added to the series their figures are judged over (kwiki.results.trace, `behind`)."""
    selected = {page.path for page in plan.pages}
    ran = {path for path, runs in outcomes.items() if runs}
    gpu = plan.gpu.name if plan.gpu else None
    return sorted(meta.id for meta, path in every
                  if path not in selected and meta.measurements is not None and meta.id
                  and other_gpu_model(meta.measurements, gpu) is None
                  and any(rel.rstrip("/") in ran for rel in meta.artifacts.values()))


def _kept(c: ClaimResult, before: dict[str, MeasuredClaim]) -> ClaimResult:
    """What a claim stands on for the page's level: a claim not run this time (its artifact left out, e.g. by
    --until-runs, while another artifact of the page ran) keeps its block entry, and is judged by it when that
    entry comes from the artifact's current series (the same code); from an older series it is not passing."""
    k = before.get(c.claim)
    if c.verdict != Verdict.not_run or k is None or c.series is None or k.series != c.series:
        return c
    return replace(c, verdict=k.verdict, value=k.value, runs=k.runs)


def _measured(c: ClaimResult, provenance: Provenance) -> MeasuredClaim:
    """What a page keeps of a claim's result: the median over its series' runs with the run-to-run band
    and range; no figure at all where a gate refused it (the gates say why). Each names the runs and the
    series its figure comes from, so that every reader can trace it to the results store (kwiki.results.trace)."""
    run_ids = list(c.run_ids) or None
    if c.gates:
        return MeasuredClaim(verdict=c.verdict, unit=c.unit, detail=c.detail or None, provenance=provenance,
                             gates=list(c.gates), run_ids=run_ids, series=c.series)
    over_runs = c.median is not None
    return MeasuredClaim(
        verdict=c.verdict, value=round_sig(c.median if over_runs else c.value), unit=c.unit,
        spread=round_sig(c.band if over_runs else c.spread, 3), change=c.change, detail=c.detail or None,
        provenance=provenance, runs=c.runs,
        range=(round_sig(c.range[0]), round_sig(c.range[1])) if c.range else None,
        drift=round_sig(c.drift, 3), run_ids=run_ids, series=c.series,
        boards=[Board(board=b, runs=n, median=round_sig(m) or 0.0) for b, n, m in c.boards] or None)
