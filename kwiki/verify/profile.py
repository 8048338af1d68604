"""`kwiki verify --profile`: Nsight Compute counters per record, and the one-sided audit of declared bytes and FLOPs.

`kwiki verify --profile` runs build -> profile only (no timed runs: kwiki.verify.pipeline). One `ncu` process per
artifact runs its binary in profile mode (`--profile-mode` of kwiki_runner.cuh: check every case, then launch each
case that passed once more, alone in a cudaProfilerStart/Stop range after a marker kernel of n+1 blocks, n
counting the profiled cases of the whole process; the case's record carries extra.profile_case = n). A record's
figures are the counters of the kernels of that ONE launch (a cuBLAS call may be two kernels: the GEMM and its
split-K reduction), summed: DRAM bytes = dram__bytes_read.sum + dram__bytes_write.sum, in bytes (the report is
asked for in base units; scaled units, Kbyte/Mbyte/..., are converted back). DRAM writes are counted when the L2
evicts a dirty line, and an output that fits in the 60 MiB L2 is still there when the kernel ends: its write-back
falls after the profiled range. The DRAM bytes a launch owes (`ncu_dram_owed_bytes`, what the DRAM-level audit
holds declared bytes to) are therefore its DRAM reads plus the larger of its DRAM writes and the bytes the SMs
wrote into the L2 (lts__t_sectors_srcunit_tex_op_write x 32): every such byte reaches DRAM unless written again.
ncu runs with `--profile-from-start off` (it sees only those ranges), `--kernel-name regex:` (the literals of the
manifest's `kernels:` globs, plus the markers: a superset, narrowed by the globs afterwards), `--cache-control all`
(a cold L2, as in the timing protocol) and always `--clock-control none` (the clocks stay as the timing runs had them;
`ncu_argv` adds it whatever the caller asks). ncu's own `--launch-count` bounds a whole process, so it is not
the way to see each variant once: the profile mode launches each case once instead. A variant chosen by a
selection pass (a tuned configuration, a library's best algorithm; extra.selected) is profiled as the timed run chose
it where the artifact takes `--choose` (kwiki_choice.cuh): the profiled run times nothing, and would otherwise take
the first candidate that passes (an audit of another kernel, which neither passes nor lends its counters).

The audit is one-sided: a record whose declared bytes (at its `bytes_level`: DRAM, L2, or shared memory where TMA
loads land them) or FP32 FLOPs exceed the profiled ones x (1 + tolerance) fails the `profile` gate; a kernel that
moves or computes more than it declares (a GEMM re-reads panels, a padded tile computes zeros) passes, and the
ratio is reported either way.
Tensor-core FLOPs have no counter here and are not audited. The counters become figures claims can name
(`ncu_dram_read_bytes`, ...): the profiles are cached under .kwiki/profile/, keyed by the binary's hash, its
arguments, the metric set and the GPU model, so a session profiles only what changed, and a later timed
`kwiki verify` of the same binaries copies the cached figures into its records (`cached_stage`: no ncu run) and
applies the same audit there.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwiki.core.errors import Problem, RecordError
from kwiki.core.machine import seal, sealed
from kwiki.core.numbers import fmt, params_text
from kwiki.core.paths import shown
from kwiki.core.proc import run_group
from kwiki.core.writefile import write_atomic
from kwiki.results.audits import FLOPS_TOLERANCE, AuditRow, tolerance_for
from kwiki.results.ladders import bytes_figure
from kwiki.results.peaks import DTYPES
from kwiki.results.record import Record, parse_records
from kwiki.verify import kernels as kmatch
from kwiki.verify.build import artifact_hash
from kwiki.verify.ncu import METRICS, figures, find_ncu, ncu_argv, number, read_csv
from kwiki.verify.run import argv_for
from kwiki.verify.types import (
    DEFAULT_PROFILE_TOLERANCE,
    BuildResult,
    Finding,
    Gating,
    Plan,
    PlannedArtifact,
    RunOutcome,
)
from kwiki.wiki.manifest import MANIFEST

PROFILE = "profile"
CACHE_DIR = ".kwiki/profile"
CACHE_VERSION = 2  # 2: one marker per profiled case, numbered per process (1 summed every shape into shape 1)
DEFAULT_TOLERANCE = DEFAULT_PROFILE_TOLERANCE
TIMEOUT_FACTOR = 4.0  # a profiled run replays each kernel several times
MARKER = "profile_marker"  # kwiki::profile_marker<0>() of kwiki_runner.cuh
PROFILE_CASE = "profile_case"  # a profile-mode record's extra: the number of its marker
PROFILE_MODE = "--profile-mode"
CHOOSE = "--choose"  # kwiki_choice.cuh: the timed run's selections, told to the profiled run (VARIANT@SHAPE=CHOICE;...)

# ---------------------------------------------------------------- rows -> records


class ReportError(ValueError):
    """An ncu report whose markers cannot give kernels to records."""


def by_case(rows: list[dict[str, str]]) -> dict[int, list[dict[str, str]]]:
    """The profiled kernels of each profiled case: the rows after the marker of n+1 blocks, up to the next marker,
    are case n's (its launch alone in a profiler range: nothing else is profiled in between). Rows before the first
    marker belong to no case. A marker number seen twice is a ReportError: its rows would be summed into one
    record (a binary whose runner numbered the cases per run() call, once per shape, did that)."""
    out: dict[int, list[dict[str, str]]] = {}
    current: int | None = None
    for row in rows:
        if MARKER in row.get("Kernel Name", ""):
            grid = int(number(row.get("launch__grid_size")) or 0)
            if grid < 1:
                raise ReportError("a profile marker without a grid size (launch__grid_size "
                                  f"{row.get('launch__grid_size')!r})")
            current = grid - 1
            if current in out:
                raise ReportError(f"profile marker {current} appears twice: the report cannot say which record each "
                                  "kernel belongs to (rebuild the binary: its kwiki_runner.cuh predates per-process "
                                  "case numbers)")
            out[current] = []
            continue
        if current is not None:
            out[current].append(row)
    return out


def cases(records: list[Record], rows: list[dict[str, str]]) -> list[tuple[Record, list[dict[str, str]]]]:
    """Each profiled record with the rows of its ONE profiled launch (by its extra.profile_case). Records without
    one were not profiled (a failed check, an untimed case)."""
    by = by_case(rows)
    out = []
    named: list[int] = []  # the case numbers the records carry
    for r in records:
        n = r.extra.get(PROFILE_CASE)
        if n is None:
            continue
        if isinstance(n, bool) or not isinstance(n, int | float) or n != int(n):
            raise ReportError(f"variant {r.variant!r}: extra.{PROFILE_CASE} is {n!r}, not a case number")
        named.append(int(n))
        mine = by.get(int(n))
        if mine is not None:
            out.append((r, mine))
    if by and not out:
        if named:  # both sides numbered, but differently: say which numbers, so the mismatch can be traced
            raise ReportError(f"{len(records)} records carry extra.{PROFILE_CASE} {_numbers(named)}, the report's "
                              f"markers are {_numbers(list(by))}: no record matches a marker")
        raise ReportError(f"no record carries extra.{PROFILE_CASE} ({len(records)} records; rebuild the binary: its "
                          "kwiki_runner.cuh predates per-process case numbers)")
    return out


def _numbers(ns: list[int]) -> str:
    """Case numbers as a short sorted text: `0-3, 7` (runs of consecutive numbers joined)."""
    spans: list[list[int]] = []  # [first, last] of each run
    for n in sorted(set(ns)):
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


# ---------------------------------------------------------------- the audit


@dataclass
class Audit:
    """One record's declared work against its profile."""

    variant: str
    params: dict[str, Any]
    figures: dict[str, float]
    kernels: list[str]
    bytes_declared: float | None = None
    bytes_measured: float | None = None
    bytes_level: str = "dram"
    flops_declared: float | None = None
    flops_measured: float | None = None
    finding: Finding | None = None
    note: str | None = None
    tolerance: float | None = None  # the bytes tolerance it was held to
    # A variant with a selection pass (w4_tuned, cublaslt_best: extra.selected names the configuration it chose).
    # The profiled run only checks, so its selection takes the first candidate that passes; the timed run takes the
    # fastest. `selected` is the profiled run's choice, `timed_selected` the timed run's (None: not known here).
    selected: str | None = None
    timed_selected: str | None = None

    @property
    def other_kernel(self) -> bool:
        """The profile is not of the kernel the timed record ran: a selection whose timed choice differs from the
        profiled one, or is not known. Such an audit neither passes for the record nor lends it its counters."""
        return self.selected is not None and self.timed_selected != self.selected

    @property
    def other_kernel_reason(self) -> str:
        timed = f"the timed run's {self.timed_selected!r}" if self.timed_selected else "a choice not known here"
        return (f"profiled configuration {self.selected!r} of a selection pass (a profiled run only checks, so it "
                f"takes the first candidate that passes), not {timed}: not an audit of the timed kernel")

    @property
    def bytes_ratio(self) -> float | None:
        return _ratio(self.bytes_declared, self.bytes_measured)

    @property
    def flops_ratio(self) -> float | None:
        return _ratio(self.flops_declared, self.flops_measured)

    def as_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "params": self.params, "figures": self.figures, "kernels": self.kernels,
                "bytes_level": self.bytes_level, "bytes_declared": self.bytes_declared,
                "bytes_profiled": self.bytes_measured, "bytes_ratio": self.bytes_ratio,
                "flops_declared": self.flops_declared, "flops_profiled": self.flops_measured,
                "flops_ratio": self.flops_ratio, "failed": self.finding.reason if self.finding else None,
                "note": self.note, "selected": self.selected, "timed_selected": self.timed_selected}


