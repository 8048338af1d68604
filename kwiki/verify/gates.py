"""Gates: checks every record of a run must pass before a claim may use its figures.

A gate is a plain function over records. A record that fails one keeps its place in the report and
the results store (with the gate named), but no claim built on it is ever reproduced or better:
its verdict becomes `failed`, and write-back writes no figure for it (kwiki.verify.claims,
kwiki.verify.writeback). A gate may also warn without failing: the record is fine, something
else is wrong (a measured roof below an honest record).

physical  a rate beyond the physical peak of its level by more than PHYSICAL_MARGIN: bytes per
          second at the record's `bytes_level` (DRAM, L2, shared memory) and FLOP per second at its
          dtype, against kwiki.results.peaks. It catches work that was never done (a kernel that
          works only on its checked launch, or on a stream the timer does not see) and declared
          bytes or FLOPs the kernel does not move, as soon as they claim the impossible. It cannot
          catch a cheat that stays under the peak: an honest wgmma microbenchmark already reaches
          ~930 of the H200's 1070 dense bf16 TFLOP/s, so a GEMM that skips a fifth of its work still
          passes. The profiler audit (counted instructions and bytes) is the real defence there;
          this gate is the floor no record may go through.
clocks    a record whose sampling window spent more than SLOWDOWN_LIMIT of its time under thermal or
          hardware slowdown (NVML's clock-event reasons, read while each sample ran): its figures
          measure a throttled card, not the kernel. Time under the power cap is not gated, only
          reported: dense GEMMs run at the power limit by design, and kernels of different
          efficiency clock differently.
roof      a record faster than the artifact's measured speed of light beyond noise: bytes over the
          read roof its `ceiling` variant fitted in the same run (kwiki.verify.roof; a ceiling
          variant without a roof: that variant's own bandwidth at the same params). Not a cheat while
          it is under the physical peak: it means the roof is wrong. A warning only. The ceiling's
          own record fails it when its points do not give the BW and t0 it states (and warns when
          the fit is poor).
identity  a record whose timed samples ran a kernel its variant's `kernels:` globs do not name (a
          cuBLAS call hidden in a "custom" variant), or ran none that they name (the variant's own
          kernel never ran). The globs are alternatives (a library picks its kernel per dtype and
          shape); a variant with `kernels_all: true` also fails when one of its globs named no kernel
          that ran in any of its timed samples (kernel names from CUPTI, kwiki_cupti.cuh; matching:
          kwiki.verify.kernels). A record timed by CUDA events on purpose (run.args --timing=events: the
          launch gaps are the measurement) is judged by its twin in the run's identity pass, the same
          variant and params run again under CUPTI (kwiki.verify.run), and fails without one, or when the
          twin's GPU work spanned more than its own event bracket (`outside`: work off the launch stream,
          which events would not time). Not checked, and said in the notes, where a record carries no
          kernel list and has no identity pass (timed without CUPTI) or the manifest names no kernels for
          the variant.
unseen    a record whose bracket (the CUDA event pair around each sample, host enqueue included) exceeds its
          busy time (CUPTI: the GPU work of this process) by more than this process's own cost of a bracket:
          UNSEEN_FIXED x the fixed cost of one trivial launch + UNSEEN_PER_LAUNCH x the cost per further
          kernel x the kernels CUPTI saw + UNSEEN_FLOOR_US + UNSEEN_SHARE x the busy time (protocol 3's
          `timer`; wider for the Python harness's records, whose bracket holds Python dispatch). Work the
          timer cannot see (another process on the same buffers, host work into mapped
          memory) makes a sample wait without being busy. Records without `timer` (protocol 2) pass.
fresh     a timed record of an artifact whose manifest declares `fresh_inputs: true` that does not say its
          samples had fresh inputs (extra.fresh_inputs): the defence against reuse the page relies on did not run.
profile, sanitize  added by `kwiki verify --profile` / `--sanitize` (kwiki.verify.profile,
          kwiki.verify.compute_sanitizer): declared bytes or FLOPs above the profiled ones, sanitizer errors.
"""

from __future__ import annotations

import math

from kwiki.core.numbers import fmt, params_text
from kwiki.results import peaks
from kwiki.results.gpu import Gpu
from kwiki.results.record import Record, Roof
from kwiki.verify import kernels as kmatch
from kwiki.verify import roof as roofs
from kwiki.verify.types import Finding, Gating, IdentityPass, Plan, PlannedArtifact, RunOutcome
from kwiki.wiki.manifest import HOST

