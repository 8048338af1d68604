"""`kwiki verify --sanitize`: compute-sanitizer's memcheck, racecheck and synccheck on each variant, at a small shape.

`kwiki verify --sanitize` runs build -> sanitize only (no timed runs: kwiki.verify.pipeline); `--variants a,b`
narrows it to those variants.

Under each tool, the variants the manifest expects clean that name their kernels run together, in ONE process:
`<binary> run.args sanitize.args --check-only --variants a,b,...` (the manifest's `sanitize.args` make it small;
--check-only skips the timing loop). Each error the tool reports names the kernel it was seen in, and the
`kernels:` globs give it to its variant. Errors in kernels no variant of the run names (the reference GEMM a
check computes with cuBLAS, in whose kernels racecheck reports hazards) are not judged: they are counted and their first
lines go to the notes. The variants run alone instead, one process each, when the shared run cannot say whose
errors they are (an error in no kernel, such as a failed launch, or in a kernel two variants name; a variant
with no record, the process having died before it; no summary line), and always when they are isolated, name
no kernels, or are expected to be caught (`error`). One process per variant and tool for every variant (~170
variants x 3 tools) took longer than a session's time on the H200. A variant the manifest leaves unjudged under
a tool (`either`) does not run under it.

A Python artifact (kind: python) runs the same way with kwiki's harness as the process: `kwiki_harness.py run
<module> --variants a,b,... --profile-mode` (each case checked on one input set, then called once more; no timing
loop), under `--target-processes all`, torch's caching allocator off so that memcheck sees each tensor's bounds,
over the manifest's `sanitize.params` in place of the module's GRID (python_app). Its racecheck and synccheck run
only where the manifest names the tool; a variant that runs at no entry fails unless the manifest expects `either`.

A tool's errors fail the variant's `sanitize` gate with the report's first lines, unless the manifest expects
them (`sanitize: {expect: {racecheck: error}}` on the variant, or on the artifact for all its variants, e.g. one
whose variants all run a library's kernels); a tool the manifest expects to see the variant's bug that reports
nothing fails too (the page's "which tool sees which pitfall" table is then wrong).

The tools' reach, which the expectations encode: memcheck checks the generic accesses of threads (out of
bounds, misaligned) and API errors, not the bytes a TMA copy moves; racecheck checks shared-memory accesses of
threads against each other, and largely cannot see a race between the async proxy (TMA, wgmma) and ordinary
accesses (a missing fence.proxy.async); synccheck checks barrier use (divergent __syncthreads, bar.sync
masks) and does not model mbarrier phases (a wrong parity, an expect_tx that never completes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kwiki.core.errors import FrontMatterError, Problem, RecordError
from kwiki.core.paths import shown
from kwiki.core.proc import find_tool, run_group
from kwiki.results.record import parse_records
from kwiki.verify import kernels as kmatch
from kwiki.verify.profile import PROFILE_MODE
from kwiki.verify.pyartifact import DESCRIBE_TIMEOUT_S, LIBRARY_ENV, environment, harness, harness_argv, python
from kwiki.verify.run import argv_for
from kwiki.verify.types import BuildResult, Finding, Gating, Plan, PlannedArtifact, RunOutcome
from kwiki.wiki.frontmatter import decode, parse_yaml
from kwiki.wiki.manifest import MANIFEST, SANITIZE_TOOLS

SANITIZE = "sanitize"
REPORT_LINES = 4  # of the first error, in a gate's reason
PREFIX = "========="
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "Target application returned an error", "ERROR SUMMARY", "RACECHECK SUMMARY",
                 "LEAK SUMMARY")


def find_sanitizer(environ: Mapping[str, str] | None = None) -> str | None:
    """compute-sanitizer from $KWIKI_COMPUTE_SANITIZER, the PATH or the usual install places; None when absent."""
    return find_tool("compute-sanitizer", "KWIKI_COMPUTE_SANITIZER", [
        "/usr/local/cuda*/bin/compute-sanitizer", "/usr/local/cuda*/compute-sanitizer/compute-sanitizer"], environ)


def sanitizer_argv(sanitizer: str, tool: str, app: list[str], options: list[str] | None = None) -> list[str]:
    """compute-sanitizer's command line around `app`; `options` are the tool's own, before the application."""
    if tool not in SANITIZE_TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}")
    return [sanitizer, "--tool", tool, *(options or []), "--print-limit", "20", *app]


@dataclass
class ToolReport:
    """What one tool said about one run."""

    errors: int | None  # None: no summary line (the tool did not finish)
    lines: list[str] = field(default_factory=list)  # the first error's lines, prefix stripped
    warnings: int = 0


def parse_report(text: str) -> ToolReport:
    """compute-sanitizer's output: the error count of its summary (less the line it adds for a non-zero exit
    of the application, which kwiki reads from the records), and the first error's lines."""
    lines = [ln[len(PREFIX):].rstrip() for ln in text.splitlines() if ln.startswith(PREFIX)]
    errors: int | None = None
    warnings = 0
    for ln in lines:
        if m := _RACE_SUMMARY.search(ln):
            errors, warnings = int(m.group(1)), int(m.group(2))
        elif (m := _SUMMARY.search(ln)) and errors is None:
            errors = int(m.group(1))
    if errors is not None and any("Target application returned an error" in ln for ln in lines):
        errors = max(0, errors - 1)
    first: list[str] = []
    for ln in lines:
        headline = ln[:1] == " " and not ln[:2] == "  "
        if first and not ln.startswith("  "):
            break
        if first:
            first.append(ln.strip())
        elif headline and not any(k in ln for k in _NOT_FINDINGS) and not ln.strip().startswith("Warning"):
            first.append(ln.strip())
        if len(first) >= REPORT_LINES:
            break
    return ToolReport(errors, first, warnings)