def _ratio(declared: float | None, measured: float | None) -> float | None:
    if declared is None or measured is None or measured <= 0:
        return None
    return declared / measured


FP32 = {"fp32", "f32", "float"}
# FLOPs per operation of Nsight Compute's sm__ops_path_tensor_src_* counters, by the record's dtype (its spelling
# made the rate table's by kwiki.results.peaks.DTYPES, an output suffix such as "-f32out" dropped), calibrated on
# kernels of known work, the wgmma artifact's loops, profiled on the H200: bf16 (n256_wg1, n256_wg2) and tf32
# (tf32_n256_wg2) on 2026-12-02 (`kwiki verify --profile --no-write skill-wgmma-ptx --variants ...`), fp8 (e4m3 and
# e5m2 m64n256k32, one and two warpgroups: 2.2677e12 operations for 2.2677e12 declared FLOPs) on 2026-12-03 in
# the audits of a timed `kwiki verify skill-wgmma-ptx`. Each counted exactly its declared FLOPs: one operation is
# one FLOP (a multiply-add counts two). A dtype not listed (fp16, int8 until a kernel calibrates it) has its tensor
# FLOPs counted, not audited.
TENSOR_FLOPS_PER_OP: dict[str, float] = {"bf16": 1.0, "tf32": 1.0, "fp8": 1.0}