PHYSICAL = "physical"
CLOCKS = "clocks"
ROOF = "roof"
IDENTITY = "identity"
UNSEEN = "unseen"
FRESH = "fresh"
# The floors: host work of the variant's own launch path sits in its bracket. On the H200 (2026-12-02, protocol 3's
# first full run) honest cuBLAS GEMMs at 4096^3 bracketed 107-129 us over their busy time (the library's host work
# per call), and torch.compile, Liger and Triton variants 447-671 us (Python dispatch): the floors cover both with
# room. Work handed to another process is caught first by NVML's list of contexts where it lists them.
UNSEEN_FIXED, UNSEEN_PER_LAUNCH, UNSEEN_FLOOR_US, UNSEEN_SHARE = 2.0, 2.0, 100.0, 0.10
SLOWDOWN_LIMIT = 0.05  # of a record's sampling window: a moment's slowdown is noise, a twentieth is a throttled card
PHYSICAL_MARGIN = 0.03  # fixed: physical peaks have no noise, only the datasheet's rounding
ROOF_NOISE_FLOOR = 0.01  # a record this far above the measured roof (or the runs' spreads) warns
LEVEL_NAMES = {"dram": "DRAM", "l2": "L2", "smem": "shared-memory"}


# ---------------------------------------------------------------- the gates


def _rates(record: Record) -> tuple[float | None, float | None]:
    """(TB/s, TFLOP/s) the record claims: derived from its bytes, flops and timing, else its extras."""
    figs = record.figures()
    tb = figs.get("tb_per_s", figs["gb_per_s"] / 1e3 if "gb_per_s" in figs else None)
    tflop = figs.get("tflop_per_s", figs["gflop_per_s"] / 1e3 if "gflop_per_s" in figs else None)
    return tb, tflop


def physical(record: Record, gpu: Gpu) -> list[Finding]:
    """Fails a record whose bytes or FLOPs per second beat `gpu`'s physical peak by more than 3%."""
    out: list[Finding] = []
    tb, tflop = _rates(record)
    limit = 1 + PHYSICAL_MARGIN
    if tb is not None:
        peak = peaks.bytes_peak(gpu, record.bytes_level)
        if peak is not None and tb > peak.value * limit:
            out.append(Finding(PHYSICAL, f"{fmt(tb, 3)} TB/s of {LEVEL_NAMES[record.bytes_level]} bytes > "
                                         f"{fmt(peak.value, 4, trim=True)} TB/s x {limit:g} physical peak of "
                                         f"{gpu.name} ({peak.basis})"))
    if tflop is not None:
        dtype = record.flops_dtype or record.params.get("dtype")
        peak, used = peaks.flops_peak(gpu, str(dtype) if dtype is not None else None)
        if peak is not None and tflop > peak.value * limit:
            out.append(Finding(PHYSICAL, f"{fmt(tflop, 3)} TFLOP/s > {fmt(peak.value, 4)} TFLOP/s x {limit:g} "
                                         f"physical peak of {gpu.name} ({peak.basis}; rate: {used})"))
    return out


def clocks(record: Record) -> Finding | None:
    """Fails a record that spent more than SLOWDOWN_LIMIT of its sampling window under thermal or
    hardware slowdown (protocol 2 records; older ones carry no window and pass)."""
    c = record.clocks
    if not c.window_s:
        return None
    slowed = (c.thermal_s or 0.0) + (c.hw_slowdown_s or 0.0)
    share = slowed / c.window_s
    if share <= SLOWDOWN_LIMIT:
        return None
    return Finding(CLOCKS, f"{share:.0%} of its sampling window under thermal or hardware slowdown "
                          f"(more than {SLOWDOWN_LIMIT:.0%}): the card was throttled")


UNSEEN_PYTHON_FLOOR_US, UNSEEN_PYTHON_SHARE = 500.0, 0.5  # Python dispatch: Triton's launcher, torch.compile's guards


def unseen_allowance_us(record: Record) -> float | None:
    """How much longer than its busy time a record's bracket may be (None: no `timer`, not gated). A Python
    harness's bracket holds the variant's Python dispatch (a Triton launcher, torch.compile's guards: tens to
    hundreds of us beyond a torch op's), so its floor and share are wider; kwiki's own clock bounds it too."""
    t, busy = record.timer, record.timing
    if t is None or busy is None:
        return None
    python = record.extra.get("harness") == "python"
    floor = UNSEEN_PYTHON_FLOOR_US if python else UNSEEN_FLOOR_US
    share = UNSEEN_PYTHON_SHARE if python else UNSEEN_SHARE
    return UNSEEN_FIXED * t.fixed_us + UNSEEN_PER_LAUNCH * t.per_launch_us * t.kernels + floor + share * busy.median_us


