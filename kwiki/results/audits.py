"""Profile audits, committed: what Nsight Compute counted for each record of an artifact's code, and whether the
record's declared work held to it. The audit is part of "verified" (kwiki.results.states).

Where. `results/audits/<gpu model>.jsonl` (committed, beside the results store: a verify may start on a fresh
machine every time, so a cache under .kwiki/ is not enough), one JSON line per audited record: the artifact,
variant and params, declared and profiled bytes (at the record's level) and FLOPs, pass or fail and why. A later
line for the same key, variant and params replaces an earlier one.

The key. `audit_key(series, nvcc, target)`: the record's series key (the GPU model, the protocol and the hash of
the artifact's own files and build settings, names relative to the checkout: kwiki.verify.series.series_key),
the nvcc release and the build target. Two checkouts of the same commit, at any paths, agree on it; any edit of
the code, a new protocol or another compiler makes a new key, which has no audit until one is run.

What must be audited. A record declares work when it carries `bytes` (a `gb_per_s` figure) or `flops` (a
`tflop_per_s` figure). Such a record that a page's measured claim compares must have a passing audit of the same
key, or the page is "measured", never "verified", and says which record lacks one, wherever a record that does
less work than it declares would move the claim towards passing (`audited`): such a record looks faster, its
times lower and its rates higher, so in a claim bounded on one side the side that moves the value towards its
bound is audited (the kernel a speed-up or a share of a roof is claimed for) and the other is not (the roof or
baseline it is compared with: doing less there only makes the claim harder); a claim bounded on both sides, or
a figure that is neither a time nor a rate, audits both. A record that declares no work (a time, a ratio of
times, an outcome) has nothing to audit.

A selection pass. A variant that picks its kernel per shape (a tuned configuration, cuBLASLt's best heuristic)
names its choice in the record's `extra.selected`. The profiled run only checks, so its selection takes the first
candidate that passes, while the timed run takes the fastest: where the two differ, or the timed choice is not
known (`kwiki verify --profile` alone), Nsight Compute counted another kernel than the one timed, and the row does
not pass ("not an audit of the timed kernel"; kwiki.verify.profile.Audit.other_kernel), nor are its counters
copied onto the timed record. A row that matched names the configuration (`selection`); a record chosen by a
selection pass (it carries `selected_from`) is audited only by such a row, so rows written before kwiki made the
comparison no longer count for it, and a timed run audits it again.

Tolerances, from evidence. The audit is one-sided: a record fails when declared > profiled x (1 + tolerance)
(kwiki.verify.profile.audit). Over every honest record of the committed store with a profile (the run of
2026-12-01 that carried the cached profiles of 9 artifacts; no gate failed, every check passed), declared /
profiled was:

    level   records   min     median   90th pct   max
    DRAM    201       0.092   0.977    0.9994     1.000
    L2        4       0.644   0.987    0.987      0.987
    FP32     35       0.864   0.985    1.000      1.000

No honest record declares more than it moves (ratios below 1 are kernels that move more than they declare:
a GEMM that re-reads panels, a read of 1/4 of the L2 that also evicts). The counters count sectors, so an honest
ratio sits at 1.000 at most; the tolerance only has to absorb the rounding of a declared figure. At the old 10%,
a kernel that skipped 7% of its bytes (ratio 1.075) passed. Chosen: DRAM 2%, L2 2%, FP32 FLOPs 1% (counted
instructions are exact). Shared memory (bytes TMA loads land there, kwiki.verify.ncu.TMA_SMEM) 2%: the counter
counts whole boxes: on an H100 (`ncu` over tma_sm90a's profile mode) and in the H200's audit of its 16 cluster
records (both 2026-12-06) it read exactly the declared bytes, copy and multicast, clusters of 2 and 4 (1.000).
`tests/test_audits.py` recomputes the distribution from results/ and fails when an honest record would fail a
tolerance, or a tolerance exceeds the honest maximum by more than its margin.

Cost. An audit replays each profiled kernel once per metric pass; AUDIT_BUDGET_S bounds one artifact's audit
(the profile is killed past it and the artifact stays unaudited, saying so).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from kwiki.core.numbers import params_text
from kwiki.core.strict import Scalar, Strict
from kwiki.results.store import gpu_slug
from kwiki.results.storelines import RESULTS_DIR
from kwiki.wiki.model import Claim, Metric, Selector

AUDITS_DIR = "audits"
TOLERANCE = {"dram": 0.02, "l2": 0.02, "smem": 0.02}  # declared bytes over profiled, per level (see above)
FLOPS_TOLERANCE = 0.01  # declared FLOPs over counted FLOPs
AUDIT_BUDGET_S = 180.0  # one artifact's audit at most
AUDIT_VERSION = 1


def audit_key(series: str | None, nvcc: str | None, target: str | None) -> str | None:
    """The key of the audits of one artifact's code and toolchain (None without a series)."""
    if not series:
        return None
    doc = json.dumps({"v": AUDIT_VERSION, "series": series, "nvcc": nvcc or "", "target": target or ""},
                     sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


class AuditRow(Strict):
    """One audited record."""

    kind: Literal["audit"] = "audit"
    key: str
    artifact: str
    series: str
    nvcc: str | None = None
    target: str
    variant: str
    params: dict[str, Scalar]
    bytes_level: str = "dram"
    bytes_declared: float | None = None
    bytes_profiled: float | None = None
    flops_declared: float | None = None
    flops_profiled: float | None = None
    tolerance: float
    passed: bool
    reason: str | None = None
    note: str | None = None
    gpu: str
    date: str
    # a record chosen by a selection pass: the configuration profiled, found to be the one the timed run chose
    # (absent on rows written before kwiki compared the two: SELECTION below)
    selection: str | None = None

    @property
    def ident(self) -> tuple[str, str, str]:
        return self.key, self.variant, params_text(self.params)

    @property
    def counted(self) -> bool:
        """Nsight Compute counted some of the work the record declares. An audit that counted none (a copy-engine
        transfer such as cudaMemcpyAsync runs no kernel; a level no counter reads) found no mismatch because it
        looked at nothing: it audits nothing."""
        return ((self.bytes_declared is not None and self.bytes_profiled is not None)
                or (self.flops_declared is not None and self.flops_profiled is not None))


def audits_path(root: Path, gpu: str) -> Path:
    return root / RESULTS_DIR / AUDITS_DIR / f"{gpu_slug(gpu)}.jsonl"


class Audits:
    """Every committed audit, the latest per (key, variant, params)."""

    def __init__(self, rows: Iterable[AuditRow] = ()):
        self.rows: dict[tuple[str, str, str], AuditRow] = {}
        for row in rows:
            self.rows[row.ident] = row

    @classmethod
    def load(cls, root: Path) -> Audits:
        """The audits under results/audits/ (a line that is not one is skipped: `kwiki check` is not its place)."""
        rows: list[AuditRow] = []
        directory = root / RESULTS_DIR / AUDITS_DIR
        if directory.is_dir():
            for path in sorted(directory.glob("*.jsonl")):
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        rows.append(AuditRow.model_validate_json(line))
                    except ValidationError:
                        continue
        return cls(rows)

    def find(self, key: str | None, variant: str, params: Mapping[str, object]) -> AuditRow | None:
        return self.rows.get((key, variant, params_text(params))) if key else None

    def uncountable(self, key: str | None, variant: str, params: Mapping[str, object]) -> bool:
        """An audit of this very code saw no DRAM traffic of a record that declares DRAM bytes only: no kernel of
        its own ran (a copy-engine transfer such as cudaMemcpyAsync). Profiling the same code again would see none
        again, so a timed run does not ask for it (the record stays unaudited). FLOPs counted but not audited (an
        uncalibrated tensor dtype) are asked again: a later kwiki may calibrate them."""
        row = self.find(key, variant, params)
        return (row is not None and row.passed and not row.counted and row.bytes_level == "dram"
                and row.bytes_declared is not None and row.flops_declared is None)

    def why_not(self, key: str | None, artifact: str, variant: str, params: Mapping[str, object], *,
                selected: bool = False) -> str | None:
        """Why a record that declares work is not audited (None: it passed an audit of the same code). `selected`:
        the record was chosen by a selection pass (selected(figures)), so only a row that matched the profiled
        choice with the timed one audits it."""
        row = self.find(key, variant, params)
        where = f"{artifact} {variant}" + (f" [{params_text(params)}]" if params else "")
        if row is None:
            return f"{where} has no profile audit of this code (kwiki verify runs it where ncu is found)"
        if not row.passed:
            return f"{where} failed its profile audit: {row.reason or 'declared more work than profiled'}"
        if selected and row.selection is None:
            return (f"{where} was chosen by a selection pass, and its profile audit was written before kwiki compared "
                    "the configuration profiled with the one timed: it may be of another kernel")
        if not row.counted:
            return (f"{where}: Nsight Compute counted none of its declared work (no kernel of its own, or no counter "
                    "at its level), so its profile audit checked nothing")
        return None


def selected(figures: Mapping[str, object]) -> bool:
    """A record chosen by a selection pass (it carries `selected_from`, the number of candidates tried)."""
    return "selected_from" in figures


def append_audits(root: Path, gpu: str, rows: list[AuditRow]) -> None:
    """Add `rows` to the GPU model's audit file (replacing the audits of the same keys), atomically."""
    from kwiki.results.keyed import replace_lines

    replace_lines(audits_path(root, gpu), rows, AuditRow)


# figures a record that does less work than it declares makes lower (times) or higher (rates); Selector.figure,
# the regime aside (a sustained figure is of the same kind)
TIMES = frozenset({"time_us", "time_ms", "event_us", "span_us"})
RATES = frozenset({"gb_per_s", "tb_per_s", "tflop_per_s", "gflop_per_s", "flop_per_clk_per_sm"})


def audited(claim: Claim) -> list[Selector]:
    """The figures of a measured claim whose records must pass an audit: those that a record doing less work than
    it declares would move towards passing (see the module's "What must be audited")."""
    m = claim.measure
    if m is None or claim.metric == Metric.outcome:
        return []
    sides = [(sel, i == 0) for i, sel in enumerate((m.of, m.per)) if sel is not None]
    if (claim.at_least is None) == (claim.at_most is None) or claim.value is not None:
        return [sel for sel, _ in sides]  # bounded on both sides, or on none: either way can help
    towards_up = claim.at_least is not None
    out = []
    for sel, is_of in sides:
        if sel.figure not in TIMES | RATES:
            out.append(sel)  # neither a time nor a rate: which way less work moves it is not known
            continue
        up = (sel.figure in RATES) == is_of  # a faster record raises a rate above the line, a time below it
        if up == towards_up:
            out.append(sel)
    return out


def declares_work(figures: Mapping[str, float]) -> bool:
    """Whether a stored record declared bytes or FLOPs (its figures carry the rates made from them)."""
    return "gb_per_s" in figures or "tflop_per_s" in figures


def tolerance_for(level: str) -> float | None:
    """The bytes tolerance of a level (None: no counter, not audited)."""
    return TOLERANCE.get(level)


def distribution(ratios: Iterable[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """(level, declared/profiled) of honest records -> per level: records, min, median, p90 and max."""
    import statistics

    by: dict[str, list[float]] = {}
    for level, ratio in ratios:
        by.setdefault(level, []).append(ratio)
    out = {}
    for level, xs in sorted(by.items()):
        xs.sort()
        out[level] = {"records": float(len(xs)), "min": xs[0], "median": statistics.median(xs),
                      "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))], "max": xs[-1]}
    return out