def tensor_dtype(dtype: str) -> str | None:
    """The rate table's name of a record's dtype ('float8_e4m3fn-f32out' -> 'fp8'), None when it has none."""
    return DTYPES.get(dtype) or DTYPES.get(dtype.split("-", 1)[0])


def path_flops(path: str, dtype: str, figs: dict[str, float]) -> float | str:
    """The FLOPs of a record of `dtype` Nsight Compute counted on one path ('tensor' or 'fp32'), or why it cannot
    say."""
    if path == "fp32":
        return figs.get("ncu_fp32_flops", "no FP32 counter here")
    per_op = TENSOR_FLOPS_PER_OP.get(tensor_dtype(dtype) or "")
    if "ncu_tensor_ops" not in figs:
        return "no tensor-path counter here"
    if per_op is None:
        return f"the tensor path's operations per {dtype or 'tensor'} FLOP are not yet calibrated"
    return figs["ncu_tensor_ops"] * per_op


def audit(record: Record, figs: dict[str, float], tolerance: float | None, where: str,
          paths: tuple[str, ...] | None = None) -> Audit:
    """Hold `record`'s declared bytes (DRAM, L2 or shared-memory level) and FLOPs (on its dtype's path: the FP32
    counters or the tensor path's operations) to the profiled ones x (1 + tolerance); `tolerance` None: each level's,
    set from evidence (kwiki.results.audits). `paths`: those its manifest counts its FLOPs on together
    (Variant.flops_paths), in place of its dtype's own."""
    a = Audit(record.variant, dict(record.params), figs, [], bytes_level=record.bytes_level)
    level_tol = tolerance if tolerance is not None else tolerance_for(record.bytes_level)
    limit = 1 + (level_tol if level_tol is not None else 0.0)
    flops_limit = 1 + (tolerance if tolerance is not None else FLOPS_TOLERANCE)
    a.tolerance = level_tol
    why = []
    if record.bytes:
        key = bytes_figure(figs, record.bytes_level)
        a.bytes_declared = record.bytes
        a.bytes_measured = figs.get(key) if key else None
        if key is None:
            a.note = f"{record.bytes_level} bytes are not audited (no counter here)"
        elif a.bytes_measured is not None and record.bytes > a.bytes_measured * limit:
            why.append(f"declares {fmt(record.bytes, 3)} {record.bytes_level.upper()} bytes, Nsight Compute saw "
                       f"{fmt(a.bytes_measured, 3)} (x{record.bytes / max(a.bytes_measured, 1.0):.3f}; more than "
                       f"x{limit:g} fails)")
    dtype = str(record.flops_dtype or record.params.get("dtype") or "").lower()
    if record.flops:
        a.flops_declared = record.flops
        on = paths or (("fp32",) if dtype in FP32 else ("tensor",))  # the manifest's paths, else its dtype's
        counts = [path_flops(p, dtype, figs) for p in on]
        named = "FP32" if dtype in FP32 else dtype or "tensor"
        unread = [c for c in counts if isinstance(c, str)]
        if unread:
            a.note = "; ".join(filter(None, [a.note, f"{named} FLOPs are not audited: " + "; ".join(unread)]))
        else:
            a.flops_measured = sum(c for c in counts if not isinstance(c, str))
            if record.flops > a.flops_measured * flops_limit:
                over = record.flops / max(a.flops_measured, 1.0)
                path = f"the {' and '.join(on)} paths together" if len(on) > 1 else f"the {on[0]} path"
                why.append(f"declares {fmt(record.flops, 3)} {named} FLOPs, Nsight Compute counted "
                           f"{fmt(a.flops_measured, 3)} on {path} (x{over:.3f}; more than x{flops_limit:g} fails)")
    if why:
        a.finding = Finding(PROFILE, f"{where}: " + "; ".join(why))
    return a