def unseen(record: Record) -> Finding | None:
    """Fails a record whose bracket exceeds its busy time by more than unseen_allowance_us: its samples waited
    for work the timer did not see."""
    allowed = unseen_allowance_us(record)
    if allowed is None:
        return None
    assert record.timer is not None and record.timing is not None
    t, busy = record.timer, record.timing.median_us
    gap = t.event_median_us - busy
    if gap <= allowed:
        return None
    return Finding(UNSEEN, f"its bracket ({fmt(t.event_median_us)} us, events) exceeds its busy time "
                           f"({fmt(busy)} us, CUPTI) by {fmt(gap)} us, more than this process's allowance of "
                           f"{fmt(allowed)} us ({fmt(t.fixed_us)} us fixed, {fmt(t.per_launch_us)} us per launch, "
                           f"{fmt(t.kernels)} kernels): the samples waited on work the timer does not see")


def roof(record: Record, ceiling: Record, ceiling_name: str) -> Finding | None:
    """Warns when `record` moves bytes faster than the measured roof beyond noise: the read roof `ceiling`
    carries (fitted over a size sweep in the same run), else `ceiling`'s own bandwidth (same params)."""
    if record is ceiling or record.timing is None or not record.bytes:
        return None
    fitted = ceiling.roof
    if fitted is not None:
        over = roofs.above(record, fitted)
        if over is None:
            return None
        return Finding(ROOF, f"{1 + over:.0%} of the speed of light at {params_text(record.params) or 'its params'}: "
                             f"{fmt(record.figures()['gb_per_s'] / 1e3)} TB/s over the read roof `{ceiling_name}` "
                             f"({fmt(fitted.gb_per_s / 1e3)} TB/s, fitted in the same run): the measured roof is "
                             "wrong (not a bound)", fail=False)
    if ceiling.timing is None or not ceiling.bytes:
        return None
    mine, roof_gb = record.figures()["gb_per_s"], ceiling.figures()["gb_per_s"]
    noise = max(math.hypot(record.timing.spread, ceiling.timing.spread), ROOF_NOISE_FLOOR)
    if mine <= roof_gb * (1 + noise):
        return None
    return Finding(ROOF, f"{mine / roof_gb:.0%} of the measured roof `{ceiling_name}` ({fmt(roof_gb / 1e3)} TB/s) "
                         f"at {params_text(record.params) or 'the same params'}: the measured roof is wrong "
                         "(not a bound)", fail=False)


# ---------------------------------------------------------------- one run


def check(plan: Plan, outcomes: dict[str, list[RunOutcome]]) -> Gating:
    """Run every gate over every record of the run.

    The physical gate applies to records of GPU builds run on a GPU kwiki knows (a host build's
    bytes are not the GPU's); the roof check to every artifact with a `ceiling` variant.
    """
    gating = Gating()
    gpu = plan.gpu
    ungated: set[str] = set()
    for path in sorted(outcomes):
        planned = plan.artifacts.get(path)
        if planned is None:
            continue
        records = [r for o in outcomes[path] for r in o.records if r.check.passed]
        on_gpu = gpu is not None and any(o.target != HOST for o in outcomes[path])
        for r in records:
            if on_gpu:
                assert gpu is not None
                for finding in physical(r, gpu):
                    gating.add(planned.name, r, finding)
                for finding_or_none in (clocks(r), unseen(r)):
                    if finding_or_none is not None:
                        gating.add(planned.name, r, finding_or_none)
                ungated |= _ungated(r, gpu)
        if planned.manifest is not None and planned.manifest.fresh_inputs is True:
            for r in records:
                if r.timing is not None and r.extra.get("fresh_inputs") != 1:
                    why = f"{planned.path}/artifact.yaml declares fresh_inputs, but this record's samples had none"
                    gating.add(planned.name, r, Finding(FRESH, why))
        _roofs(gating, planned, records)
        if on_gpu:
            passes = [o.identity for o in outcomes[path] if o.identity is not None]
            ungated |= _identities(gating, planned, records, passes)
    gating.notes = sorted(ungated)
    return gating