_AT = re.compile(r"\bat (.+?)\+0x[0-9a-fA-F]+")  # 'at copy_kernel<4>(float *)+0x1b0 in x.cu:88', 'access at k+0x9b0'


@dataclass
class Hazard:
    """One error of a report: its lines (prefix stripped) and the kernel they name (None: a host API error)."""

    lines: list[str]
    kernel: str | None


def hazards(text: str) -> list[Hazard]:
    """Every error block of a report: a headline (one space after the prefix) and its indented lines; summaries,
    banners and warnings are not errors."""
    out: list[Hazard] = []
    block: list[str] | None = None
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        ln = raw[len(PREFIX):].rstrip()
        if block is not None and ln.startswith("  "):
            block.append(ln.strip())
            continue
        block = None
        if ln[:1] == " " and ln.strip() and not any(k in ln for k in _NOT_FINDINGS) \
                and not ln.strip().startswith("Warning"):
            block = [ln.strip()]
            out.append(Hazard(block, None))
    for h in out:
        m = next((m for m in map(_AT.search, h.lines) if m), None)
        h.kernel = m.group(1).strip() if m else None
    return out


@dataclass
class Result:
    """One variant under one tool."""

    artifact: str
    variant: str
    tool: str
    expected: str  # clean, error or either
    errors: int | None
    lines: list[str]
    seconds: float = 0.0
    finding: Finding | None = None
    log: str | None = None
    shared: int = 1  # how many variants the process ran (its seconds are theirs together); 0: not run
    outside: int = 0  # errors the process's tool reported in kernels no variant of it names: not judged
    outside_lines: list[str] = field(default_factory=list)  # the first of them

    @property
    def ok(self) -> bool:
        return self.finding is None

    def as_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "variant": self.variant, "tool": self.tool, "expected": self.expected,
                "errors": self.errors, "first_lines": self.lines, "seconds": round(self.seconds, 3),
                "shared_with": self.shared - 1, "outside_errors": self.outside,
                "outside_first_lines": self.outside_lines,
                "failed": self.finding.reason if self.finding else None,
                "log": self.log}