# ---------------------------------------------------------------- one artifact


@dataclass
class ArtifactProfile:
    artifact: str
    audits: list[Audit] = field(default_factory=list)
    error: str | None = None
    cached: bool = False
    seconds: float = 0.0
    log: str | None = None
    skipped: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "error": self.error, "cached": self.cached, "skipped": self.skipped,
                "seconds": round(self.seconds, 3), "log": self.log, "records": [a.as_json() for a in self.audits]}


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def profiler_identity(ncu: str | None) -> str | None:
    """The profiler as this machine has it: its resolved path, size and modification time (None: no ncu here)."""
    if not ncu:
        return None
    try:
        real = os.path.realpath(ncu)
        info = os.stat(real)
    except (OSError, ValueError):
        return None
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


def cache_key(binary: str, app: list[str], gpu: str | None, profiler: str | None = None,
              code: str | None = None) -> str:
    """The profile's cache key: the binary's contents, its arguments, the metric set, the GPU model and the
    profiler's identity (`profiler_identity`: a timed run finds the profile through the ncu it would run); for a
    Python artifact, whose "binary" is its module, `code` is the hash of its whole directory and the harness."""
    doc = {"v": CACHE_VERSION, "binary": _file_hash(binary), "args": app[1:], "metrics": METRICS, "gpu": gpu,
           "profiler": profiler, **({"code": code} if code else {})}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def _key(planned: PlannedArtifact, build: BuildResult, app: list[str], gpu: str | None, profiler: str | None,
         root: Path) -> str:
    assert build.binary is not None and planned.manifest is not None
    code = artifact_hash(planned.directory, root) if planned.manifest.kind == "python" else None
    return cache_key(build.binary, app, gpu, profiler, code)


def kernel_regex(planned: PlannedArtifact, variants: list[str]) -> str | None:
    assert planned.manifest is not None
    wanted = [planned.manifest.variant(v) for v in variants]
    if any(w is None or not w.kernels for w in wanted):
        return None  # a variant that names no kernels: every kernel is profiled (the markers still split them)
    patterns = [p for w in wanted if w for p in w.kernels]
    if not patterns:
        return None
    literal = kmatch.prefilter(patterns)
    return None if literal is None else f"{literal}|{MARKER}"


