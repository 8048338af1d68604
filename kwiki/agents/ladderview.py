"""A ladder as an agent reads it (`get_ladder`, `kwiki show --ladder`): what answers, once.

Built from kwiki.results.ladders' Ladder, so the figures are the page's and the site's. Brief (the default):

* each variant's rung and what it adds once, in `variants`, not on every shape's row;
* each row: variant, status, time, rate, ratios to the baseline and the speed of light, registers and
  occupancy (`blocks_per_sm`, `warps_per_sm`: what the occupancy calculator gave the launch, as the record
  carries them; `achieved_occupancy`: Nsight Compute's active warps over the SM's maximum, where the row
  was profiled), and `best: true` on the fastest row of its shape (kwiki.results.ladders.best_per_shape,
  the site's and the skills' choice too);
* without a `shape`, only the best row, the baseline's and the ceiling's of each shape (`rows_total` counts
  them all), so a ladder of many shapes stays small; a `shape` gives every row of the shapes it names.

Full (`detail="full"`) adds each group's parameters, each row's SM clock, power-cap share and Nsight Compute
byte counts, and each variant's SASS check (`mechanisms`: instructions matched per kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kwiki.core.numbers import params_text
from kwiki.results.ladders import Ladder, Rung, best_per_shape

DETAILS = ("brief", "full")
FULL_ONLY = frozenset({"sm_mhz", "power_capped", "profiled", "description", "adds", "rung"})
# record figures shown as a row's occupancy: figure -> field
OCCUPANCY = {"blocks_per_sm": "blocks_per_sm", "warps_per_sm": "warps_per_sm",
             "ncu_occupancy_pct": "achieved_occupancy"}

Figures = Mapping[tuple[str, str, str], Mapping[str, float]]  # (run id, variant, params_text) -> figures


def occupancy(figures: Mapping[str, float]) -> dict[str, float | int]:
    """The occupancy a record carries: blocks and warps per SM (whole numbers), achieved share (0-1)."""
    out: dict[str, float | int] = {}
    for figure, name in OCCUPANCY.items():
        value = figures.get(figure)
        if value is None:
            continue
        out[name] = round(value / 100, 4) if figure == "ncu_occupancy_pct" else int(value)
    return out


def _row(rung: Rung, figures: Mapping[str, float], best: bool, full: bool) -> dict[str, Any]:
    row: dict[str, Any] = rung.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    row["status"] = rung.status
    if not full:
        for key in FULL_ONLY:
            row.pop(key, None)
    row.update(occupancy(figures))
    if best:
        row["best"] = True
    return row


def ladder_view(ladder: Ladder, figures: Figures, *, detail: str = "brief", every_row: bool = True) -> dict[str, Any]:
    """The agent's JSON of one ladder; `every_row` false keeps of each shape the best, baseline and ceiling rows."""
    full = detail == "full"
    best = {id(group): rung.variant for group, rung in best_per_shape(ladder)}
    head = ladder.model_dump(mode="json", exclude_none=True, exclude_defaults=True,
                             exclude={"groups", "others", "mechanisms"})
    variants: dict[str, dict[str, Any]] = {}
    groups = []
    for group in ladder.groups:
        key = params_text(group.params)
        rows = []
        for rung in group.rows:
            if rung.variant not in variants:
                about = {"rung": rung.rung, "adds": rung.adds or rung.description}
                variants[rung.variant] = {k: v for k, v in about.items() if v is not None}
            is_best = best.get(id(group)) == rung.variant
            if every_row or is_best or rung.role is not None:
                rows.append(_row(rung, figures.get((ladder.run_id or "", rung.variant, key), {}), is_best, full))
        out: dict[str, Any] = {"label": group.label}
        if full:
            out["params"] = dict(group.params)
        out["rows"] = rows
        if len(rows) < len(group.rows):
            out["rows_total"] = len(group.rows)
        groups.append(out)
    doc: dict[str, Any] = {**head, "variants": {k: v for k, v in variants.items() if v}, "groups": groups}
    if ladder.others:
        doc["others"] = [_row(r, {}, False, full) for r in ladder.others]
    if full and ladder.mechanisms:
        doc["mechanisms"] = {k: m.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
                             for k, m in ladder.mechanisms.items()}
    if not doc["variants"]:
        del doc["variants"]
    return doc