def judge(where: str, tool: str, expected: str, report: ToolReport, why: str = "") -> Finding | None:
    """The gate over one tool's report: errors where `clean` is expected, silence where `error` is."""
    if report.errors is None:
        return Finding(SANITIZE, f"{where}: {tool} did not finish (no summary line)"
                                 + (f": {' | '.join(report.lines)}" if report.lines else ""))
    if expected == "clean" and report.errors > 0:
        return Finding(SANITIZE, f"{where}: {tool} reported {report.errors} error{'s' * (report.errors != 1)}: "
                                 + " | ".join(report.lines))
    if expected == "error" and report.errors == 0:
        return Finding(SANITIZE, f"{where}: {tool} reported nothing, but the manifest expects it to see this "
                                 f"variant's bug" + (f" ({why})" if why else "") + ": the expectation (and the page's "
                                 "table of which tool sees which pitfall) is wrong")
    return None


PYTHON_ONLY_ASKED = ("a Python artifact runs racecheck and synccheck only where its manifest names the tool in a "
                     "sanitize.expect (on the artifact or the variant): under them Triton's kernels take minutes")


def expectation(m: Any, name: str, tool: str) -> tuple[str, str]:
    """(clean|error|either, why) of variant `name` under `tool`: the variant's own, else the artifact's, else clean
    (memcheck on a Python artifact; its racecheck and synccheck are `either`, not run, unless the manifest asks)."""
    v = m.variant(name)
    for e in (v.sanitize if v else None, m.sanitize):
        if e is not None and tool in e.expect:
            return e.expect[tool], e.why
    if m.kind == "python" and tool != "memcheck":
        return "either", PYTHON_ONLY_ASKED
    return "clean", ""


@dataclass
class App:
    """How an artifact's variants run under a tool: the command for a list of variants, its environment, and
    compute-sanitizer's own options for it."""

    argv: Callable[[list[str]], list[str]]
    env: dict[str, str]
    options: list[str] = field(default_factory=list)
    # a Python artifact: the records each variant's run prints (one per entry it runs at; a failed check still
    # prints one). Fewer: the harness ended before the variant did (a raise, a crash), the tool did not see it all
    records: dict[str, int] | None = None

    def short(self, run: _Run, names: list[str]) -> list[str]:
        """The variants of `names` whose records `run` did not print in full."""
        if self.records is None:
            return []
        return [n for n in names if run.counts.get(n, 0) < self.records.get(n, 1)]


def binary_app(planned: PlannedArtifact, build: BuildResult, gpu_index: int | None) -> App:
    """A CUDA artifact: `<binary> run.args --variants ... sanitize.args --check-only` (no timing loop)."""
    m, binary = planned.manifest, build.binary
    assert m is not None and binary is not None
    env = dict(os.environ)
    if gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    return App(lambda names: [*argv_for(planned, binary, names), *m.sanitize.args, "--check-only"], env)


class _Run:
    """One process under one tool: its report, records and log."""

    def __init__(self, planned: PlannedArtifact, app: App, sanitizer: str, tool: str, names: list[str], log: Path,
                 root: Path) -> None:
        m = planned.manifest
        assert m is not None
        argv = sanitizer_argv(sanitizer, tool, app.argv(names), app.options)
        res = run_group(argv, cwd=planned.directory, env=app.env, timeout=m.sanitize.timeout_s,
                        max_output=m.run.max_output_bytes)
        log.write_text(f"$ {' '.join(argv)}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}\n"
                       f"--- exit {res.returncode} after {res.seconds:.2f} s\n", encoding="utf-8")
        self.log = shown(log, root)
        self.seconds = res.seconds
        text = res.stdout + "\n" + res.stderr
        self.report = parse_report(text)
        if res.timed_out or res.start_error:
            self.report = ToolReport(None, [res.start_error or f"killed after {m.sanitize.timeout_s:g} s"])
        self.hazards = hazards(text)
        ours = "\n".join(ln for ln in res.stdout.splitlines() if not ln.startswith(PREFIX))  # the tool writes there too
        self.returncode = res.returncode
        self.counts: dict[str, int] = {}
        try:
            for r in parse_records(ours, m.name):
                self.counts[r.variant] = self.counts.get(r.variant, 0) + 1
        except RecordError:
            self.counts = {}
        self.variants = set(self.counts)