def told_choices(records: Iterable[Record]) -> str | None:
    """`--choose`'s value (kwiki_choice.cuh) from a timed run's records: VARIANT@SHAPE=CHOICE for each passed record
    of a selection pass (extra.selected) whose params name its shape (params.shape), so that the profiled run, which
    times nothing, profiles the kernel the timed record ran instead of the first candidate that passes. A variant and
    shape that two records chose differently, or whose text the option cannot carry, is left out (its audit then
    says it is of another kernel, as before); None when nothing is told."""
    told: dict[str, str | None] = {}
    for r in records:
        choice, shape = r.extra.get("selected"), r.params.get("shape")
        if not r.check.passed or not isinstance(choice, str) or not isinstance(shape, str):
            continue
        key = f"{r.variant}@{shape}"
        if ";" in key + choice or "=" in key or key.count("@") != 1 or not choice:
            continue
        told[key] = choice if told.get(key, choice) == choice else None
    entries = [f"{key}={choice}" for key, choice in sorted(told.items()) if choice is not None]
    return ";".join(entries) or None


def _app(planned: PlannedArtifact, build: BuildResult, out: ArtifactProfile, root: Path,
         choices: str | None = None) -> list[str] | None:
    """The profiled command (the binary in profile mode over the shared-process variants, told the timed run's
    `choices` where there are any: told_choices), or None (out.skipped)."""
    m = planned.manifest
    assert m is not None
    if m.kind == "python":  # the harness in its profile mode: Nsight Compute wraps the interpreter, and the
        # markers give each record the kernels of its one profiled call (kwiki_harness.py, profile_params)
        return _python_app(planned, build, out, root)
    if why := m.not_the_binary():
        out.skipped = f"{why}: not profiled here"
        return None
    assert build.binary is not None
    if not planned.run_variants:
        out.skipped = "no variant runs in the shared process"
        return None
    return [*argv_for(planned, build.binary, planned.run_variants), PROFILE_MODE,
            *([f"{CHOOSE}={choices}"] if choices else [])]


def _python_app(planned: PlannedArtifact, build: BuildResult, out: ArtifactProfile, root: Path) -> list[str] | None:
    from kwiki.verify.pyartifact import harness_argv

    assert planned.manifest is not None
    if not planned.run_variants:
        out.skipped = "no variant runs in the shared process"
        return None
    return [*harness_argv(root, planned.manifest, build, planned.run_variants, "cuda", 1), PROFILE_MODE]