def identity(records: list[Record], patterns: list[str], where: str,
             every: bool = False) -> list[tuple[Record, Finding]]:
    """Kernel identity of one variant. Its `patterns` are alternatives for what may run (cuBLAS picks nvjet_* for
    bf16 and sm90_xmma_* for tf32, with or without a split-K reduction): every kernel CUPTI saw in a record's timed
    samples must be named by one of them (a hidden, undeclared kernel fails), and at least one kernel a pattern
    names must have run in each record (a record whose own kernel never ran fails). With `every` (the manifest's
    `kernels_all: true`, for a multi-kernel custom variant) each pattern must also name a kernel that ran in one of
    the variant's records (a split-K reduction may run at one shape only). Records without a kernel list are not
    judged."""
    seen = [r for r in records if r.kernels is not None and r.timing is not None]
    ran = {k for r in seen for k in r.kernels or []}
    never = [p for p in patterns if not any(kmatch.matches(p, k) for k in ran)] if every else []
    named = ", ".join(patterns)
    out = []
    for r in seen:
        mine = r.kernels or []
        undeclared = sorted(k for k in mine if not kmatch.declared(k, patterns))
        why = []
        if undeclared:
            why.append(f"ran {len(undeclared)} kernel{'s' * (len(undeclared) != 1)} its `kernels` "
                       f"({named}) do not name: {'; '.join(undeclared)}")
        if len(undeclared) == len(mine):
            why.append(f"none of the kernels its `kernels` ({named}) name ran in its timed samples"
                       + ("" if mine else " (no kernel ran)"))
        if never:
            why.append(f"`kernels_all`: `kernels` names {', '.join(never)}, which ran in none of its timed samples "
                       f"(ran: {'; '.join(sorted(ran)) or 'no kernel'})")
        if why:
            out.append((r, Finding(IDENTITY, f"{where}: " + "; ".join(why))))
    return out


def _identities(gating: Gating, planned: PlannedArtifact, records: list[Record],
                passes: list[IdentityPass] | None = None) -> set[str]:
    """The identity gate over an artifact's records; notes on what it could not check. Records timed by CUDA
    events carry no kernel list: where the run made an identity pass (kwiki.verify.run), they are judged by the
    kernels their variant ran at their params in it (`_by_pass`)."""
    m = planned.manifest
    if m is None or not records:
        return set()
    where_file = f"{planned.path}/artifact.yaml"
    unnamed, unseen = [], []
    for name in sorted({r.variant for r in records}):
        variant = m.variant(name)
        mine = [r for r in records if r.variant == name]
        if passes and variant is not None and variant.kernels and any(r.timing_source == "events" for r in mine):
            _by_pass(gating, planned, [r for r in mine if r.timing_source == "events"], variant.kernels,
                     variant.kernels_all, passes, f"{where_file}: variant {name!r} kernels")
            mine = [r for r in mine if r.timing_source != "events"]
            if not mine:
                continue
        if not any(r.kernels is not None for r in mine if r.timing is not None):
            if any(r.timing is not None for r in mine):
                unseen.append(name)
            continue
        if variant is None or not variant.kernels:
            unnamed.append(name)
            continue
        for r, finding in identity(mine, variant.kernels, f"{where_file}: variant {name!r} kernels",
                                   every=variant.kernels_all):
            gating.add(planned.name, r, finding)
    notes = set()
    if unseen:
        notes.add(f"identity gate: not checked for {planned.name} ({', '.join(unseen)}): no kernel list in the "
                  "records (timed without CUPTI)")
    if unnamed:
        notes.add(f"identity gate: not checked for {planned.name} ({', '.join(unnamed)}): the manifest names no "
                  "`kernels` for them")
    return notes


