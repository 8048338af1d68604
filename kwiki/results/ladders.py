"""An artifact's ladder as data: each variant's time, rate, ratio to the baseline and share of the speed of
light, grouped by shape. One definition for the page's Markdown table (kwiki.verify.tables), the site's
layout (kwiki.site) and the agents' JSON (kwiki.agents).

A ladder comes from one run: either the records of the run `kwiki verify` is writing back
(kwiki.verify.tables.from_run), or the latest run of an artifact on each GPU model in the results store
(`from_store`); the site's curves across sizes draw the median of the last runs of its series
(`store_runs`, `median_ladder`), the runs its verdicts stand on. Rows keep the order the manifest declares its
variants in; groups are sorted by their parameters, numbers as numbers.
A ladder from the store also carries each variant's SASS evidence (`mechanisms`, once per variant: one
binary runs every shape), and a row the figures Nsight Compute counted where the run was profiled.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from kwiki.core.numbers import params_text, round_sig
from kwiki.core.strict import Scalar, Strict
from kwiki.results.mechanism import MechanismEvidence
from kwiki.results.record import Record
from kwiki.results.series import runs_of
from kwiki.results.store import RecordRow
from kwiki.wiki.manifest import Manifest, Variant
from kwiki.wiki.model import FIGURE_UNITS, Gate
from kwiki.wiki.verdict import RUNS

RungStatus = Literal["measured", "refused", "profiled", "check-failed", "run-failed", "not-applicable"]
BYTE_DTYPES = frozenset({"u8", "i8", "s8", "byte", "bytes"})
DIMS = ("M", "N", "K", "L")  # GEMM and GEMV dimensions, in the order a shape is written (MxNxK)


class Mechanism(MechanismEvidence):
    """The variant's SASS check on the binary that ran (kwiki.verify.sass), as the results store keeps it."""

    forbid: list[str] = Field(default_factory=list, description="the matched patterns the variant forbids "
                                                                "(each must count 0); the others it requires")


class Profiled(Strict):
    """What Nsight Compute counted of one launch, against what the record declares (`kwiki verify --profile`
    before the timed run)."""

    level: str = Field(description="where the bytes are counted: dram, l2 or smem (the record's bytes_level)")
    bytes: float | None = Field(default=None, description="bytes Nsight Compute counted at that level (at DRAM: "
                                                          "what the launch owes)")
    bytes_ratio: float | None = Field(default=None, description="declared bytes / profiled bytes (1.0: the record "
                                                                "declares what moved)")
    flops_ratio: float | None = Field(default=None, description="declared FP32 FLOPs / profiled FLOPs")
    run_id: str | None = Field(default=None, description="the earlier run of the same code (artifact hash, variant, "
                                                         "shape) that was profiled; absent: the ladder's own run")


class Rung(Strict):
    """One variant on one shape: what it adds and how fast it went (absent fields: not measured)."""

    variant: str
    rung: int | None = Field(default=None, description="its place on the ladder (0: the library baseline)")
    adds: str | None = Field(default=None, description="what this rung adds to the one below it")
    description: str | None = Field(default=None, description="the variant, in one line")
    role: Literal["baseline", "ceiling"] | None = Field(
        default=None, description="the variant every other is compared with, or the speed-of-light variant")
    status: RungStatus = Field(description="measured; refused (a gate failed the record, its rate is withheld); "
                                       "profiled (no timing); check-failed; run-failed; not-applicable")
    time_us: float | None = Field(default=None, description="median time of one launch, microseconds")
    spread: float | None = Field(default=None, description="the run's half inter-quartile range, relative")
    rate: float | None = Field(default=None, description="throughput, in rate_unit")
    rate_unit: str | None = Field(default=None, description="TB/s (memory-bound ladders) or TFLOP/s")
    vs_baseline: float | None = Field(default=None, description="rate over the baseline's rate on the same shape "
                                                                "(like units only; else the inverse ratio of times)")
    of_speed_of_light: float | None = Field(default=None, description="bandwidth over the ceiling variant's on the "
                                                                      "same shape (1.0 = the speed of light)")
    registers: int | None = Field(default=None, description="registers per thread of its kernel")
    sm_mhz: tuple[float, float] | None = Field(default=None, description="lowest and highest SM clock the run read")
    power_capped: float | None = Field(default=None, description="share of the sampling window under the power cap")
    gates: list[Gate] = Field(default_factory=list, description="gates the record failed (status refused)")
    profiled: Profiled | None = Field(default=None, description="Nsight Compute's bytes against the declared ones "
                                                                "(absent: the run was not profiled)")
    note: str | None = Field(default=None, description="why a row has no figures (a failed run, a target)")

    @property
    def library(self) -> bool:
        """A library's row, no rung of ours: the baseline, or any rung 0 (cuBLAS beside cuBLASLt's best)."""
        return self.role == "baseline" or self.rung == 0