def _read_cache(path: Path, root: Path) -> tuple[str, str] | None:
    """The cached (stdout, report) at `path`, when this machine's kwiki wrote it (its seal, kwiki.core.machine)."""
    try:
        doc = json.loads(path.read_text())
        got = str(doc["stdout"]), str(doc["report"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return got if sealed(root, doc.get("seal"), "profile", path.stem, *got) else None


def cached_profile(planned: PlannedArtifact, build: BuildResult, *, root: Path, gpu: str | None,
                   tolerance: float | None = DEFAULT_TOLERANCE) -> ArtifactProfile | None:
    """The audited profile `kwiki verify --profile` cached for this very binary, arguments and GPU model, or None
    (no ncu run: for a timed run, whose records then carry the figures)."""
    m = planned.manifest
    if m is None or build.binary is None or not (root / CACHE_DIR / m.name).is_dir():
        return None
    out = ArtifactProfile(m.name, cached=True)
    app = _app(planned, build, out, root)
    if app is None:
        return None
    profiler = profiler_identity(find_ncu())
    if profiler is None:
        return None
    got = _read_cache(root / CACHE_DIR / m.name / f"{_key(planned, build, app, gpu, profiler, root)}.json", root)
    if got is None:
        return None
    _audit_all(out, *got, tolerance, shown(planned.directory / MANIFEST, root), m.flops_dtypes, m.flops_paths)
    return out


def profile_artifact(planned: PlannedArtifact, build: BuildResult, *, ncu: str, root: Path, gpu: str | None,
                     gpu_index: int | None, tolerance: float | None = DEFAULT_TOLERANCE,
                     budget_s: float | None = None, choices: str | None = None) -> ArtifactProfile:
    """Profile the artifact's shared-process variants in one ncu process (or read the cache) and audit them;
    `budget_s` bounds the ncu run (an audit run by default: AUDIT_BUDGET_S); `choices`: the timed run's selections
    (told_choices)."""
    m = planned.manifest
    assert m is not None and build.binary is not None
    out = ArtifactProfile(m.name)
    app = _app(planned, build, out, root, choices)
    if app is None:
        return out
    key = _key(planned, build, app, gpu, profiler_identity(ncu), root)
    cache = root / CACHE_DIR / m.name / f"{key}.json"
    rel = shown(planned.directory / MANIFEST, root)
    got = _read_cache(cache, root)
    out.cached = got is not None
    if got is None:
        log_dir = root / CACHE_DIR / m.name
        log_dir.mkdir(parents=True, exist_ok=True)
        log_file = log_dir / f"{key}.csv.tmp{os.getpid()}"
        argv = ncu_argv(ncu, app, metrics=METRICS, log_file=str(log_file),
                        kernel_regex=kernel_regex(planned, planned.run_variants))
        env = dict(os.environ)
        if m.kind == "python":
            from kwiki.verify.pyartifact import LIBRARY_ENV, environment

            env = environment(root, gpu_index)
            if build.library:
                env[LIBRARY_ENV] = build.library
        elif gpu_index is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
        limit = min(3600.0, m.run.timeout_s * TIMEOUT_FACTOR)
        res = run_group(argv, cwd=planned.directory, env=env, timeout=min(limit, budget_s or limit),
                        max_output=m.run.max_output_bytes)
        out.seconds = res.seconds
        report = log_file.read_text(errors="replace") if log_file.exists() else ""
        log_file.unlink(missing_ok=True)
        log = log_dir / f"{key}.log"
        log.write_text(f"$ {' '.join(argv)}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}\n--- report\n{report}\n"
                       f"--- exit {res.returncode} after {res.seconds:.2f} s\n", encoding="utf-8")
        out.log = str(log.relative_to(root))
        tail = [ln for ln in (res.stderr + "\n" + report).splitlines() if ln.startswith("==ERROR==")][:2]
        if res.start_error or res.timed_out or res.returncode not in (0, 1) or tail:
            why = res.start_error or ((f"over its budget of {budget_s:.0f} s" if budget_s else "timed out")
                                      if res.timed_out else f"exit {res.returncode}")
            out.error = f"{rel}: ncu {why}" + (f": {' | '.join(tail)[:300]}" if tail else "")
            return out
        got = (res.stdout, report)
    read = _audit_all(out, *got, tolerance, rel, m.flops_dtypes, m.flops_paths)
    if read and not out.cached:  # cache only what could be read
        doc = {"stdout": got[0], "report": got[1], "ncu": ncu, "seal": seal(root, "profile", key, *got)}
        write_atomic(cache, json.dumps(doc, sort_keys=True).encode())
    return out


def _audit_all(out: ArtifactProfile, stdout: str, report: str, tolerance: float | None, rel: str,
               flops_dtypes: dict[str, str] | None = None,
               flops_paths: Mapping[str, tuple[str, ...]] | None = None) -> bool:
    """Audit every profiled record of one run into `out`; False (and out.error) when the run cannot be read.
    `flops_dtypes`, `flops_paths`: the manifest's Manifest.flops_dtypes and Manifest.flops_paths."""
    try:
        profiled = cases(parse_records(stdout, out.artifact, flops_dtypes), read_csv(report))
    except (RecordError, csv.Error, ReportError) as exc:
        out.error = f"{rel}: cannot read the profiled run: {getattr(exc, 'message', exc)}"
        return False
    for r, rows in profiled:
        figs = figures(rows)
        a = audit(r, figs, tolerance, f"{rel}: variant {r.variant!r} at {params_text(r.params) or 'its params'}",
                  (flops_paths or {}).get(r.variant))
        a.kernels = sorted({row.get("Kernel Name", "") for row in rows})
        chosen = r.extra.get("selected")
        a.selected = str(chosen) if chosen is not None else None
        if a.bytes_ratio is not None:
            figs["ncu_bytes_ratio"] = a.bytes_ratio
        if a.flops_ratio is not None:
            figs["ncu_flops_ratio"] = a.flops_ratio
        out.audits.append(a)
    if not out.audits:
        out.error = (f"{rel}: ncu profiled no case (no profile marker in its report: was the binary built with "
                     "kwiki_runner.cuh's --profile-mode, and did a case pass its check?)")
        return False
    return True


def _pairs(profiles: list[ArtifactProfile], outcomes: Mapping[str, list[Any]],
           names: Mapping[str, str]) -> list[tuple[Audit, Record]]:
    """Each audit with the timed record of the same artifact, variant and params."""
    by_name = {p.artifact: p for p in profiles}
    out = []
    for path, outs in outcomes.items():
        prof = by_name.get(names.get(path, ""))
        if prof is None:
            continue
        index = {(a.variant, params_text(a.params)): a for a in prof.audits}
        for o in outs:
            for r in o.records:
                a = index.get((r.variant, params_text(r.params)))
                if a is not None:
                    out.append((a, r))
    return out


def match_selections(profiles: list[ArtifactProfile], outcomes: Mapping[str, list[Any]],
                     names: Mapping[str, str]) -> None:
    """Give each audit of a selection pass the configuration the timed run chose (Audit.timed_selected)."""
    for a, r in _pairs(profiles, outcomes, names):
        chosen = r.extra.get("selected")
        a.timed_selected = str(chosen) if chosen is not None else None


def attach(profiles: list[ArtifactProfile], outcomes: Mapping[str, list[Any]],
           names: Mapping[str, str]) -> None:
    """Copy each audit's figures into the extras of the timed records of the same artifact, variant and params,
    so claims can name them (`ncu_dram_read_bytes`, ...); not those of a profile of another kernel (a selection
    pass that chose differently: Audit.other_kernel)."""
    match_selections(profiles, outcomes, names)
    for a, r in _pairs(profiles, outcomes, names):
        if not a.other_kernel:
            r.extra.update(a.figures)


def audit_rows(p: ArtifactProfile, *, series: str, key: str, nvcc: str | None, target: str, gpu: str,
               date: str) -> list[AuditRow]:
    """The committed audits (kwiki.results.audits) of one profiled artifact: one per audited record that declares
    work; none where the profile could not be read."""
    if p.error or p.skipped:
        return []
    out = []
    for a in p.audits:
        if a.bytes_declared is None and a.flops_declared is None:
            continue
        out.append(AuditRow(
            key=key, artifact=p.artifact, series=series, nvcc=nvcc, target=target, variant=a.variant,
            params=a.params, bytes_level=a.bytes_level, bytes_declared=a.bytes_declared,
            bytes_profiled=a.bytes_measured, flops_declared=a.flops_declared, flops_profiled=a.flops_measured,
            tolerance=a.tolerance if a.tolerance is not None else 0.0, passed=a.finding is None and not a.other_kernel,
            reason=a.finding.reason if a.finding else a.other_kernel_reason if a.other_kernel else None, note=a.note,
            gpu=gpu, date=date, selection=a.selected if a.selected is not None and not a.other_kernel else None))
    return out


def closing_note(p: ArtifactProfile) -> str:
    """One line per artifact: declared vs profiled bytes, and every mismatch."""
    if p.skipped:
        return f"profile {p.artifact}: skipped ({p.skipped})"
    if p.error:
        return f"profile {p.artifact}: FAILED: {p.error}"
    parts = []
    for a in p.audits:
        ratio = a.bytes_ratio
        nothing = a.bytes_measured is None and a.flops_measured is None
        parts.append(f"{a.variant}[{params_text(a.params)}] declared {fmt(a.bytes_declared or 0, 3)} / profiled "
                     + ("nothing (unaudited)" if nothing else f"{fmt(a.bytes_measured or 0, 3)} {a.bytes_level} B")
                     + (f" (x{ratio:.2f})" if ratio is not None else "") + (" MISMATCH" if a.finding else "")
                     + (f" (OTHER KERNEL: profiled {a.selected}, timed {a.timed_selected})" if a.other_kernel else ""))
    state = "cached" if p.cached else f"{p.seconds:.1f} s"
    return f"profile {p.artifact} ({state}): " + "; ".join(parts)


# ---------------------------------------------------------------- the stage


@dataclass
class ProfileStage:
    """`kwiki verify --profile` over a run: one profile per artifact, the stage's own time, notes."""

    profiles: list[ArtifactProfile] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    tolerance: float | None = DEFAULT_TOLERANCE

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "tolerance": self.tolerance, "notes": self.notes,
                "artifacts": [p.as_json() for p in self.profiles]}

    def gate(self, gating: Gating, plan: Plan, outcomes: Mapping[str, list[RunOutcome]]) -> list[Problem]:
        """This stage's gate findings onto the run's records; a Problem where no record can carry one."""
        return gate(gating, self, outcomes, plan)


def _gpu_builds(plan: Any, builds: list[BuildResult], paths: Any) -> list[tuple[str, PlannedArtifact, BuildResult]]:
    """(path, planned, build) of each of `paths` with a successful build for this GPU."""
    by_key = {(b.artifact, b.target): b for b in builds}
    out = []
    for path in sorted(paths):
        planned = plan.artifacts.get(path)
        if planned is None or planned.manifest is None or planned.run_target is None:
            continue
        if not planned.run_variants and not planned.isolated:  # --variants left none of its variants
            continue
        build = by_key.get((planned.build_name, planned.run_target))
        if build is not None and build.ok and build.binary is not None:
            out.append((path, planned, build))
    return out


def run_stage(plan: Any, builds: list[BuildResult], root: Path, progress: Any,
              tolerance: float | None = DEFAULT_TOLERANCE, ncu: str | None = None,
              each: Callable[[ArtifactProfile], None] | None = None) -> ProfileStage:
    """`kwiki verify --profile`: profile every artifact of the plan with a GPU build here (its shared-process
    variants; no timed run before it) and audit them, handing each profile to `each` as soon as it is done (so
    that a run stopped part-way keeps the audits it finished). Without ncu or a GPU: a note, nothing profiled."""
    import time

    t0 = time.monotonic()
    stage = ProfileStage(tolerance=tolerance)
    ncu = ncu or find_ncu()
    if plan.gpu is None or ncu is None:
        stage.notes.append("--profile: " + ("no GPU here" if plan.gpu is None else
                                            "Nsight Compute (ncu) not found: set KWIKI_NCU or put ncu on the PATH")
                           + "; nothing profiled")
        return stage
    for _path, planned, build in _gpu_builds(plan, builds, plan.artifacts):
        progress(f"profile {planned.name}: ncu")
        p = profile_artifact(planned, build, ncu=ncu, root=root, gpu=plan.gpu.name, gpu_index=plan.gpu.index,
                             tolerance=tolerance)
        stage.profiles.append(p)
        progress(closing_note(p))
        if each is not None:
            each(p)
    stage.seconds = time.monotonic() - t0
    stage.notes += [closing_note(p) for p in stage.profiles]
    stage.notes.append(f"--profile: {len(stage.profiles)} artifacts in {stage.seconds:.1f} s "
                       f"({sum(p.cached for p in stage.profiles)} from the cache); a timed `kwiki verify` of the "
                       "same binaries gives their records these figures")
    return stage


def cached_stage(plan: Any, builds: list[BuildResult], outcomes: Mapping[str, list[Any]], root: Path,
                 tolerance: float | None = DEFAULT_TOLERANCE) -> ProfileStage | None:
    """For a timed run: the profiles `kwiki verify --profile` cached for the binaries that ran (no ncu), their
    figures copied into the run's records so claims can name them; None when no binary that ran has one."""
    if plan.gpu is None:
        return None
    stage = ProfileStage(tolerance=tolerance)
    names = {}
    for path, planned, build in _gpu_builds(plan, builds, outcomes):
        p = cached_profile(planned, build, root=root, gpu=plan.gpu.name, tolerance=tolerance)
        if p is not None:
            stage.profiles.append(p)
            names[path] = planned.name
    if not stage.profiles:
        return None
    attach(stage.profiles, outcomes, names)
    stage.notes.append(f"profile: the ncu figures of {len(stage.profiles)} artifacts "
                       f"({', '.join(p.artifact for p in stage.profiles)}) come from an earlier `kwiki verify "
                       "--profile` of the same binaries (.kwiki/profile/)")
    return stage


def gate(gating: Any, stage: ProfileStage, outcomes: Mapping[str, list[Any]], plan: Any) -> list[Any]:
    """The profile gate's findings onto the run's records (same artifact, variant, params); the Problems of
    artifacts ncu could not profile, and of failed audits with no record to carry them."""
    problems = []
    for p in stage.profiles:
        path = next((k for k, a in plan.artifacts.items() if a.name == p.artifact), None)
        records = [r for o in outcomes.get(path, []) for r in o.records] if path else []
        if p.error:
            problems.append(Problem(f"{path}/artifact.yaml" if path else p.artifact, 0, PROFILE, p.error))
        for a in p.audits:
            if a.finding is None or a.other_kernel:  # a finding on another configuration is not this record's
                continue
            mine = [r for r in records if r.variant == a.variant and params_text(r.params) == params_text(a.params)]
            for r in mine:
                gating.add(p.artifact, r, a.finding)
            if not mine:
                problems.append(Problem(f"{path}/artifact.yaml" if path else p.artifact, 0, PROFILE, a.finding.reason))
    return problems