def _owners(m: Any, names: list[str], run: _Run) -> tuple[dict[str, list[Hazard]], list[Hazard]] | None:
    """Each variant's errors in a run of `names`, and the errors in kernels none of them names (the reference's
    cuBLAS GEMM, say: the tools judge the kernels a variant names); None when the run cannot say whose errors
    they are (see the module's docstring). A variant that names no kernels, run alone, owns every error."""
    shared = len(names) > 1
    if run.report.errors is None or (shared and not set(names) <= run.variants):
        return None
    mine: dict[str, list[Hazard]] = {n: [] for n in names}
    outside: list[Hazard] = []
    for h in run.hazards:
        who = [n for n in names if h.kernel is not None and (v := m.variant(n)) and v.kernels
               and kmatch.declared(h.kernel, v.kernels)]
        if len(who) == 1:
            mine[who[0]].append(h)
        elif shared and (h.kernel is None or who):  # a host error, or a kernel two variants name
            return None
        elif h.kernel is None or not (v := m.variant(names[0])) or not v.kernels:
            mine[names[0]].append(h)
        else:
            outside.append(h)
    unprinted = (run.report.errors or 0) - len(run.hazards)
    if unprinted > 0:  # counted beyond the print limit: whose are they?
        if shared:
            return None
        mine[names[0]] += [Hazard([f"{unprinted} more not printed"], None)] * unprinted
    return mine, outside


def _not_run(m: Any, rel: str, order: list[str], nowhere: Mapping[str, str], tool: str) -> list[Result]:
    """The variants that do not run under `tool`: those the manifest does not judge (`either`: a library's GEMM
    under racecheck takes minutes), and those that run at no entry of a Python artifact's sanitized GRID, which
    fail (skipped is not a pass)."""
    out = []
    for n in order:
        expected, why = expectation(m, n, tool)
        if expected == "either":
            out.append(Result(m.name, n, tool, "either", None,
                              ["not run: the manifest does not judge it" + (f" ({why})" if why else "")], shared=0))
        elif n in nowhere:
            out.append(Result(m.name, n, tool, expected, None, [nowhere[n]], shared=0,
                              finding=Finding(SANITIZE, f"{rel}: variant {n!r}: {tool}: {nowhere[n]}")))
    return out


