"""`kwiki show ID`: a page's front matter, each claim with its latest measurement, and its body.

The JSON (schema/show.schema.json) is what scripts and agents read results from::

    kwiki show technique-vectorized-loads --json | jq '.claims[] | {id, verdict, value: .measured.value}'

It comes from the index (kwiki/agents/index.py), which stored it when it last read the page.

`kwiki show ID --ladder` and the MCP tool `get_ladder`: a page's ladders as data, without its body, and its
`compare` entries (the fastest variant at each size, kwiki.results.comparisons).
Each artifact the page names gives one ladder per GPU model: its latest run in the results store
(kwiki.results.ladders.from_store), grouped by shape, with absolute times and rates, the ratio to the
baseline and the share of the speed of light. `shape` keeps the groups whose label (`8192x8192,
bf16`, `4 GiB, u8`) or parameters contain it; a shape no group has is a usage error that lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kwiki import SCHEMA_VERSION
from kwiki.agents.entries import store_files
from kwiki.agents.index import page_detail, with_index
from kwiki.core.errors import KwikiError, UsageError


def show(root: Path, page_id: str, *, body: bool = True) -> dict[str, Any]:
    """The `kwiki show --json` document of page `page_id`; raises index.PageNotFound."""
    return with_index(root, lambda conn: page_detail(conn, page_id, body=body))


# ---------------------------------------------------------------- --ladder


_ROWS: dict[str, tuple[Any, list[Any]]] = {}  # root -> (its store files, their record rows)


def _record_rows(root: Path) -> list[Any]:
    """The results store's record rows, read once per process while its files stay the same."""
    from kwiki.results.store import RecordRow, read_all

    files = store_files(root)
    cached = _ROWS.get(str(root))
    if cached is None or cached[0] != files:
        cached = (files, [r for r in read_all(root) if isinstance(r, RecordRow)])
        _ROWS[str(root)] = cached
    return cached[1]


def _key(text: str) -> str:
    return "".join(text.lower().replace("×", "x").split())


def _figures(rows: list[Any]) -> dict[tuple[str, str, str], dict[str, float]]:
    """Each record row's figures by (run id, variant, parameters): what a ladder row leaves out (occupancy)."""
    from kwiki.core.numbers import params_text

    return {(r.run_id, r.variant, params_text(r.params)): r.figures for r in rows}


def page_ladders(root: Path, page_id: str, shape: str | None = None, detail: str = "brief",
                 every_row: bool = False) -> dict[str, Any]:
    """The LadderOutput document of page `page_id` (compact: no nulls, kwiki.agents.ladderview); raises
    index.PageNotFound for an unknown id and UsageError for a shape none of its ladders has or an unknown
    `detail`. Without a `shape` each shape keeps its best, baseline and ceiling rows, unless `every_row` (the
    terminal's tables) or detail is 'full'."""
    from kwiki.agents.ladderview import DETAILS, ladder_view
    from kwiki.results import ladders
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    if detail not in DETAILS:
        raise UsageError(f"detail {detail!r}: one of {', '.join(DETAILS)}")
    root = Path(root)
    page = with_index(root, lambda conn: page_detail(conn, page_id, body=False))
    artifacts = (page.get("front_matter") or {}).get("artifacts") or {}
    rows = _record_rows(root)
    figures = _figures(rows)
    out: list[dict[str, Any]] = []
    labels: list[str] = []
    for rel in sorted(set(artifacts.values())):
        if not (root / rel / MANIFEST).is_file():
            continue  # a single-file artifact, or one that is gone: `kwiki check` reports it
        try:
            manifest = load_manifest(root / rel, root)
        except KwikiError:
            continue
        for ladder in ladders.from_store(manifest, rows, rel):
            labels += [g.label for g in ladder.groups]
            if shape is not None:
                want = _key(shape)
                ladder.groups = [g for g in ladder.groups if want in _key(g.label)
                                 or want in _key(",".join(f"{k}={v}" for k, v in sorted(g.params.items())))]
                if not ladder.groups:
                    continue
            every = every_row or shape is not None or detail == "full"
            out.append(ladder_view(ladder, figures, detail=detail, every_row=every))
    if shape is not None and not out:
        from kwiki.core.suggest import did_you_mean

        known = sorted(set(labels))
        raise UsageError(f"shape {shape!r}: no ladder of page '{page_id}' has it"
                         + (did_you_mean(shape, known) or (f" (shapes: {'; '.join(known)})" if known else
                                                           " (the page has no measured ladder)")))
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": page["id"], "title": page["title"]}
    if shape is not None:
        doc["shape"] = shape
    if detail != "brief":
        doc["detail"] = detail
    doc["ladders"] = out
    comparisons = _comparisons(root, page, rows) if shape is None else []
    if comparisons:
        doc["comparisons"] = comparisons
    return doc


def _comparisons(root: Path, page: dict[str, Any], rows: list[Any]) -> list[dict[str, Any]]:
    """The page's `compare` entries as agents read them (outputs.AgentComparison): per GPU model its artifact ran
    on, the fastest variant and each variant's median time at each size (kwiki.results.comparisons)."""
    from kwiki.results import ladders
    from kwiki.results.comparisons import compare_spec, leader_text
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    front = page.get("front_matter") or {}
    artifacts = front.get("artifacts") or {}
    out: list[dict[str, Any]] = []
    for comp in front.get("compare") or []:
        rel = str(artifacts.get(comp.get("artifact"), "")).rstrip("/")
        if not rel or not (root / rel / MANIFEST).is_file():
            continue
        try:
            manifest = load_manifest(root / rel, root)
        except KwikiError:
            continue
        for runs in ladders.store_runs(manifest, rows, rel):
            spec = compare_spec(runs, manifest.name, comp["over"], dict(comp.get("at") or {}), comp["variants"])
            if spec is None:
                continue
            points = [{"at": p["label"], "fastest": who,
                       "time_us": {v: x["time_us"] for v, x in p["values"].items() if x["time_us"]}}
                      for p, who in zip(spec["points"], spec["leaders"], strict=True)]
            out.append({"artifact": manifest.name, "gpu": spec["gpu"], "over": spec["over"], "at": spec["at"],
                        "runs": spec["runs"], "fastest": leader_text(spec), "points": points})
    return out