class ShapeGroup(Strict):
    """Every variant measured on one parameter set."""

    params: dict[str, Scalar]
    label: str = Field(description="the parameters as a reader writes them: '8192x8192, bf16', '4 GiB, u8'")
    rows: list[Rung]
    sweep: bool = Field(default=False, description="a size of the manifest's `shapes.sweep`: drawn on the curve "
                                                   "across sizes, folded out of the ladder's tables")


class Ladder(Strict):
    """One artifact's variants in one run on one GPU model."""

    artifact: str
    title: str
    path: str | None = Field(default=None, description="the artifact's directory, relative to the project root")
    target: str | None = None
    gpu: str | None = None
    date: str | None = None
    run_id: str | None = Field(default=None, description="the run in the results store (its provenance)")
    baseline: str | None = None
    ceiling: str | None = None
    groups: list[ShapeGroup]
    others: list[Rung] = Field(default_factory=list, description="rows of no shape: failed runs, variants not "
                                                                 "applicable on the target")
    mechanisms: dict[str, Mechanism] = Field(
        default_factory=dict, description="each variant's SASS check (kwiki.verify.sass) on the binary that ran: "
                                          "instructions matched, registers, spills; one per variant, as one binary "
                                          "runs every shape (absent: the variant declares no `sass`, or the run "
                                          "predates the check)")

    def compact(self) -> dict[str, object]:
        """JSON for agents: no nulls, no empty lists."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)


# ---------------------------------------------------------------- readable parameters


def size_text(n: int, unit: str = "B") -> str:
    """4294967296 -> '4 GiB', 65536 elements -> '64 Ki elements': binary prefixes where the count is a
    multiple of a sixteenth of one (1.5 GiB), else the plain count ('1000 B')."""
    for power, prefix in ((4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki")):
        scale = 1024 ** power
        if n >= scale and n % (scale // 16) == 0:
            return f"{n / scale:g} {prefix}{unit}" if unit == "B" else f"{n / scale:g} {prefix} {unit}"
    return f"{n} {unit}"


def _int(value: Scalar) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def shape_label(params: Mapping[str, Scalar]) -> str:
    """A parameter set as a reader writes it: dimensions joined by 'x' (MxNxK in either case, rows x cols), a byte count
    in binary units, then the dtype and any other parameter as name=value."""
    gemm = sum(k in params for k in ("m", "n", "k")) >= 2 and not any(k in params for k in DIMS)  # m, n, k
    rest = {k.upper() if gemm and k in ("m", "n", "k") else k: v for k, v in params.items()}
    parts: list[str] = []
    shape = rest.pop("shape", None)
    dtype = rest.pop("dtype", None)
    dims = [k for k in DIMS if k in rest]
    if isinstance(shape, str) and "x" in shape:
        parts.append(shape)
        for k in dims:
            rest.pop(k)
    else:
        count = _int(shape) if shape is not None else None
        if count is not None:
            parts.append(size_text(count, "B" if dtype in BYTE_DTYPES else "elements"))
        elif shape is not None:
            parts.append(str(shape))
        if len(dims) > 1:  # one dimension alone keeps its name (N=256)
            parts.append("x".join(str(rest.pop(k)) for k in dims))
    if "rows" in rest and "cols" in rest:
        parts.append(f"{rest.pop('rows')}x{rest.pop('cols')}")
    for key, least in (("bytes", 1024), ("n", 1024 ** 2)):
        count = _int(rest[key]) if key in rest else None
        if count is not None and count >= least:
            rest.pop(key)
            parts.append(size_text(count, "B" if key == "bytes" else "elements"))
    if dtype is not None:
        parts.append(str(dtype))
    parts += [f"{k}={v}" for k, v in sorted(rest.items())]
    return ", ".join(parts)


def _natural(params: Mapping[str, Scalar]) -> tuple[tuple[str, int, float, str], ...]:
    """Sort key of a parameter set: by name, numbers as numbers ('1024' before '8192')."""
    out = []
    for k, v in sorted(params.items()):
        number = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if number is None and isinstance(v, str):
            digits = v.replace("x", "")
            number = float(v.split("x")[0]) if digits.isdigit() and v.split("x")[0] else None
        out.append((k, 0 if number is not None else 1, number or 0.0, str(v)))
    return tuple(out)


# ---------------------------------------------------------------- one measurement, from a run or the store


@dataclass
class Entry:
    """What a ladder needs of one record, whichever way it came (a run's Record, a store row)."""

    variant: str
    params: dict[str, Scalar]
    passed: bool
    figures: dict[str, float]  # time_us, gb_per_s, tflop_per_s, ... (none without a timing)
    spread: float | None = None
    registers: int | None = None
    sm_mhz: tuple[float, float] | None = None
    power_capped: float | None = None
    gates: list[Gate] = field(default_factory=list)
    mechanism: MechanismEvidence | None = None
    profiled: Profiled | None = None


def record_clock(record: Record) -> tuple[tuple[float, float] | None, float | None]:
    """The SM clock range a record ran at (over its samples in protocol 2; before and after them in
    protocol 1; its `sm_mhz` figure otherwise) and the share of its window under the power cap."""
    c = record.clocks
    clocks = [v for v in (c.sm_mhz_min, c.sm_mhz_max) if v is not None] or \
        [v for v in (c.sm_mhz_before, c.sm_mhz_after) if v is not None]
    capped = c.power_cap_s / c.window_s if c.window_s and c.power_cap_s else None
    if not clocks:
        mhz = record.figures().get("sm_mhz")
        return ((mhz, mhz) if mhz is not None else None), capped
    return (min(clocks), max(clocks)), capped


def registers_of(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def bytes_figure(figs: Mapping[str, float], level: str) -> str | None:
    """The profiled figure a record's declared bytes at `level` are held to: at DRAM the bytes a launch owes
    (where the profile has them, else the DRAM bytes it read and wrote), at L2 the L2 bytes, in shared memory the
    bytes TMA loads landed there (kwiki.verify.ncu.TMA_SMEM); None where the profile has no such counter (a
    profile from before it was collected, a GPU without it)."""
    if level == "dram":
        return "ncu_dram_owed_bytes" if "ncu_dram_owed_bytes" in figs else "ncu_dram_bytes"
    if level == "smem":
        return "ncu_tma_smem_bytes" if "ncu_tma_smem_bytes" in figs else None
    return "ncu_l2_bytes" if level == "l2" else None


def profiled(figures: Mapping[str, float], level: str | None) -> Profiled | None:
    """The Nsight Compute figures a record carries (kwiki.verify.profile), None when it was not profiled."""
    level = level or "dram"
    key = bytes_figure(figures, level)
    counted = figures.get(key) if key else None
    ratio, flops = figures.get("ncu_bytes_ratio"), figures.get("ncu_flops_ratio")
    if counted is None and ratio is None and flops is None:
        return None
    return Profiled(level=level, bytes=counted, bytes_ratio=round_sig(ratio, 4), flops_ratio=round_sig(flops, 4))


def _from_row(row: RecordRow) -> Entry:
    figures = dict(row.figures) if "time_us" in row.figures else {}
    mhz = row.figures.get("sm_mhz")
    regs = row.registers if row.registers is not None else registers_of(row.figures.get("registers"))
    return Entry(row.variant, dict(row.params), row.passed, figures, row.spread, regs,
                  (mhz, mhz) if mhz is not None else None, None, list(row.gates or []),
                  row.mechanism, profiled(row.figures, row.bytes_level))


# ---------------------------------------------------------------- the ladder


def rate_of(figures: Mapping[str, float], memory_bound: bool) -> tuple[float, str] | None:
    """The rate a ladder shows: TB/s on a memory-bound ladder (one with a ceiling variant), else TFLOP/s,
    else TB/s."""
    order = ("tb_per_s", "tflop_per_s") if memory_bound else ("tflop_per_s", "tb_per_s")
    for name in order:
        if name in figures:
            return figures[name], FIGURE_UNITS[name]
    return None


def rate_vs(mine: Mapping[str, float], theirs: Mapping[str, float]) -> float:
    """How much faster one record went than another, in like units only: FLOP/s over FLOP/s when both
    declare FLOPs, else bytes/s over bytes/s when both declare bytes, else the inverse ratio of times.

    Ratios of rates compare runs that do different amounts of work fairly (a read stream against a
    copy that moves each byte twice); for the same work they equal the ratio of times.
    """
    for unit in ("tflop_per_s", "gb_per_s"):
        if mine.get(unit) and theirs.get(unit):
            return mine[unit] / theirs[unit]
    return theirs["time_us"] / mine["time_us"]


def speed_of_light(entries: Sequence[Entry], ceiling: str | None) -> dict[str, float]:
    """GB/s of the ceiling variant per parameter set (params_text): the speed of light of that shape."""
    out: dict[str, float] = {}
    for e in entries:
        if ceiling and e.variant == ceiling and not e.gates and e.figures.get("gb_per_s"):
            out[params_text(e.params)] = e.figures["gb_per_s"]
    return out


def about(v: Variant | None) -> dict[str, Any]:
    return {"rung": v.rung, "adds": v.adds, "description": v.description or None} if v else {}


def _mechanism(evidence: MechanismEvidence, v: Variant | None) -> Mechanism:
    """A store row's SASS evidence, with the patterns the manifest's variant forbids named as such."""
    forbidden = set(v.sass.forbid) if v is not None and v.sass is not None else set()
    matched = {p for k in evidence.kernels for p in k.matched}
    return Mechanism(**dict(evidence), forbid=sorted(matched & forbidden))


def _rung(m: Manifest, e: Entry, base: Entry | None, sol: float | None) -> Rung:
    v = m.variant(e.variant)
    role = "baseline" if e.variant == m.baseline else "ceiling" if e.variant == m.ceiling else None
    common = {"variant": e.variant, **about(v), "role": role, "registers": e.registers, "sm_mhz": e.sm_mhz,
              "power_capped": e.power_capped, "profiled": e.profiled}
    if "time_us" not in e.figures:
        return Rung(**common, status="profiled" if e.passed else "check-failed")
    timed = {"time_us": e.figures["time_us"], "spread": e.spread}
    if e.gates:
        return Rung(**common, **timed, status="refused", gates=e.gates)
    rate = rate_of(e.figures, m.ceiling is not None)
    gbs = e.figures.get("gb_per_s")
    return Rung(**common, **timed, status="measured", rate=rate[0] if rate else None,
                rate_unit=rate[1] if rate else None,
                vs_baseline=round_sig(rate_vs(e.figures, base.figures), 4) if base is not None else None,
                of_speed_of_light=round_sig(gbs / sol, 4) if sol and gbs else None)


def ladder_of(m: Manifest, entries: Sequence[Entry], **where: str | None) -> Ladder:
    base = {params_text(e.params): e for e in entries if e.variant == m.baseline and "time_us" in e.figures}
    sol = speed_of_light(entries, m.ceiling)
    order = {v.name: i for i, v in enumerate(m.variants)}
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(params_text(e.params), []).append(e)
    swept = m.sweep_keys({k: (g[0].params, {e.variant for e in g}) for k, g in groups.items()})
    out = []
    for key in sorted(groups, key=lambda k: _natural(groups[k][0].params)):
        rows = sorted(groups[key], key=lambda e: (order.get(e.variant, len(order)), e.variant))
        params = rows[0].params
        out.append(ShapeGroup(params=params, label=shape_label(params), sweep=key in swept,
                              rows=[_rung(m, e, base.get(key), sol.get(key)) for e in rows]))
    mechanisms: dict[str, Mechanism] = {}
    for e in entries:
        if e.mechanism is not None and e.variant not in mechanisms:
            mechanisms[e.variant] = _mechanism(e.mechanism, m.variant(e.variant))
    return Ladder(artifact=m.name, title=m.title, baseline=m.baseline, ceiling=m.ceiling, groups=out,
                  mechanisms=mechanisms, **where)


def _same_code(row: RecordRow) -> tuple[str, str, str, str] | None:
    """What makes an earlier row's profile this row's: the artifact's files, target, variant and shape."""
    if not row.artifact_hash:
        return None
    return row.artifact_hash, row.target, row.variant, repr(sorted(row.params.items()))


def _earlier_profiles(rows: Sequence[RecordRow]) -> dict[tuple[str, str, str, str], Profiled]:
    """The newest profile of each (code, variant, shape) in `rows`, marked with its run: a timed run that found
    no cached profile (a fresh machine) still shows what Nsight Compute counted of the same binary's code."""
    out: dict[tuple[str, str, str, str], Profiled] = {}
    for row in sorted(rows, key=lambda r: (r.date, r.run_id)):
        key, p = _same_code(row), profiled(row.figures, row.bytes_level)
        if key is not None and p is not None:
            out[key] = p.model_copy(update={"run_id": row.run_id})
    return out


def _run_ladder(m: Manifest, rows: Sequence[RecordRow], run_id: str, path: str | None) -> Ladder:
    """The ladder of one run of `rows` (one GPU model's); a row with no profile of its own shows the newest one of
    the same code, variant and shape in another run, naming it."""
    run = [r for r in rows if r.run_id == run_id]
    latest = max(run, key=lambda r: r.date)
    earlier = _earlier_profiles([r for r in rows if r.run_id != run_id])
    entries = []
    for r in run:
        e, key = _from_row(r), _same_code(r)
        if e.profiled is None and key is not None:
            e.profiled = earlier.get(key)
        entries.append(e)
    return ladder_of(m, entries, path=path, target=latest.target, gpu=latest.gpu, date=latest.date, run_id=run_id)


def store_runs(m: Manifest, rows: Sequence[RecordRow], path: str | None = None) -> list[list[Ladder]]:
    """For each GPU model in the results store (rows of other artifacts ignored; models in name order), the ladders of
    the last RUNS runs of the series its latest run belongs to, oldest first: the runs a verdict stands on
    (kwiki.results.series). The last is the latest run's; a row written before series names only its own run."""
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in rows:
        if row.artifact == m.name:
            by_gpu.setdefault(row.gpu, []).append(row)
    out = []
    for gpu in sorted(by_gpu):
        latest = max(by_gpu[gpu], key=lambda r: (r.date, r.run_id))
        runs = runs_of(by_gpu[gpu], latest.series, m.name, None)[-RUNS:] if latest.series else []
        ids = [run[0].run_id for run in runs if run[0].run_id != latest.run_id] + [latest.run_id]
        out.append([_run_ladder(m, by_gpu[gpu], run_id, path) for run_id in ids])
    return out


def from_store(m: Manifest, rows: Sequence[RecordRow], path: str | None = None) -> list[Ladder]:
    """The ladder of the artifact's latest run on each GPU model in the results store (rows of other
    artifacts are ignored), GPU models in name order. A row of that run with no profile of its own shows the
    newest earlier one of the same code, variant and shape, naming its run."""
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in rows:
        if row.artifact == m.name:
            by_gpu.setdefault(row.gpu, []).append(row)
    return [_run_ladder(m, by_gpu[gpu], max(by_gpu[gpu], key=lambda r: (r.date, r.run_id)).run_id, path)
            for gpu in sorted(by_gpu)]


def median_ladder(runs: Sequence[Ladder]) -> Ladder:
    """The last of `runs` (ladders of one artifact on one GPU model, oldest first) with each measured row's time,
    rate, ratio to the baseline and share of the speed of light replaced by their medians over the runs in which
    that variant was measured on that shape (a refused or failed row counts in none, as in a verdict)."""
    *_, last = runs
    seen: dict[tuple[str, str], list[Rung]] = {}
    for ladder in runs:
        for g in ladder.groups:
            for r in g.rows:
                if r.status == "measured":
                    seen.setdefault((params_text(g.params), r.variant), []).append(r)

    def med(rows: list[Rung], name: str) -> float | None:
        values = [v for v in (getattr(r, name) for r in rows) if v is not None]
        return statistics.median(values) if values else None

    def row(g: ShapeGroup, r: Rung) -> Rung:
        rows = seen.get((params_text(g.params), r.variant), []) if r.status == "measured" else []
        if len(rows) < 2:
            return r
        return r.model_copy(update={k: med(rows, k) for k in ("time_us", "rate", "vs_baseline", "of_speed_of_light")})

    groups = [g.model_copy(update={"rows": [row(g, r) for r in g.rows]}) for g in last.groups]
    return last.model_copy(update={"groups": groups})


# ---------------------------------------------------------------- the best row of each shape


def _product(params: Mapping[str, Scalar]) -> int:
    """The product of a shape's whole numbers ('4096x7168' counts both): the order of sizes, smallest first."""
    out = 1
    for v in params.values():
        for part in ([] if isinstance(v, bool) else str(v).split("x")):
            out *= int(part) if part.isdigit() else 1
    return out


def ladder_groups(ladder: Ladder) -> list[ShapeGroup]:
    """The groups a ladder's tables show: every shape but the sweep's (`ShapeGroup.sweep`), which the curve
    across sizes draws."""
    return [g for g in ladder.groups if not g.sweep]


def sweep_note(ladder: Ladder) -> str:
    """The one line that stands for a ladder's sweep sizes in its tables ('' without any): how many, from which
    to which, and where they are drawn."""
    swept = [g for g in ladder.groups if g.sweep]
    if not swept:
        return ""
    variants = sorted({r.variant for g in swept for r in g.rows})
    swept.sort(key=lambda g: _product(g.params))
    span = f"{swept[0].label} to {swept[-1].label}" if len(swept) > 1 else swept[0].label
    return (f"plus {len(swept)} sweep size{'s' * (len(swept) != 1)} ({span}; {', '.join(variants)}): "
            "see the curve across sizes")


def best_per_shape(ladder: Ladder, *, ceiling: bool = False) -> list[tuple[ShapeGroup, Rung]]:
    """The fastest measured rung of each shape of a ladder, in the ladder's shape order (a shape with no
    measured rung is left out). One definition for the site's answer box, the agents' ladders and skills.

    Only `measured` rungs compete (a refused, failed or profile-only row never wins), and the ceiling variant
    (the speed of light, not a way to do the work) only with `ceiling`. Fastest is the highest rate among
    the rungs that have one, when they share its unit (the first on a tie, in the ladder's order); the
    shortest time when their units differ, or when no rung has a rate."""
    out = []
    for group in ladder.groups:
        rows = [r for r in group.rows if r.status == "measured" and r.time_us is not None
                and (ceiling or r.role != "ceiling")]
        rated = [r for r in rows if r.rate is not None]
        if rated and len({r.rate_unit for r in rated}) == 1:
            out.append((group, max(rated, key=lambda r: r.rate or 0.0)))
        elif rows:
            out.append((group, min(rated or rows, key=lambda r: r.time_us or 0.0)))
    return out

__all__ = ["Entry", "Ladder", "Mechanism", "Profiled", "Rung", "ShapeGroup", "best_per_shape", "bytes_figure",
           "from_store", "ladder_groups", "ladder_of", "median_ladder", "profiled", "rate_of", "rate_vs",
           "record_clock", "registers_of", "shape_label", "size_text", "speed_of_light", "store_runs", "sweep_note"]