def sanitize_artifact(planned: PlannedArtifact, build: BuildResult, *, sanitizer: str, tools: list[str], root: Path,
                      gpu_index: int | None) -> tuple[list[Result], str | None]:
    """Every variant that runs here under each tool (shared processes where they can be; see the module's
    docstring); (results, why it was skipped)."""
    m = planned.manifest
    assert m is not None
    rel = shown(planned.directory / MANIFEST, root)
    order = [*planned.run_variants, *planned.isolated]
    if m.kind == "python":
        app, nowhere, error = python_app(planned, build, root, gpu_index)
        if error is not None:  # the sanitized GRID cannot run at all: every variant says why, at the manifest
            return [Result(m.name, n, t, expectation(m, n, t)[0], None, [error], finding=Finding(
                SANITIZE, f"{rel}: sanitize.params: {error}"), shared=0) for n in order for t in tools], None
    elif why := m.not_the_binary():
        return [], why
    else:
        app, nowhere = binary_app(planned, build, gpu_index), {}
    log_dir = root / ".kwiki" / "sanitize" / m.name
    log_dir.mkdir(parents=True, exist_ok=True)
    out: dict[tuple[str, str], Result] = {}

    def result(name: str, tool: str, hs: list[Hazard], run: _Run, shared: int, outside: list[Hazard]) -> None:
        expected, why = expectation(m, name, tool)
        rep = ToolReport(len(hs), hs[0].lines[:REPORT_LINES] if hs else [])
        finding = None if expected == "either" else judge(f"{rel}: variant {name!r}", tool, expected, rep, why)
        out[(name, tool)] = Result(m.name, name, tool, expected, rep.errors, rep.lines, run.seconds, finding, run.log,
                                   shared, len(outside), outside[0].lines[:REPORT_LINES] if outside else [])

    def failed(name: str, tool: str, run: _Run) -> None:  # no summary line: the tool did not finish
        expected, why = expectation(m, name, tool)
        out[(name, tool)] = Result(m.name, name, tool, expected, None, run.report.lines, run.seconds,
                                   judge(f"{rel}: variant {name!r}", tool, expected, run.report, why), run.log)

    def ended(name: str, tool: str, run: _Run) -> None:  # the harness ended before the variant's last record
        expected = expectation(m, name, tool)[0]
        why = (f"the harness ended (exit {run.returncode}) before the variant's last record: {tool} did not see its "
               "kernels through (the log says why: a raise, a crash)")
        out[(name, tool)] = Result(m.name, name, tool, expected, None, [why], run.seconds,
                                   Finding(SANITIZE, f"{rel}: variant {name!r}: {why}"), run.log)

    for tool in tools:
        out.update({(r.variant, tool): r for r in _not_run(m, rel, order, nowhere, tool)})
        order_t = [n for n in order if (n, tool) not in out]
        together = [n for n in planned.run_variants if n in order_t
                    and expectation(m, n, tool)[0] == "clean" and (v := m.variant(n)) is not None and v.kernels]
        alone = [n for n in order_t if n not in together]
        if len(together) > 1:
            run = _Run(planned, app, sanitizer, tool, together, log_dir / f"shared-{tool}.log", root)
            split = _owners(m, together, run)
            if split is None or app.short(run, together):
                alone = order_t  # the shared run cannot say whose errors they are: every variant alone
            else:
                for n, hs in split[0].items():
                    result(n, tool, hs, run, len(together), split[1])
        else:
            alone = order_t
        for name in alone:
            run = _Run(planned, app, sanitizer, tool, [name], log_dir / f"{name}-{tool}.log", root)
            split = _owners(m, [name], run)
            if split is None:
                failed(name, tool, run)
            elif not split[0][name] and app.short(run, [name]):  # no error of its own, and it did not finish
                ended(name, tool, run)
            else:
                result(name, tool, split[0][name], run, 1, split[1])
    return [out[(n, t)] for n in order for t in tools if (n, t) in out], None


# ---------------------------------------------------------------- a Python artifact: the harness in profile mode

SHIM = Path(__file__).resolve().parent / "gridshim" / "kwiki_sanitize_grid.py"
SHIM_MODULE_ENV, SHIM_GRID_ENV = "KWIKI_SANITIZE_MODULE", "KWIKI_SANITIZE_GRID"  # the shim's MODULE_ENV, GRID_ENV
NO_CACHING_ENV = "PYTORCH_NO_CUDA_MEMORY_CACHING"
# the harness is one process (kwiki.verify.pyartifact: torch.compile compiles in it, no worker pool); `all` still
# follows a KWIKI_PYTHON that is a launcher running the interpreter as its child, whatever the tool's default
PYTHON_OPTIONS = ["--target-processes", "all"]


def python_app(planned: PlannedArtifact, build: BuildResult, root: Path,
               gpu_index: int | None) -> tuple[App, dict[str, str], str | None]:
    """A Python artifact: kwiki's harness in its profile mode (each case checked on one input set, then called once
    more; no timing loop, no parent channel: the records come on its stdout), over `sanitize.params` in place of
    the module's GRID (the shim, kwiki/verify/gridshim/). torch's caching allocator is off, so that memcheck sees
    each tensor as an allocation of its own (with it, an access past a tensor's end lands inside a cached segment
    and nothing is reported). (the app, why each variant that runs at no entry does not run, an error)."""
    m, binary = planned.manifest, build.binary
    assert m is not None and binary is not None
    env = environment(root, gpu_index)
    env[NO_CACHING_ENV] = "1"
    if build.library:
        env[LIBRARY_ENV] = build.library
    module, grid, error = binary, build.grid, None
    if m.sanitize.params:
        env[SHIM_MODULE_ENV], env[SHIM_GRID_ENV] = binary, json.dumps(m.sanitize.params, sort_keys=True)
        module = str(SHIM)
        grid, error = _describe(root, module, env, planned.directory)
    given = replace(build, binary=module)  # the harness loads the shim (or the module) as its module

    def argv(names: list[str]) -> list[str]:
        return [*harness_argv(root, m, given, names, "cuda", 1), *m.sanitize.args, PROFILE_MODE]

    where = "sanitize.params" if m.sanitize.params else "the module's GRID"
    nowhere = {n: f"not run: it runs at no entry of {where} (a variant is never skipped silently: give it an entry "
                  "it runs at, or expect `either` of the tool, with the reason)"
               for n in [*planned.run_variants, *planned.isolated]
               if grid is not None and not any(n in e.get("variants", []) for e in grid)}
    records = None if grid is None else {
        n: sum(n in e.get("variants", []) for e in grid) for n in [*planned.run_variants, *planned.isolated]}
    return App(argv, env, list(PYTHON_OPTIONS), records), nowhere, error