def _by_pass(gating: Gating, planned: PlannedArtifact, timed: list[Record], patterns: list[str], every: bool,
             passes: list[IdentityPass], where: str) -> None:
    """The identity gate of events-timed records by the identity pass: each record fails unless a pass ran its
    variant at its params and passed its check there (its twin), with the kernels its `kernels` globs allow
    (`identity`, on the twin) and its GPU work inside its event bracket (`outside`). Without a twin, the message
    names a pass that ended badly (a crash, a failed check) where there was one."""
    broken = next((p for p in passes if p.status != "ok"), None)
    seen = [r for p in passes for r in p.records if r.check.passed and r.timing is not None]
    found = {params_text(r.params): r for r in seen if r.variant == timed[0].variant}
    judged = {id(r): f for r, f in identity(list(found.values()), patterns, where + " (identity pass, CUPTI)", every)}
    for r in timed:
        twin = found.get(params_text(r.params))
        if twin is None and broken is not None:
            ended = (f"{where}: its identity pass (CUPTI) ended {broken.status}"
                     + (f" ({broken.message})" if broken.message else "") + " with no passing record at "
                     f"{params_text(r.params) or 'its params'}: the kernels of this events-timed record are unknown")
            gating.add(planned.name, r, Finding(IDENTITY, ended))
        elif twin is None:
            gating.add(planned.name, r, Finding(IDENTITY, f"{where}: its identity pass (CUPTI) has no passing record "
                                                          f"at {params_text(r.params) or 'its params'}: the kernels "
                                                          "of this events-timed record are unknown"))
        elif id(twin) in judged:
            gating.add(planned.name, r, judged[id(twin)])
        elif (why := outside(twin)) is not None:
            gating.add(planned.name, r, Finding(IDENTITY, f"{where}: {why}"))


# An honest sample's GPU work lies inside the event pair on its launch stream: CUPTI's span (first start to last
# end) can pass the bracket only by the skew between the two clocks' readings, allowed here with room to spare
OUTSIDE_SHARE, OUTSIDE_SKEW_US = 0.02, 2.0


def outside(twin: Record) -> str | None:
    """Why an identity pass's record shows GPU work outside its event bracket (None when it does not): work on a
    stream the launch stream does not wait for ends after the closing event, so an events-timed sample would not
    count it, while CUPTI, open until the device synchronises, does (its span, and its busy time, pass the
    bracket)."""
    if twin.timer is None or twin.timing is None:
        return None
    bracket = twin.timer.event_median_us
    work = max(twin.timer.span_median_us or 0.0, twin.timing.median_us)
    if work <= bracket * (1 + OUTSIDE_SHARE) + OUTSIDE_SKEW_US:
        return None
    return (f"in its identity pass (CUPTI) its GPU work spanned {fmt(work)} us, more than the event bracket of "
            f"{fmt(bracket)} us around it (+{OUTSIDE_SHARE:.0%} + {OUTSIDE_SKEW_US:g} us): work the launch "
            "stream does not wait for, which its events-timed samples leave out")


def _roofs(gating: Gating, planned: PlannedArtifact, records: list[Record]) -> None:
    m = planned.manifest
    if m is None or m.ceiling is None:
        return
    ceilings = {params_text(r.params): r for r in records if r.variant == m.ceiling}
    for c in ceilings.values():
        if c.roof is not None:
            for bad in roof_record(c.roof):
                gating.add(planned.name, c, bad)
    # one sweep per run: a roof bounds records of any params (a timed ceiling only its own params)
    fitted = next((c for c in ceilings.values() if c.roof is not None and not gating.failed(c)), None)
    for r in records:
        same = ceilings.get(params_text(r.params))
        bound = fitted or (same if same is not None and same.roof is None else None)
        if bound is None or r.variant == m.ceiling or gating.failed(r):
            continue
        finding = roof(r, bound, m.ceiling)
        if finding is not None:
            gating.add(planned.name, r, finding)


def roof_record(fitted: Roof) -> list[Finding]:
    """A ceiling record's own roof: failed when its points do not give its BW and t0, warned when they fit poorly."""
    fails, warns = roofs.problems(fitted)
    return [Finding(ROOF, f"the read roof is not what its sweep measured: {f}") for f in fails] + \
        [Finding(ROOF, f"the read roof fits its sweep poorly: {w}", fail=False) for w in warns]


def _ungated(record: Record, gpu: Gpu) -> set[str]:
    """Notes on the rates of `record` that no peak bounds on `gpu` (said once per run)."""
    tb, tflop = _rates(record)
    out = set()
    if tb is not None and peaks.bytes_peak(gpu, record.bytes_level) is None:
        out.add(f"physical gate: no {LEVEL_NAMES[record.bytes_level]} peak known for {gpu.name}; "
                f"those bytes are not gated")
    if tflop is not None:
        dtype = record.flops_dtype or record.params.get("dtype")
        if peaks.flops_peak(gpu, str(dtype) if dtype is not None else None)[0] is None:
            out.add(f"physical gate: no FLOP rate known for {gpu.name} ({gpu.arch}); FLOPs are not gated")
    return out