def python_params_problems(plan: Plan, builds: list[BuildResult], root: Path) -> list[Problem]:
    """Before a GPU (any machine, `--compile-only` too): each Python artifact's `sanitize.params` as the harness
    will read them, through the shim: entries the module's contract refuses, and variants the manifest expects a
    tool to judge that run at no entry (they would fail the sanitize gate on the GPU); located in the manifest."""
    described = {b.artifact: b for b in builds if b.ok and b.binary and b.grid is not None}
    out: list[Problem] = []
    for planned in sorted(plan.artifacts.values(), key=lambda a: a.path):
        m, build = planned.manifest, described.get(planned.build_name)
        if m is None or m.kind != "python" or not m.sanitize.params or build is None or build.binary is None:
            continue
        env = environment(root)
        env[SHIM_MODULE_ENV], env[SHIM_GRID_ENV] = build.binary, json.dumps(m.sanitize.params, sort_keys=True)
        grid, error = _describe(root, str(SHIM), env, planned.directory)
        rel, lines = shown(planned.directory / MANIFEST, root), _manifest_lines(planned.directory)
        if grid is None:
            out.append(Problem(rel, lines.get(("sanitize", "params"), 0), "sanitize.params", error or ""))
            continue
        for i, v in enumerate(m.variants):
            judged = [t for t in SANITIZE_TOOLS if expectation(m, v.name, t)[0] != "either"]
            if judged and not any(v.name in e.get("variants", []) for e in grid):
                out.append(Problem(rel, lines.get(("variants", i), 0), f"variants.{v.name}.sanitize",
                                   f"runs at no entry of sanitize.params, and {judged[0]} would judge it: give it an "
                                   "entry it runs at, or expect `either` of the tool with the reason"))
    return out


def _manifest_lines(directory: Path) -> dict[tuple[str | int, ...], int]:
    try:
        return parse_yaml(decode((directory / MANIFEST).read_bytes())[0])[1]
    except (OSError, FrontMatterError):
        return {}


def _describe(root: Path, module: str, env: dict[str, str],
              cwd: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The harness's `describe` of the shim: the sanitized GRID, each entry with the variants that run there; or
    why it cannot run (the harness's contract problems: an entry that is not scalars, a dtype without tolerance)."""
    res = run_group([python(), str(harness(root)), "describe", module],
                    cwd=cwd, env=env, timeout=DESCRIBE_TIMEOUT_S)
    try:
        info = json.loads(res.stdout) if res.returncode == 0 else {}
    except ValueError:
        info = {}
    if not isinstance(info, dict) or not info:
        tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:300]
        why = res.start_error or ("timed out" if res.timed_out else f"exit {res.returncode}")
        return None, f"the harness could not describe the module with them ({why}){': ' + tail if tail else ''}"
    if info.get("problems"):
        return None, "; ".join(str(p) for p in info["problems"])
    return list(info.get("grid") or []), None


def attach(results: list[Result], outcomes: Mapping[str, list[Any]], names: Mapping[str, str]) -> None:
    """Each variant's error counts into the extras of its records (`sanitize_<tool>_errors`), for claims and
    `kwiki show --json`."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in results:
        if r.errors is not None:
            counts.setdefault((r.artifact, r.variant), {})[f"sanitize_{r.tool}_errors"] = r.errors
    for path, outs in outcomes.items():
        for o in outs:
            for rec in o.records:
                rec.extra.update(counts.get((names.get(path, ""), rec.variant), {}))


@dataclass
class SanitizeStage:
    """`kwiki verify --sanitize` over a run."""

    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "tools": self.tools, "notes": self.notes,
                "results": [r.as_json() for r in self.results]}

    def gate(self, gating: Gating, plan: Plan, outcomes: Mapping[str, list[RunOutcome]]) -> list[Problem]:
        """This stage's gate findings onto the run's records; a Problem where no record can carry one."""
        return gate(gating, self, outcomes, plan)


def run_stage(plan: Any, builds: list[BuildResult], root: Path, progress: Any, tools: list[str],
              sanitizer: str | None = None) -> SanitizeStage:
    """Every artifact of the plan that has a GPU build here, each variant under each tool."""
    import time

    t0 = time.monotonic()
    stage = SanitizeStage(tools=list(tools))
    sanitizer = sanitizer or find_sanitizer()
    if plan.gpu is None or sanitizer is None:
        stage.notes.append("--sanitize: " + ("no GPU here" if plan.gpu is None else "compute-sanitizer not found: "
                                             "set KWIKI_COMPUTE_SANITIZER or put it on the PATH") + "; nothing run")
        return stage
    by_key = {(b.artifact, b.target): b for b in builds}
    for planned in sorted(plan.artifacts.values(), key=lambda a: a.path):
        if planned.manifest is None or planned.run_target is None:
            continue
        if not planned.run_variants and not planned.isolated:  # --variants left none of its variants
            continue
        build = by_key.get((planned.build_name, planned.run_target))
        if build is None or not build.ok or build.binary is None:
            continue
        progress(f"sanitize {planned.name}: {', '.join(tools)}")
        results, skipped = sanitize_artifact(planned, build, sanitizer=sanitizer, tools=tools, root=root,
                                             gpu_index=plan.gpu.index)
        if skipped:
            stage.notes.append(f"sanitize {planned.name}: skipped ({skipped})")
            progress(f"    skipped: {skipped}")
            continue
        stage.results += results
        logs = {(r.tool, r.log): r for r in results if r.outside}
        stage.notes += [f"sanitize {planned.name} ({r.log}): {r.tool} reported {r.outside} error"
                        f"{'s' * (r.outside != 1)} in kernels no variant of the run names, not judged: "
                        + " | ".join(r.outside_lines) for r in logs.values()]
        bad = [r for r in results if not r.ok]
        progress(f"    {len(results) - len(bad)} of {len(results)} as expected"
                 + "".join(f"\n    {r.finding.reason}" for r in bad if r.finding))
    stage.seconds = time.monotonic() - t0
    seen = sum(1 for r in stage.results if r.errors)
    stage.notes.append(f"--sanitize: {len(stage.results)} variant x tool runs in {stage.seconds:.1f} s, "
                       f"{seen} with errors, {sum(not r.ok for r in stage.results)} not as the manifests expect")
    return stage


def gate(gating: Any, stage: SanitizeStage, outcomes: Mapping[str, list[Any]], plan: Any) -> list[Any]:
    """The sanitize gate's findings onto every record of the variant; a Problem where the variant has no record."""
    paths = {a.name: k for k, a in plan.artifacts.items()}
    names = {k: a.name for k, a in plan.artifacts.items()}
    attach(stage.results, outcomes, names)
    problems = []
    for r in stage.results:
        if r.finding is None:
            continue
        path = paths.get(r.artifact)
        mine = [rec for o in outcomes.get(path, []) for rec in o.records if rec.variant == r.variant] if path else []
        for rec in mine:
            gating.add(r.artifact, rec, r.finding)
        if not mine:
            problems.append(Problem(f"{path}/artifact.yaml" if path else r.artifact, 0, SANITIZE, r.finding.reason))
    return problems
