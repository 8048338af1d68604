"""kwiki_harness.py: the harness of `kind: python` artifacts. The artifact supplies kernels; this owns the
inputs, the reference comparison and the clock (protocol 3, the rules of kwiki_runner.cuh), and its parent
(kwiki/verify/pyjudge.py) owns what the artifact's module could otherwise change: the choice of inputs and of
re-checked samples, a clock of its own around every sample, the comparison that counts, and the records.

    python kwiki_harness.py describe MODULE                        # contract check; imports no torch
    python kwiki_harness.py run MODULE --variants a,b [--device cuda|cpu] [bench options]
    python kwiki_harness.py judge MODULE REQUESTS [--device cuda|cpu] # the parent's judge (runs no kernel)

`describe` imports the artifact's module (which imports torch and Triton only inside its functions) and
prints one JSON object: its variants, grid, tolerances, the problems of its contract, and whether torch
and Triton are installed (their versions, read from the package metadata, not imported).

`run` checks and times the variants, one record per (variant, params). Before the module is imported it
connects to its parent's Unix socket ($KWIKI_HARNESS_CHANNEL; run by hand, without it, the harness is its
own parent and prints the records on stdout in the format of kwiki_bench.cuh). The parent sends the base
seed, and this process measures its own cost of a bracket: 21 windows of one one-element torch add and 21
of eight (fixed_us, per_launch_us of the record's `timer`). Then, for each params of the module's GRID:
 1. Input sets: make_inputs(params, seed + i) for i < input_sets (rotating, pre-filled; fewer when they do
    not fit), each with a pristine copy. A module declaring FRESH_INPUTS = True has one set, refilled by
    make_inputs(params, s) with a new seed s from the parent in the untimed preparation of every timed
    sample (record extra.fresh_inputs = 1). Outputs: make_outputs(params, inputs), owned by the harness.
 2. Check every variant on input set 0: poison the outputs (0xFF bytes: NaN), call, sync, compare with
    reference(params, inputs) (computed on the device, in higher precision) under the dtype's tolerance; the
    inputs must be bit-identical afterwards; returned outputs must be plain materialised tensors (exactly
    torch.Tensor, strided, not a view, no conj/neg bit, no storage shared with an input). The check call is
    judged (below) too. A failed check: the record carries no timing.
 3. Time the variants that passed, interleaved round-robin after `warmup` calls each, until every variant has
    met its stopping rule (one that has samples on in turn while another still samples, up to its own
    max_samples and max_seconds: the medians cover the same stretch of time). Every timed sample:
    the parent names its input set (or fresh seed); poison the outputs (returned outputs of the last call were
    poisoned after it); flush the L2 (a read of 2x its size); sync; tell the parent "go" (its clock starts);
    then the call, between a torch.cuda.Event pair (the bracket, Python's dispatch included) and a sync,
    inside a window the torch profiler (CUPTI) times: the sample's time is the GPU's busy time in the
    window, the union of the intervals of every kernel, memcpy and memset that its launch calls made, on
    any stream (as kwiki_runner.cuh); the span (first start to last end) and the number of kernels with it.
    A window with no GPU work fails the variant. Then the parent is told "done" (its clock stops) and only
    now says whether this sample is judged: with probability p(i) = min(0.38, 7.2 / (i + 1)) for timed
    sample i (kwiki/results/recheck.py; every sample when max_samples < 20), so nothing in this process knows
    the plan before a sample ran. A judged sample is compared here with a reference computed now from the
    inputs it read (no reference is kept between samples), and 2048 elements of each output and input, at
    positions drawn by the parent, are shipped to it; after the run a process that imports the module but
    calls none of its variants (`judge`) makes those inputs again from their seeds, computes the reference
    and compares the shipped elements with it. A case takes at least 20 samples (fewer only when
    max_samples is below 20). The inputs of every call are compared with their pristine copy. NVML's SM
    clock, clock-event reasons and power are read while each sample runs, and after a case's samples the
    processes holding a context on the GPU: another process's fails the case (pynvml optional; the record's
    timer.contexts says "listed", "own-not-listed" or "unavailable").
 4. The tail check (kwiki_runner.cuh's): after its samples a case is called back to back n more times (n from
    the parent, in [1024, 2048), at most 0.1 s of its median), then once more on poisoned outputs, and that
    call is judged: a variant honest for its first N calls cannot outwait it. Variants named by
    --sustained=a,b then get a sustained figure: blocks of about 20 ms of back-to-back calls of each case in
    alternation until NVML's SM clock and power each moved by less than 2% over a case's last 3 blocks (1 s
    at least, 5 s at most), then 7 rounds of a block per case of B + a random 0..B/2 calls (the parent draws
    it), each block timed by CUPTI and the event pair, its last call judged (record.sustained).
 5. Send each record to the parent, which writes it: its timing from the samples the parent bracketed, its
    check failed when the judge disagreed or the parent's clock saw much longer samples than were reported.
A variant that raises, or whose call overruns its watchdog (faulthandler, which needs no GIL), ends this
process: the events file ($KWIKI_HARNESS_EVENTS: one JSON line per call, then the watchdog's text) says
which variant it was, and kwiki's parent (kwiki/verify/pyartifact.py) gives that variant its verdict and
runs the rest again. On a `cpu` device (host targets; the CPU tests) there is no flush, and a host clock
times the call (timing_source "wall").

The artifact runs in this process and can reach all of it: what it can change here (the in-process
comparison, the profiler's busy times, the bracket, the records) the parent either decides itself (inputs,
plan, the judged comparison, the records) or bounds with its own clock. What remains: a report shortened by
less than the parent's allowance (about 200 us beyond this process's own fixed cost on a GPU) is not seen by
it (the `unseen` gate holds the in-process bracket tighter, but this process computes it); work done before
"go" (in the preparation) is on no clock, though poisoned outputs and fresh inputs leave it little to do; the
judge compares 2048 elements of each output, so a handful of wrong elements escape it and only the in-process
full comparison sees them; and make_inputs and reference are the module's own, reviewed code in both processes.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.metadata
import importlib.util
import json
import os
import random
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kwiki_bench as kb

PROTOCOL_VERSION = 3  # kwiki/results/record.py: the same rules as kwiki_runner.cuh's
CONTRACT = {"GRID": "list", "VARIANTS": "names", "TOLERANCES": "mapping", "make_inputs": "callable",
            "make_outputs": "callable", "reference": "callable", "work": "callable", "load": "callable"}
RECHECK_RATE, RECHECK_SCALE, RECHECK_MIN_SAMPLES = 0.38, 7.2, 20  # kwiki/results/recheck.py's p(i); a test compares
SHIPPED = 2048  # elements of each output and input a judged sample ships to the parent's judge
TAIL_MIN, TAIL_SECONDS = 1024, 0.1  # the tail check: [1024, 2048) calls back to back, at most 0.1 s of the median
BLOCK_SECONDS, MAX_BLOCK, ROUNDS = 0.02, 2000, 7  # sustained blocks (kwiki_runner.cuh's kBlockSeconds, ...)
SETTLE_MIN_S, SETTLE_MAX_S, SETTLE_TOL = 1.0, 5.0, 0.02
CALIBRATION_WINDOWS = 21  # windows of 1 and of 8 trivial torch ops: this process's cost of a bracket
CHANNEL_ENV = "KWIKI_HARNESS_CHANNEL"  # the parent's Unix socket (kwiki/verify/pyjudge.py); absent: run by hand
EXIT_RAISED = 3
SAMPLE_PREFIX = "kwiki.sample."
API_CALL = re.compile(r"^cu(da)?[A-Z]")  # a CUDA runtime or driver call (cudaLaunchKernel, cuLaunchKernelEx), not work
Tensors = dict[str, Any]  # name -> torch.Tensor (torch is imported inside the functions that use it)
Tolerance = tuple[float, float, str]  # (atol, rtol, reason) of the module's TOLERANCES
def say(line: str) -> None:
    """A log line on stderr (the harness's stdout carries records and events only)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def out(line: str) -> None:
    """A record (or describe's JSON) on stdout, one line, flushed: kwiki reads it as it comes."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


COPY = re.compile(r"^(Memcpy|Memset)\b")  # the profiler's names of copies and fills: work, but not kernels


# ---------------------------------------------------------------------------------------------
# The module and its contract
# ---------------------------------------------------------------------------------------------

def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kwiki_artifact_{Path(path).stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look a module up by name
    sys.path.insert(0, str(Path(path).resolve().parent))  # the module's own helpers (kernels.py) beside it
    spec.loader.exec_module(module)
    return module


def version_of(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_state() -> tuple[str | None, str | None]:
    """(torch version, why torch cannot be used): found without importing it."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError) as exc:
        return None, f"torch cannot be found: {exc}"
    if not found:
        return None, "torch is not installed for this Python (pip install 'kwiki[torch]')"
    return version_of("torch") or "unknown", None


def contract_problems(mod: ModuleType) -> list[str]:
    problems: list[str] = []
    for name, kind in CONTRACT.items():
        value = getattr(mod, name, None)
        if value is None:
            problems.append(f"{name} is missing")
        elif kind == "callable" and not callable(value):
            problems.append(f"{name} must be a function")
        elif kind == "list" and not (isinstance(value, list) and value and all(isinstance(p, dict) for p in value)):
            problems.append(f"{name} must be a non-empty list of params mappings")
        elif kind == "names" and not (isinstance(value, (list, tuple)) and value
                                      and all(isinstance(v, str) and v for v in value)):
            problems.append(f"{name} must be a non-empty list of variant names")
        elif kind == "mapping" and not isinstance(value, dict):
            problems.append(f"{name} must map a dtype to (atol, rtol, reason)")
    if problems:
        return problems
    for dtype, tol in mod.TOLERANCES.items():
        if not (isinstance(tol, (list, tuple)) and len(tol) == 3 and all(isinstance(x, (int, float)) for x in tol[:2])
                and tol[0] >= 0 and tol[1] >= 0 and isinstance(tol[2], str) and tol[2].strip()):
            problems.append(f"TOLERANCES[{dtype!r}] must be (atol >= 0, rtol >= 0, a reason)")
    for i, params in enumerate(mod.GRID):
        bad = [k for k, v in params.items() if not isinstance(k, str) or not isinstance(v, (str, int, float, bool))]
        if bad:
            problems.append(f"GRID[{i}]: {bad[0]!r} is not a scalar param")
        if params.get("dtype") not in mod.TOLERANCES:
            problems.append(f"GRID[{i}]: dtype {params.get('dtype')!r} has no entry in TOLERANCES")
    if len(set(mod.VARIANTS)) != len(mod.VARIANTS):
        problems.append("VARIANTS names a variant twice")
    return problems


def describe(path: str) -> dict[str, Any]:
    torch_version, why = torch_state()
    out: dict[str, Any] = {"module": path, "torch": torch_version, "torch_missing": why,
                           "triton": version_of("triton"), "python": sys.version.split()[0], "problems": []}
    try:
        mod = load_module(path)
    except Exception as exc:  # noqa: BLE001  (any import failure of the artifact is reported, located)
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb) if f.filename == path), path)
        out["problems"].append(f"{where}: importing the module failed: {type(exc).__name__}: {exc}")
        return out
    out["problems"] = contract_problems(mod)
    if not out["problems"]:
        out["variants"] = list(mod.VARIANTS)
        # what a claim's params and variant must match, checked before a GPU
        out["grid"] = [{"params": p, "variants": applicable(mod, list(mod.VARIANTS), p)} for p in mod.GRID]
        out["tolerances"] = {k: {"atol": v[0], "rtol": v[1], "reason": v[2]} for k, v in mod.TOLERANCES.items()}
        out["fresh_inputs"] = getattr(mod, "FRESH_INPUTS", False) is True
    return out


# ---------------------------------------------------------------------------------------------
# Events and the watchdog
# ---------------------------------------------------------------------------------------------

class Events:
    """One JSON line per call to the parent's events file; faulthandler writes its text there too."""

    def __init__(self, path: str | None):
        self.file = open(path, "a", buffering=1, encoding="utf-8") if path else None
        if self.file is not None:
            faulthandler.enable(file=self.file)

    def say(self, **event: Any) -> None:
        if self.file is not None:
            self.file.write(json.dumps(event, separators=(",", ":")) + "\n")
            self.file.flush()

    def arm(self, seconds: float) -> None:
        if self.file is not None:
            faulthandler.dump_traceback_later(seconds, exit=True, file=self.file)

    def disarm(self) -> None:
        if self.file is not None:
            faulthandler.cancel_dump_traceback_later()


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def plain_problem(t: Any, declared: Any, inputs: Tensors) -> str | None:
    """Why a returned output is not a plain materialised tensor of the declared kind, or None."""
    import torch

    if type(t) is not torch.Tensor:
        return f"is a {type(t).__module__}.{type(t).__qualname__}, not a plain torch.Tensor"
    if t.layout != torch.strided:
        return f"has layout {t.layout}, not strided"
    if t._base is not None:
        return "is a view of another tensor (a lazy view), not a materialised output"
    if t.is_conj() or t.is_neg() or t._is_zerotensor():
        return "carries a lazy conj/neg/zero bit"
    if t.requires_grad:
        return "requires grad"
    if (t.shape, t.dtype, t.device) != (declared.shape, declared.dtype, declared.device):
        return (f"is {tuple(t.shape)} {t.dtype} on {t.device}; make_outputs declares "
                f"{tuple(declared.shape)} {declared.dtype} on {declared.device}")
    ptr = t.untyped_storage().data_ptr()
    if any(isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == ptr for x in inputs.values()):
        return "shares its storage with an input"
    return None


def compare(got: Any, ref: Any, atol: float, rtol: float, name: str,
            chunk: int = 1 << 26) -> tuple[bool, str, float | None, float | None]:
    """(passed, detail, max |err|, max rel err): every element finite and |got-ref| <= atol + rtol*|ref|,
    integers exactly (|got-ref| <= atol); in chunks, so a 4 GiB output needs no 4 GiB temporaries. A
    reference given as (flat indices, values) is compared at those elements only (a sampled reference)."""
    import torch

    if isinstance(ref, tuple):
        index, ref = ref
        got = got.reshape(-1)[index.to(got.device)]
    g_all, r_all = got.detach().reshape(-1), ref.detach().reshape(-1)
    if g_all.numel() != r_all.numel() or g_all.numel() == 0:
        return False, f"{name}: {g_all.numel()} elements, the reference has {r_all.numel()}", None, None
    exact = not got.dtype.is_floating_point and not ref.dtype.is_floating_point
    wide = torch.int64 if exact else (
        torch.float64 if got.device.type == "cpu" or ref.dtype == torch.float64 else torch.float32)
    bad, first, max_abs, max_rel, finite = 0, None, 0.0, 0.0, True
    for lo in range(0, g_all.numel(), chunk):
        g = g_all[lo:lo + chunk].to(wide)
        r = r_all[lo:lo + chunk].to(device=got.device, dtype=wide)
        err = (g - r).abs()
        ok = err <= atol if exact else torch.isfinite(g) & (err <= atol + rtol * r.abs())
        n_bad = int((~ok).sum())
        if n_bad and first is None:
            i = int((~ok).nonzero()[0])
            first = (lo + i, float(g[i]), float(r[i]))
        bad += n_bad
        if finite and (exact or bool(torch.isfinite(err).all())):
            max_abs = max(max_abs, float(err.max()))
            if not exact:
                max_rel = max(max_rel, float((err / r.abs().clamp_min(max(atol, 1e-30))).max()))
        else:
            finite = False
    rule = "exactly" if exact else f"within atol={atol:.3g} rtol={rtol:.3g}"
    if bad:
        assert first is not None
        return False, (f"{name}: {bad} of {g_all.numel()} elements not {rule} (first at flat index {first[0]}: "
                       f"got {first[1]:.6g}, reference {first[2]:.6g})"), None, None
    return (True, f"{g_all.numel()} elements {rule}", (max_abs if finite else None),
            (max_rel if finite and not exact else None))


def inputs_changed(inputs: Tensors, pristine: Tensors) -> str | None:
    """Why the inputs differ (bit for bit) from their pristine copy, or None; a changed input is restored,
    so the variants after it read what they should."""
    import torch

    for k, x in pristine.items():
        now = inputs[k]
        if not torch.equal(now.reshape(-1).view(torch.uint8), x.reshape(-1).view(torch.uint8)):
            for name, good in pristine.items():
                inputs[name].copy_(good)
            return f"input {k!r} was changed by the call (inputs must be left as they were)"
    return None


# ---------------------------------------------------------------------------------------------
# NVML, per sample
# ---------------------------------------------------------------------------------------------

class Nvml:
    POWER_CAP, THERMAL, HW = 0x4, 0x20, 0x8 | 0x40 | 0x80

    def __init__(self, device: str):
        self.h: Any = None
        self.nv: Any = None
        if device != "cuda":
            return
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            uuid = str(props.uuid)  # NVML's handle by UUID: CUDA_VISIBLE_DEVICES renumbers indices, not UUIDs
            self.h = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            self.nv = pynvml
        except (ImportError, AttributeError, OSError) as exc:
            say(f"kwiki_harness: no NVML counters ({exc})")
        except Exception as exc:  # noqa: BLE001  (pynvml.NVMLError and its many subclasses)
            say(f"kwiki_harness: no NVML counters ({exc})")

    def read(self) -> tuple[float | None, int | None, float | None]:
        """(SM MHz, clock-event reasons, board power W) now."""
        if self.h is None:
            return None, None, None
        nv = self.nv
        reasons: Any = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons",
                               getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        out: list[Any] = []
        for fn in (lambda: float(nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_SM)),
                   lambda: int(reasons(self.h)),
                   lambda: nv.nvmlDeviceGetPowerUsage(self.h) / 1e3):
            try:
                out.append(fn())
            except Exception:  # noqa: BLE001  (a counter this driver lacks stays None)
                out.append(None)
        return out[0], out[1], out[2]

    def processes(self) -> tuple[str, list[int]]:
        """("listed" | "own-not-listed" | "unavailable", the other PIDs holding a context on this GPU)."""
        if self.h is None:
            return "unavailable", []
        nv = self.nv
        listing = getattr(nv, "nvmlDeviceGetComputeRunningProcesses_v3", None) or \
            getattr(nv, "nvmlDeviceGetComputeRunningProcesses", None)
        if listing is None:
            return "unavailable", []
        try:
            pids = [int(p.pid) for p in listing(self.h)]
        except Exception:  # noqa: BLE001  (pynvml.NVMLError: this driver or container cannot list them)
            return "unavailable", []
        me = os.getpid()
        if me not in pids:  # a PID namespace (a container): one entry may be ours, a second is not
            return "own-not-listed", sorted(pids)[1:]
        return "listed", sorted(p for p in pids if p != me)


@dataclass
class Counters:
    """NVML's view of a variant's sampling windows: SM clocks, and seconds per clock-event reason and energy."""

    REASONS: ClassVar[dict[str, int]] = {  # record field: bit
        "power_cap_s": Nvml.POWER_CAP, "thermal_s": Nvml.THERMAL, "hw_slowdown_s": Nvml.HW}
    mhz: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # window_s, energy_j and the REASONS' fields
    seen: bool = False

    def add(self, mhz: float | None, reasons: int | None, watts: float | None, window_s: float) -> None:
        if mhz is not None:
            self.mhz.append(mhz)
        if reasons is None and watts is None:
            return
        self.seen = True
        grow = {"window_s": window_s, "energy_j": (watts or 0.0) * window_s}
        grow |= {f: window_s * bool((reasons or 0) & bit) for f, bit in self.REASONS.items()}
        for k, v in grow.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + v

    def as_record(self) -> dict[str, Any]:
        m = sorted(self.mhz)
        out: dict[str, Any] = {"sm_mhz_before": self.mhz[0] if m else None, "sm_mhz_after": self.mhz[-1] if m else None,
                               "sm_mhz_min": m[0] if m else None, "sm_mhz_median": m[len(m) // 2] if m else None,
                               "sm_mhz_max": m[-1] if m else None}
        if self.seen:
            out |= self.seconds
        return out


# ---------------------------------------------------------------------------------------------
# Timing: the profiler's CUPTI timestamps, busy time as kwiki_cupti.cuh defines it
# ---------------------------------------------------------------------------------------------

def busy_and_span(spans: list[tuple[int, int]]) -> tuple[int, int]:
    """(busy, span) of intervals: the length of their union, and first start to last end (kwiki_cupti.cuh)."""
    valid = sorted((s, e) for s, e in spans if 0 < s <= e)
    if not valid:
        return 0, 0
    busy, cur_s, cur_e = 0, valid[0][0], valid[0][1]
    for s, e in valid[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy, max(e for _, e in valid) - valid[0][0]


def _ns(ev: Any, which: str) -> int:
    fn = getattr(ev, f"{which}_ns", None)
    if fn is not None:
        return int(fn())
    if which == "start":
        return int(ev.start_us() * 1000)
    return int((ev.start_us() + ev.duration_us()) * 1000)


def windows(prof: Any) -> dict[str, tuple[int, int, frozenset[str], int]]:
    """Per sample label: (busy ns, span ns, kernel names, kernels run) of the GPU work launched inside its CPU range."""
    from torch.autograd import DeviceType  # type: ignore[attr-defined]  # torch exports it without __all__

    events = []
    for ev in prof.profiler.kineto_results.events():
        cpu = ev.device_type() == DeviceType.CPU
        if not cpu and getattr(ev, "is_user_annotation", lambda: False)():
            continue  # the GPU copy of a record_function range: not work
        events.append(Event(cpu, ev.name(), _ns(ev, "start"), _ns(ev, "end"), int(ev.correlation_id())))
    return sample_windows(events)


@dataclass(frozen=True)
class Event:
    cpu: bool  # a host-side event (a range, a CUDA runtime or driver call); else GPU activity
    name: str
    start: int  # ns; host events on the host clock, GPU activity on CUPTI's
    end: int
    correlation: int = 0  # CUPTI's id linking a runtime/driver launch call to the work it launched


def sample_windows(events: list[Event]) -> dict[str, tuple[int, int, frozenset[str], int]]:
    """Per sample label: (busy, span, kernel names, kernels run) of the GPU activity (kernels, memcpys, memsets,
    any stream) that the CUDA runtime or driver calls made inside the label's CPU range launched, matched by
    correlation id,
    so no host and GPU clocks are compared. The range holds the call and the sync after it; the poison and
    the L2 flush are launched (and finished) before it opens. Where no launch call correlates (a profiler
    that records none), the activity that started inside the range, on the profiler's aligned clock."""
    ranges = [(e.start, e.end, e.name) for e in events if e.cpu and e.name.startswith(SAMPLE_PREFIX)]
    launches = [(e.start, e.correlation) for e in events if e.correlation and API_CALL.match(e.name)]
    device = [e for e in events if not e.cpu and not e.name.startswith(SAMPLE_PREFIX) and not API_CALL.match(e.name)]
    by_corr: dict[int, list[Event]] = {}
    for e in device:
        by_corr.setdefault(e.correlation, []).append(e)
    out = {}
    for lo, hi, name in ranges:
        ids = {c for t, c in launches if lo <= t <= hi}
        mine = [d for c in ids for d in by_corr.get(c, [])]
        if not launches:
            mine = [d for d in device if lo <= d.start <= hi]
        busy, span = busy_and_span([(d.start, d.end) for d in mine])
        kernels = [d.name for d in mine if not COPY.match(d.name)]
        out[name] = (busy, span, frozenset(kernels), len(kernels))
    return out


# ---------------------------------------------------------------------------------------------
# The parent: who chooses the inputs and the re-checked samples, and keeps the clock of its own
# ---------------------------------------------------------------------------------------------

def recheck_probability(i: int, max_samples: int) -> float:
    """kwiki/results/recheck.py's p(i): the probability that timed sample i (0-based) is re-checked."""
    return 1.0 if max_samples < RECHECK_MIN_SAMPLES else min(RECHECK_RATE, RECHECK_SCALE / (i + 1))


def tail_calls(want: int, median_us: float) -> int:
    """The tail check's back-to-back calls: `want` (drawn from [TAIL_MIN, 2 TAIL_MIN)), at most TAIL_SECONDS of the
    case's median (kwiki_runner.cuh's kTailMin, kTailSeconds)."""
    return max(1, min(want, int(TAIL_SECONDS * 1e6 / max(median_us, 0.1))))


def applicable(mod: ModuleType, variants: list[str], params: dict[str, Any]) -> list[str]:
    """The variants a params entry is for: the module's optional applies(name, params) decides, else all."""
    applies = getattr(mod, "applies", None)
    return [v for v in variants if applies is None or applies(v, params)]


def profile_marker() -> Any:
    """A Triton kernel that does nothing, named as kwiki_runner.cuh's marker: its grid of n + 1 programs names
    the profiled case that follows it in Nsight Compute's report (kwiki/verify/profile.py, by_case)."""
    triton = importlib.import_module("triton")  # on the GPU machine; the harness needs no Triton otherwise

    @triton.jit  # type: ignore[untyped-decorator]
    def profile_marker() -> None:  # its name is what the profiler's report shows
        pass

    return profile_marker


def positions(seed: int, numel: int) -> list[int]:
    """The flat indices a judged sample ships (the same in the harness and the judge): SHIPPED of them drawn
    from `seed`, or every one of a small tensor."""
    if numel <= SHIPPED:
        return list(range(numel))
    rng = random.Random(seed)
    return [rng.randrange(numel) for _ in range(SHIPPED)]


class Parent:
    """The harness's side of its parent. Run by hand (`run` without $KWIKI_HARNESS_CHANNEL) the harness is its own
    parent: it draws the input sets and the re-check plan here, after each sample ran, and prints its records."""

    def __init__(self) -> None:
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))  # drawn after the run starts
        self.max_samples = RECHECK_MIN_SAMPLES
        self.sets = 1

    def ask(self, op: str, **msg: Any) -> dict[str, Any]:
        if op == "hello":
            self.max_samples, self.sets = msg["max_samples"], msg["sets"]
            return {"seed": self.rng.getrandbits(31)}
        if op == "prep":
            return {"seed": self.rng.getrandbits(31)} if msg["fresh"] else {"set": self.rng.randrange(self.sets)}
        if op == "done":
            k = msg["k"]  # a timed sample's index; a string for the checked call, the tail and sustained blocks
            check = isinstance(k, str) or (msg["v"] and self.rng.random() < recheck_probability(k, self.max_samples))
            return {"positions": self.rng.getrandbits(31) if check else None}
        if op == "tail":
            return {"n": tail_calls(self.rng.randrange(TAIL_MIN, 2 * TAIL_MIN), msg["median_us"])}
        if op == "block":
            return {"extra": self.rng.randrange(msg["base"] // 2 + 1)}
        raise ValueError(op)

    def tell(self, op: str, **msg: Any) -> None:
        if op == "sets":
            self.sets = msg["n"]
        elif op == "record":
            out(json.dumps(msg["record"], allow_nan=False, separators=(",", ":")))


class Channel(Parent):
    """kwiki's parent process (kwiki/verify/pyjudge.py) at the end of a Unix socket: it chooses the inputs and
    the re-checked samples, brackets every sample with its own clock, has the shipped elements judged by a
    process that never runs a kernel, and writes the records itself (stdout is not read)."""

    def __init__(self, path: str) -> None:
        import socket

        super().__init__()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.r, self.w = self.sock.makefile("rb"), self.sock.makefile("wb")

    def _send(self, op: str, msg: dict[str, Any]) -> None:
        self.w.write(json.dumps({"op": op, **msg}, separators=(",", ":")).encode() + b"\n")
        self.w.flush()

    def ask(self, op: str, **msg: Any) -> dict[str, Any]:
        self._send(op, msg)
        line = self.r.readline()
        if not line:
            raise SystemExit("kwiki_harness: the parent closed the channel")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def tell(self, op: str, **msg: Any) -> None:
        self._send(op, msg)


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    variant: str
    fn: Callable[..., Any]
    timeout_s: float
    passed: bool = True
    detail: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    samples: list[float] = field(default_factory=list)
    spans: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # kernels CUPTI saw per timed sample
    events_us: list[float] = field(default_factory=list)
    seconds: float = 0.0
    rechecked: int = 0
    counters: Counters = field(default_factory=Counters)
    timing_source: str = "cupti"
    kernels: frozenset[str] = frozenset()  # the kernels CUPTI saw in its timed samples
    contexts: str | None = None
    sustained: dict[str, Any] | None = None


@dataclass
class Block:
    """One sustained block: its busy time, bracket, calls, NVML's clock and power during it, the last call's return."""

    busy_us: float
    event_us: float
    calls: int
    mhz: float | None
    watts: float | None
    ret: Any


def command(pid: int) -> str:
    """ ("name"): the command of a process, where /proc tells it."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f" ({f.read().strip()[:40]})"
    except OSError:
        return ""


def steady(blocks: list[Block]) -> bool:
    """NVML's SM clock and board power each moved by less than SETTLE_TOL over the last 3 blocks (a reading NVML
    cannot give: nothing to wait for)."""
    if len(blocks) < 3:
        return False
    for name in ("mhz", "watts"):
        xs = [getattr(b, name) for b in blocks[-3:]]
        if any(x is None for x in xs):
            continue
        hi = max(xs)
        if hi > 0 and (hi - min(xs)) / hi >= SETTLE_TOL:
            return False
    return True


def sustained_figure(blocks: list[Block], settle_s: float, settled: bool) -> dict[str, Any]:
    """The record's `sustained`: a call's share of each block's busy time, over the rounds."""
    t = kb.summarize([b.busy_us / b.calls for b in blocks])
    wall = sum(b.event_us for b in blocks)
    mhz = [b.mhz for b in blocks if b.mhz is not None]
    watts = [b.watts for b in blocks if b.watts is not None]
    return {"median_us": t.median_us, "q1_us": t.q1_us, "q3_us": t.q3_us, "min_us": t.min_us, "samples": t.samples,
            "launches": int(kb.summarize([float(b.calls) for b in blocks]).median_us),
            "duty": min(1.05, sum(b.busy_us for b in blocks) / wall) if wall > 0 else 0.0,
            "sm_mhz": kb.summarize(mhz).median_us if mhz else None,
            "power_w": kb.summarize(watts).median_us if watts else None, "settle_s": settle_s, "settled": settled}


@dataclass
class Calibration:
    """This process's own cost of a bracket (protocol 3's `timer`): event minus busy time of a window of one
    trivial torch op (fixed_us), and what each further op adds (per_launch_us); torch ops, so that the allowance
    covers Python's dispatch as a variant's own ops pay it."""

    fixed_us: float = 0.0
    per_launch_us: float = 0.0


class Harness:
    def __init__(self, mod: ModuleType, device: str, opts: kb.Options, input_sets: int,
                 timeouts: dict[str, float], events: Events, parent: Parent):
        import torch

        self.torch, self.mod, self.device, self.opts = torch, mod, device, opts
        self.want_sets, self.timeouts, self.events, self.parent = input_sets, timeouts, events, parent
        self.fresh = getattr(mod, "FRESH_INPUTS", False) is True
        self.sustained: set[str] = set()  # --sustained=a,b: the variants that get a sustained figure
        self.nvml = Nvml(device)
        self.failures = 0
        self.profiled = 0  # --profile-mode: the cases profiled so far in this process (the markers' numbers)
        self.flush = None
        self.seed = 0
        self.calibration = Calibration()
        if device == "cuda" and opts.flush_l2:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self.flush = torch.ones(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    # -- the parent's view of a sample: which inputs it reads, its bracket, whether it is judged
    def calibrate(self) -> None:
        """Windows of 1 and of 8 one-element torch adds, bracketed as samples are (the parent's clock included):
        this process's fixed cost of a bracket and its cost per further launch."""
        torch, cuda = self.torch, self.device == "cuda"
        trivial: Tensors = {"x": torch.zeros(1, device=self.device)}

        def one(i: Tensors, o: Tensors) -> None:  # called as a variant is: fn(dict(inputs), dict(outputs))
            o["x"].add_(1)

        def eight(i: Tensors, o: Tensors) -> None:
            x = o["x"]
            for _ in range(8):
                x.add_(1)

        labels: dict[str, tuple[int, float]] = {}
        ctx = self.profiler() if cuda else None
        if ctx is not None:
            ctx.__enter__()
        for k in range(2 * CALIBRATION_WINDOWS):
            ops = 1 if k % 2 == 0 else 8
            label = f"{SAMPLE_PREFIX}.{k}"
            if cuda:
                torch.cuda.synchronize()
            self.parent.tell("go", v="", k=k)
            with torch.profiler.record_function(label):
                w0 = time.perf_counter()
                start, stop = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) \
                    if cuda else (None, None)
                if start is not None:
                    start.record()
                (one if ops == 1 else eight)(dict(trivial), dict(trivial))
                if stop is not None:
                    stop.record()
                    self.nvml.read()  # as a sample reads NVML while its launch runs
                    torch.cuda.synchronize()
                wall = (time.perf_counter() - w0) * 1e6
            self.parent.ask("done", v="", k=k)
            labels[label] = (ops, start.elapsed_time(stop) * 1e3 if start is not None and stop is not None else wall)
            if not cuda:
                self.parent.tell("time", v="", k=k, us=wall)
        if ctx is None:
            return
        ctx.__exit__(None, None, None)
        found = windows(ctx)
        excess: dict[int, list[float]] = {1: [], 8: []}
        for label, (ops, event_us) in labels.items():
            busy = found.get(label, (0, 0, frozenset(), 0))[0] / 1e3
            excess[ops].append(max(0.0, event_us - busy))
            self.parent.tell("time", v="", k=int(label.rsplit(".", 1)[1]), us=busy)
        if excess[1] and excess[8]:
            fixed = kb.summarize(excess[1]).median_us if excess[1] else 0.0
            self.calibration = Calibration(fixed, max(0.0, (kb.summarize(excess[8]).median_us - fixed) / 7))

    def inputs_for(self, case: Case, k: int | str, params: dict[str, Any], sets: list[Tensors],
                   pristine: list[Tensors]) -> int:
        """The input set sample k reads, as the parent chose it; with FRESH_INPUTS, set 0 refilled from the
        module's make_inputs with the parent's new seed (the untimed preparation of every timed sample)."""
        reply = self.parent.ask("prep", v=case.variant, k=k, fresh=self.fresh)
        if not self.fresh:
            return int(reply["set"]) % len(sets)
        new = self.mod.make_inputs(params, int(reply["seed"]), self.device)
        for name, t in new.items():
            if isinstance(t, self.torch.Tensor):
                pristine[0][name].copy_(t)
                sets[0][name].copy_(t)
        return 0

    def judge(self, case: Case, k: int | str, params: dict[str, Any], got: Tensors, inputs: Tensors,
              pristine: Tensors, tol: Tolerance) -> bool:
        """After sample k ran: the parent says whether it is judged (its outputs not yet poisoned). Judged, it is
        compared here with a reference computed now on the device from the inputs it read (never kept from an
        earlier sample), and SHIPPED elements of its outputs and inputs, at positions the parent drew, go to the
        parent, whose judge compares them with a reference of its own. False when it failed here."""
        reply = self.parent.ask("done", v=case.variant, k=k)
        if reply.get("positions") is None:
            return True
        seed = int(reply["positions"])
        shipped = {"out": {n: self.values(t, seed) for n, t in got.items()},  # as the call left them
                   "in": {n: self.values(t, seed) for n, t in inputs.items() if isinstance(t, self.torch.Tensor)}}
        ref = self.mod.reference(params, dict(pristine))
        ok, detail, a, r = self.verify(got, ref, inputs, pristine, tol)
        del ref
        self.parent.tell("checked", v=case.variant, k=k, ok=ok, detail=detail, **shipped)
        if k != "check":
            case.rechecked += 1
        if not ok:
            case.passed = False
            case.detail = detail if k == "check" else f"timed sample {k} differs from the reference: {detail}"
        elif k == "check":
            case.passed, case.detail, case.max_abs, case.max_rel = True, detail, a, r
        return ok

    def values(self, t: Any, seed: int) -> list[Any]:
        torch = self.torch
        flat = t.detach().reshape(-1)
        index = torch.tensor(positions(seed, flat.numel()), dtype=torch.int64, device=flat.device)
        picked = flat[index]
        return list(picked.tolist() if not picked.dtype.is_floating_point else picked.double().tolist())

    # -- one call, under the watchdog
    def call(self, case: Case, inputs: Tensors, outputs: Tensors, phase: str) -> Any:
        self.events.say(call=case.variant, phase=phase)
        self.events.arm(case.timeout_s)
        try:
            ret = case.fn(dict(inputs), dict(outputs))
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (a variant that raises: its verdict, then this process ends)
            self.raised(case, phase, exc)
        self.events.disarm()
        return ret

    def raised(self, case: Case, phase: str, exc: BaseException) -> None:
        self.events.disarm()
        self.events.say(raised=case.variant, phase=phase, message=f"{type(exc).__name__}: {exc}"[:400])
        traceback.print_exc(file=sys.stderr)
        sys.stdout.flush()
        os._exit(EXIT_RAISED)

    def outputs_of(self, ret: Any, outputs: Tensors, inputs: Tensors) -> tuple[Tensors, str | None]:
        torch = self.torch
        if ret is None:
            return outputs, None
        if isinstance(ret, torch.Tensor) and len(outputs) == 1:
            ret = {next(iter(outputs)): ret}
        if not isinstance(ret, dict) or set(ret) != set(outputs):
            return outputs, (f"returned {type(ret).__name__}; a variant returns None (it wrote the outputs it was "
                             f"given) or its outputs {sorted(outputs)}")
        for k, t in ret.items():
            if t is outputs[k]:
                continue
            why = plain_problem(t, outputs[k], inputs)
            if why:
                return outputs, f"output {k!r} {why}"
        return ret, None

    def poison(self, outputs: Tensors) -> None:
        for t in outputs.values():
            t.view(self.torch.uint8).fill_(0xFF) if t.is_contiguous() else t.fill_(float("nan"))

    def verify(self, got: Tensors, ref: Tensors, inputs: Tensors, pristine: Tensors,
               tol: Tolerance) -> tuple[bool, str, Any, Any]:
        worst_abs = worst_rel = None
        details = []
        for k in sorted(ref):
            ok, detail, a, r = compare(got[k], ref[k], tol[0], tol[1], k)
            if not ok:
                return False, detail, None, None
            details.append(detail if len(ref) == 1 else f"{k}: {detail}")
            worst_abs = a if worst_abs is None or (a is not None and a > worst_abs) else worst_abs
            worst_rel = r if worst_rel is None or (r is not None and r > worst_rel) else worst_rel
        changed = inputs_changed(inputs, pristine)
        if changed:
            return False, changed, None, None
        return True, "; ".join(details), worst_abs, worst_rel

    def run_params(self, params: dict[str, Any], variants: list[str]) -> list[dict[str, Any]]:
        torch, mod = self.torch, self.mod
        variants = applicable(mod, variants, params)
        if not variants:
            return []
        self.parent.tell("params", params=params)
        tol = tuple(mod.TOLERANCES[params["dtype"]])
        sets = [mod.make_inputs(params, self.seed, self.device)]
        set_bytes = sum(t.numel() * t.element_size() for t in sets[0].values() if isinstance(t, torch.Tensor))
        n_sets = 1 if self.fresh else self.want_sets
        if self.device == "cuda" and not self.fresh:
            free, _ = torch.cuda.mem_get_info()
            n_sets = max(2, min(n_sets, int(0.4 * free // max(1, 2 * set_bytes))))
        sets += [mod.make_inputs(params, self.seed + i, self.device) for i in range(1, n_sets)]
        self.parent.tell("sets", n=len(sets))
        pristine = [{k: v.clone() for k, v in s.items() if isinstance(v, torch.Tensor)} for s in sets]
        outputs = mod.make_outputs(params, sets[0])
        cases = []
        for v in variants:
            self.events.say(call=v, phase="load")
            self.events.arm(self.timeouts[v])
            try:
                fn = mod.load(v)
            except Exception as exc:  # noqa: BLE001
                self.events.say(raised=v, phase="load", message=f"{type(exc).__name__}: {exc}"[:400])
                sys.stdout.flush()
                os._exit(EXIT_RAISED)
            self.events.disarm()
            cases.append(Case(v, fn, self.timeouts[v]))
        # 1. check, on input set 0 as make_inputs made it (the parent's judge makes it again from the seed)
        for case in cases:
            self.poison(outputs)
            ret = self.call(case, sets[0], outputs, "check")
            got, bad = self.outputs_of(ret, outputs, sets[0])
            if bad:
                case.passed, case.detail = False, bad
                self.parent.ask("done", v=case.variant, k="check")
                self.parent.tell("checked", v=case.variant, k="check", ok=False, detail=bad, out={}, **{"in": {}})
            else:
                self.judge(case, "check", params, got, sets[0], pristine[0], tol)
            if got is not outputs:
                self.poison(got)
        # 2. warm up and time, interleaved
        for case in [c for c in cases if c.passed]:
            for _ in range(self.opts.warmup):
                ret = self.call(case, sets[0], outputs, "warmup")
                got, _ = self.outputs_of(ret, outputs, sets[0])
                changed = inputs_changed(sets[0], pristine[0])
                if changed and case.passed:
                    case.passed, case.detail = False, f"warm-up call: {changed}"
                if got is not outputs:
                    self.poison(got)
        self.time([c for c in cases if c.passed], params, sets, pristine, outputs, tol)
        return [self.record(c, params, tol, len(sets)) for c in cases]

    # -- --profile-mode: one marked call per case under Nsight Compute (kwiki/verify/profile.py); no timing
    def profile_params(self, params: dict[str, Any], variants: list[str]) -> list[dict[str, Any]]:
        """Check each case on one input set (its first call also compiles), then call it once more inside a
        profiler range, right after a `profile_marker` launch of n + 1 programs, n counting the profiled cases of
        this process (kwiki_runner.cuh's profile mode): Nsight Compute gives the kernels after the marker to the
        record that carries extra.profile_case = n. Records carry no timing."""
        torch, mod = self.torch, self.mod
        variants = applicable(mod, variants, params)
        tol = tuple(mod.TOLERANCES[params["dtype"]])
        inputs = mod.make_inputs(params, self.seed, self.device)
        pristine = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        outputs = mod.make_outputs(params, inputs)
        marker = profile_marker()
        records = []
        for v in variants:
            try:
                case = Case(v, mod.load(v), self.timeouts[v])
            except Exception as exc:  # noqa: BLE001  (a variant that cannot load: its record says why)
                case = Case(v, lambda i, o: None, self.timeouts[v], passed=False,
                            detail=f"load: {type(exc).__name__}: {exc}"[:400])
            if case.passed:
                self.poison(outputs)
                got, bad = self.outputs_of(self.call(case, inputs, outputs, "check"), outputs, inputs)
                ok, detail, _, _ = (False, bad, None, None) if bad else \
                    self.verify(got, mod.reference(params, dict(pristine)), inputs, pristine, tol)
                case.passed, case.detail = ok, detail
            rec = self.record(case, params, tol, 1)
            if case.passed:
                n = self.profiled
                self.profiled += 1
                self.poison(outputs)
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
                marker[(n + 1,)]()
                self.call(case, inputs, outputs, "profile")
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
                rec["extra"]["profile_case"] = n
            records.append(rec)
        return records

    def done(self, case: Case) -> bool:
        n = len(case.samples)
        if not case.passed or n >= self.opts.max_samples:
            return True
        if n < min(max(self.opts.min_samples, RECHECK_MIN_SAMPLES), self.opts.max_samples):
            return False  # a checked case takes at least 20 samples: the re-checks spread over them
        stable = kb.summarize(case.samples).rse <= self.opts.target_rse
        return stable or case.seconds >= self.opts.max_seconds

    def capped(self, case: Case) -> bool:
        """No further sample for this case, whoever still samples: it failed, or reached its own max_samples, or
        its max_seconds once it has its re-checks' minimum."""
        n = len(case.samples)
        if not case.passed or n >= self.opts.max_samples:
            return True
        return n >= min(max(self.opts.min_samples, RECHECK_MIN_SAMPLES), self.opts.max_samples) and \
            case.seconds >= self.opts.max_seconds

    def time(self, cases: list[Case], params: dict[str, Any], sets: list[Tensors], pristine: list[Tensors],
             outputs: Tensors, tol: Tolerance) -> None:
        """Round-robin until every case is done; a done case samples on while another one is not (up to its own
        limits), so that every median covers the same stretch of the GPU's clock and temperature."""
        cuda = self.device == "cuda"
        while any(not self.done(c) for c in cases):
            labels: dict[str, tuple[Case, int]] = {}
            ctx = self.profiler() if cuda else None
            if ctx is not None:
                ctx.__enter__()
            for _ in range(8):  # rounds per profiler session
                for case in cases:
                    if self.capped(case):
                        continue
                    k = len(case.samples) + sum(1 for c, _ in labels.values() if c is case)
                    if k >= self.opts.max_samples:
                        continue
                    self.sample(case, k, params, sets, pristine, outputs, tol, labels)
                if ctx is None:
                    break
            if ctx is not None:
                ctx.__exit__(None, None, None)
                self.collect(ctx, labels)
        for case in cases:
            case.contexts = self.contexts(case)
            self.tail(case, params, sets, pristine, outputs, tol)
        self.sustain([c for c in cases if c.passed and c.samples and c.variant in self.sustained], params, sets,
                     pristine, outputs, tol)

    def tail(self, case: Case, params: dict[str, Any], sets: list[Tensors], pristine: list[Tensors],
             outputs: Tensors, tol: Tolerance) -> None:
        """kwiki_runner.cuh's tail check: a variant honest for its first N calls would outwait every re-check of a
        case that stops before N. After its samples a case is called back to back n more times (n from the parent,
        drawn from [1024, 2048), at most 0.1 s of its median), then once more on poisoned outputs, and that call is
        judged."""
        if not case.passed or not case.samples:
            return
        median = kb.summarize(case.samples).median_us
        n = int(self.parent.ask("tail", v=case.variant, k="tail", median_us=median)["n"])
        i = self.inputs_for(case, "tail", params, sets, pristine)
        self.events.say(call=case.variant, phase="tail")
        self.events.arm(case.timeout_s * 2 + 1e-4 * n)
        try:
            for _ in range(n):
                ret = case.fn(dict(sets[i]), dict(outputs))
                if ret is not None:
                    got, _ = self.outputs_of(ret, outputs, sets[i])
                    if got is not outputs:
                        self.poison(got)
            self.poison(outputs)
            ret = case.fn(dict(sets[i]), dict(outputs))
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            self.raised(case, "tail", exc)
        self.events.disarm()
        got, bad = self.outputs_of(ret, outputs, sets[i])
        if bad:
            self.parent.ask("done", v=case.variant, k="tail")
            case.passed, case.detail = False, f"the call after {n} more back to back: {bad}"
        elif not self.judge(case, "tail", params, got, sets[i], pristine[i], tol):
            case.detail = case.detail.replace("timed sample tail", f"the call after {n} more back to back")
        if got is not outputs:
            self.poison(got)

    # -- sustained (protocol 3): blocks of back-to-back calls after the clock and the power settled
    def block(self, case: Case, n: int, i: int, sets: list[Tensors], outputs: Tensors) -> Block:
        """n calls of `case` back to back (no poison, flush or sync between them): busy time (CUPTI, else the
        bracket), the bracket (event pair; the host clock on a cpu device), and NVML's clock and power during it."""
        torch, cuda = self.torch, self.device == "cuda"
        self.poison(outputs)
        if cuda:
            torch.cuda.synchronize()
        self.events.say(call=case.variant, phase="sustained")
        self.events.arm(case.timeout_s * 2 + 1e-4 * n)
        ctx = self.profiler() if cuda else None
        label = f"{SAMPLE_PREFIX}{case.variant}.block"
        try:
            if ctx is not None:
                ctx.__enter__()
            with torch.profiler.record_function(label):
                w0 = time.perf_counter()
                start, stop = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) \
                    if cuda else (None, None)
                if start is not None:
                    start.record()
                ret = None
                for _ in range(n):
                    ret = case.fn(dict(sets[i]), dict(outputs))
                if stop is not None:
                    stop.record()
                mhz, _, watts = self.nvml.read()
                if cuda:
                    torch.cuda.synchronize()
                wall = (time.perf_counter() - w0) * 1e6
            if ctx is not None:
                ctx.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001
            self.raised(case, "sustained", exc)
        self.events.disarm()
        event = start.elapsed_time(stop) * 1e3 if start is not None and stop is not None else wall
        busy = windows(ctx).get(label, (0, 0, frozenset(), 0))[0] / 1e3 if ctx is not None else 0.0
        return Block(busy if busy > 0 else event, event, n, mhz, watts, ret)

    def sustain(self, cases: list[Case], params: dict[str, Any], sets: list[Tensors], pristine: list[Tensors],
                outputs: Tensors, tol: Tolerance) -> None:
        """kwiki_runner.cuh's sustain(): settle (blocks of about BLOCK_SECONDS of each case in alternation until
        NVML's SM clock and board power each moved by less than SETTLE_TOL over a case's last 3 blocks, at least
        SETTLE_MIN_S, at most SETTLE_MAX_S), then ROUNDS rounds of a block per case of B + a random 0..B/2 calls
        (the parent draws it), whose last call's outputs are judged. The figure: a call's share of a block's busy
        time."""
        if not cases:
            return
        settle_s, settled = self.settle(cases, sets, outputs)
        got: dict[str, list[Block]] = {c.variant: [] for c in cases}
        for r in range(ROUNDS):
            for case in [c for c in cases if c.passed]:
                b = self.block_calls(case)
                n = b + int(self.parent.ask("block", v=case.variant, k=f"s{r}", base=b)["extra"])
                k = f"s{r}"
                i = self.inputs_for(case, k, params, sets, pristine)
                blk = self.block(case, n, i, sets, outputs)
                got[case.variant].append(blk)
                out_, bad = self.outputs_of(blk.ret, outputs, sets[i])
                if bad:
                    self.parent.ask("done", v=case.variant, k=k)
                    case.passed, case.detail = False, f"sustained block {r}: {bad}"
                elif not self.judge(case, k, params, out_, sets[i], pristine[i], tol):
                    case.detail = case.detail.replace(f"timed sample {k}", f"the last call of sustained block {r} "
                                                                            f"({n} back to back)")
                if out_ is not outputs:
                    self.poison(out_)
        for case in cases:
            blocks = got[case.variant]
            if case.passed and blocks:
                case.sustained = sustained_figure(blocks, settle_s, settled)

    def block_calls(self, case: Case) -> int:
        """B: about BLOCK_SECONDS of the case's burst median, 10 to MAX_BLOCK calls."""
        return min(MAX_BLOCK, max(10, int(BLOCK_SECONDS * 1e6 / max(kb.summarize(case.samples).median_us, 0.1))))

    def settle(self, cases: list[Case], sets: list[Tensors], outputs: Tensors) -> tuple[float, bool]:
        """Blocks of each case in alternation until every case's clock and power are steady (seconds, settled)."""
        t0 = time.perf_counter()
        seen: dict[str, list[Block]] = {c.variant: [] for c in cases}
        while True:
            for case in cases:
                seen[case.variant].append(self.block(case, self.block_calls(case), 0, sets, outputs))
            settle_s = time.perf_counter() - t0
            settled = all(steady(b) for b in seen.values())
            if (settled and settle_s >= SETTLE_MIN_S) or settle_s >= SETTLE_MAX_S:
                return settle_s, settled

    def contexts(self, case: Case) -> str | None:
        """Protocol 3's one process on the GPU, read after a case's timed samples: another process holding a
        context fails its timing."""
        if self.device != "cuda":
            return None
        state, others = self.nvml.processes()
        if others and case.passed:
            case.passed = False
            case.detail = f"process {others[0]}{command(others[0])} holds a context on this GPU during timing"
        return state

    def profiler(self) -> Any:
        import warnings

        from torch.profiler import ProfilerActivity, profile

        # one per session
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False)

    def sample(self, case: Case, k: int, params: dict[str, Any], sets: list[Tensors], pristine: list[Tensors],
               outputs: Tensors, tol: Tolerance, labels: dict[str, tuple[Case, int]]) -> None:
        torch = self.torch
        cuda = self.device == "cuda"
        t0 = time.perf_counter()
        i = self.inputs_for(case, k, params, sets, pristine)
        self.poison(outputs)  # poison -> flush -> launch
        if self.flush is not None:
            self.flush.max()
        if cuda:
            torch.cuda.synchronize()
        self.events.say(call=case.variant, phase="time")
        self.events.arm(case.timeout_s)
        label = f"{SAMPLE_PREFIX}{case.variant}.{k}"
        self.parent.tell("go", v=case.variant, k=k)
        try:
            if cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.profiler.record_function(label):
                    w0 = time.perf_counter()
                    start.record()
                    ret = case.fn(dict(sets[i]), dict(outputs))
                    stop.record()
                    mhz, reasons, watts = self.nvml.read()  # while the launch runs
                    torch.cuda.synchronize()
                    window = time.perf_counter() - w0
                case.events_us.append(start.elapsed_time(stop) * 1e3)
                case.counters.add(mhz, reasons, watts, window)
                labels[label] = (case, k)
            else:
                w0 = time.perf_counter()
                ret = case.fn(dict(sets[i]), dict(outputs))
                us = max((time.perf_counter() - w0) * 1e6, 1e-3)
                case.samples.append(us)
        except Exception as exc:  # noqa: BLE001
            self.raised(case, "time", exc)
        self.events.disarm()
        got, bad = self.outputs_of(ret, outputs, sets[i])
        if bad:
            self.parent.ask("done", v=case.variant, k=k)
            case.passed, case.detail = False, f"timed sample {k}: {bad}"
        elif self.judge(case, k, params, got, sets[i], pristine[i], tol):
            changed = inputs_changed(sets[i], pristine[i])  # after every call, not only the judged ones
            if changed:
                case.passed, case.detail = False, f"timed sample {k}: {changed}"
        if not cuda:
            self.parent.tell("time", v=case.variant, k=k, us=case.samples[-1])
        if got is not outputs:
            self.poison(got)
        case.seconds += time.perf_counter() - t0

    def collect(self, prof: Any, labels: dict[str, tuple[Case, int]]) -> None:
        found = windows(prof)
        any_activity = any(w[0] > 0 for w in found.values())
        for label, (case, k) in sorted(labels.items(), key=lambda x: x[1][1]):
            busy, span, kernels, count = found.get(label, (0, 0, frozenset(), 0))
            event_us = case.events_us[len(case.samples)]
            if not any_activity:  # no CUPTI here: the event pair's time, said so
                case.timing_source = "events"
                case.samples.append(event_us)
                self.parent.tell("time", v=case.variant, k=k, us=event_us)
                continue
            if busy <= 0:
                case.passed, case.detail = False, f"timed sample {k} ran no GPU work (nothing for the clock to time)"
                continue
            case.samples.append(busy / 1e3)
            case.spans.append(span / 1e3)
            case.counts.append(count)
            case.kernels |= kernels
            self.parent.tell("time", v=case.variant, k=k, us=busy / 1e3)

    def timer(self, case: Case) -> dict[str, Any] | None:
        """Protocol 3's `timer`: what the event bracket, the span and the kernel count saw, beside this process's
        own cost of a bracket (the `unseen` gate holds the bracket to the busy time plus them)."""
        if self.device != "cuda" or case.timing_source != "cupti" or not case.events_us or not case.counts:
            return None
        counts = sorted(case.counts)
        return {"event_median_us": kb.summarize(case.events_us).median_us,
                "span_median_us": kb.summarize(case.spans).median_us if case.spans else None,
                "kernels": float(counts[len(counts) // 2]), "fixed_us": self.calibration.fixed_us,
                "per_launch_us": self.calibration.per_launch_us, "contexts": case.contexts}

    def record(self, case: Case, params: dict[str, Any], tol: Tolerance, n_sets: int) -> dict[str, Any]:
        torch = self.torch
        work = self.mod.work(params) or {}
        timing = None
        if case.passed and case.samples:
            t = kb.summarize(case.samples)
            timing = {"median_us": t.median_us, "q1_us": t.q1_us, "q3_us": t.q3_us, "min_us": t.min_us,
                      "samples": t.samples, "rse": t.rse}
        extra: dict[str, Any] = {"input_sets": n_sets, "torch": torch.__version__, "harness": "python"}
        if self.fresh:
            extra["fresh_inputs"] = 1
        triton = version_of("triton")
        if triton:
            extra["triton"] = triton
        if case.spans:
            extra["span_median_us"] = kb.summarize(case.spans).median_us
        if case.events_us:
            extra["event_median_us"] = kb.summarize(case.events_us).median_us
        if not case.passed:
            self.failures += 1
        rec = {
            "kwiki_record": 1, "variant": case.variant, "params": params,
            "bytes": kb.finite(work.get("bytes")), "bytes_level": work.get("bytes_level", "dram"),
            "flops": kb.finite(work.get("flops")), "flops_dtype": work.get("flops_dtype"),
            "timing": timing,
            "timing_source": (case.timing_source if self.device == "cuda" else "wall") if timing else None,
            "protocol": PROTOCOL_VERSION, "rechecked": case.rechecked if timing else None,
            "check": kb.check(case.passed, case.max_abs, case.max_rel, tol[1], f"torch reference ({tol[2]})",
                              case.detail),
            "clocks": case.counters.as_record() if timing else {},
            "kernels": sorted(case.kernels) if timing and case.timing_source == "cupti" and self.device == "cuda"
            else None,
            "extra": {k: v for k, v in extra.items() if isinstance(v, str) or kb.finite(v) is not None},
        }
        timer = self.timer(case) if timing else None
        if timer is not None:
            rec["timer"] = timer
        if timing and case.sustained is not None:
            rec["sustained"] = case.sustained
        return rec


# ---------------------------------------------------------------------------------------------
# The judge: shipped elements against a reference made again from the seeds (a process that runs no kernel)
# ---------------------------------------------------------------------------------------------

def judge(argv: list[str]) -> int:
    """`judge MODULE REQUESTS --device D`: one verdict line per request line (JSON: params, the input set's seed,
    the positions' seed, the shipped output and input elements). The module's make_inputs and reference run
    here; its load() and variants never do. The comparison's functions are bound before the module is imported."""
    p = argparse.ArgumentParser(prog="kwiki_harness.py judge", allow_abbrev=False)
    p.add_argument("module")
    p.add_argument("requests")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cpu")
    ns = p.parse_args(argv)
    import torch

    compare_, positions_, dumps = compare, positions, json.dumps  # bound before the module runs any code
    mod = load_module(ns.module)
    made: dict[str, tuple[Tensors, Tensors, dict[str, int]]] = {}
    with open(ns.requests, encoding="utf-8") as f:
        for line in f:
            req = json.loads(line)
            key = json.dumps([req["params"], req["seed"]], sort_keys=True)
            if key not in made:
                made.clear()  # one input set at a time (requests come grouped)
                inputs = mod.make_inputs(req["params"], int(req["seed"]), ns.device)
                ref = mod.reference(req["params"], dict(inputs))
                # a sampled reference's positions are drawn over the whole output: its size comes from
                # make_outputs here, never from what the harness said
                sizes = {n: t.numel() for n, t in mod.make_outputs(req["params"], dict(inputs)).items()} \
                    if any(isinstance(r, tuple) for r in ref.values()) else {}
                made[key] = (inputs, ref, sizes)
            inputs, ref, sizes = made[key]
            atol, rtol, _ = mod.TOLERANCES[req["params"]["dtype"]]
            verdict = judged(torch, compare_, positions_, {**req, "numel": sizes}, inputs, ref, float(atol),
                             float(rtol))
            sys.stdout.write(dumps({"id": req["id"], **verdict}) + "\n")
    sys.stdout.flush()
    return 0


def judged(torch: Any, compare_: Any, positions_: Any, req: dict[str, Any], inputs: Tensors, ref: Tensors,
           atol: float, rtol: float) -> dict[str, Any]:
    seed = int(req["positions"])
    if set(req["out"]) != set(ref):
        return {"ok": False, "detail": f"shipped outputs {sorted(req['out'])}, the reference has {sorted(ref)}"}
    for name, got in sorted(req["out"].items()):
        r = ref[name]
        if isinstance(r, tuple):  # a sampled reference: its own elements only
            index, r = r
            where = {int(j): n for n, j in enumerate(index.reshape(-1).tolist())}
            if name not in req["numel"]:
                return {"ok": False, "detail": f"{name}: make_outputs makes no such output"}
            pos = positions_(seed, int(req["numel"][name]))
            if len(got) != len(pos):
                return {"ok": False, "detail": f"{name}: {len(got)} elements shipped, {len(pos)} drawn"}
            keep = [n for n, j in enumerate(pos) if j in where]
            got, r = [got[n] for n in keep], r.reshape(-1)[[where[pos[n]] for n in keep]]
        else:
            r = r.detach().reshape(-1)
            pos = positions_(seed, r.numel())
            if len(got) != len(pos):
                return {"ok": False, "detail": f"{name}: {len(got)} elements shipped, {len(pos)} drawn"}
            r = r[torch.tensor(pos, dtype=torch.int64, device=r.device)]
        g = torch.tensor(got, dtype=torch.float64 if r.dtype.is_floating_point else torch.int64)
        ok, detail, _, _ = compare_(g, r.cpu(), atol, rtol, name)
        if not ok:
            return {"ok": False, "detail": f"{len(got)} drawn elements: {detail}"}
    for name, got in sorted(req["in"].items()):
        x = inputs.get(name)
        if not isinstance(x, torch.Tensor):
            return {"ok": False, "detail": f"input {name!r} is not one make_inputs makes"}
        flat = x.detach().reshape(-1)
        want = flat[torch.tensor(positions_(seed, flat.numel()), dtype=torch.int64, device=flat.device)]
        want_list = want.double().tolist() if want.dtype.is_floating_point else want.tolist()
        same = len(got) == len(want_list) and all(a == b or (a != a and b != b)  # NaN is NaN
                                                  for a, b in zip(got, want_list, strict=True))
        if not same:
            return {"ok": False, "detail": f"input {name!r} is not what make_inputs makes from its seed (changed "
                                           "by the call, or other inputs than the parent chose)"}
    return {"ok": True, "detail": ""}


def run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kwiki_harness.py run", allow_abbrev=False)
    p.add_argument("module")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--input-sets", type=int, default=3)
    p.add_argument("--timeouts", default="{}", help="JSON: variant -> watchdog seconds of one call")
    p.add_argument("--call-timeout", type=float, default=120.0)
    p.add_argument("--profile-mode", action="store_true",
                   help="check, then one marked call per case for Nsight Compute; no timing (kwiki verify --profile)")
    ns, rest = p.parse_known_args(argv)
    args = kb.parse_args(rest)
    channel = os.environ.get(CHANNEL_ENV)
    parent = Channel(channel) if channel else Parent()  # connected before the module runs any code
    events = Events(os.environ.get("KWIKI_HARNESS_EVENTS"))
    mod = load_module(ns.module)
    problems = contract_problems(mod)
    if problems:
        say(f"kwiki_harness: {ns.module}: " + "; ".join(problems))
        return 2
    variants = args.variants or list(mod.VARIANTS)
    unknown = sorted(set(variants) - set(mod.VARIANTS))
    if unknown:
        say(f"kwiki_harness: unknown variant(s): {', '.join(unknown)}")
        return 2
    given = json.loads(ns.timeouts)
    timeouts = {v: float(given.get(v, ns.call_timeout)) for v in variants}
    import torch

    if ns.device == "cuda" and not torch.cuda.is_available():
        say("kwiki_harness: --device cuda, but torch sees no CUDA device")
        return 2
    if ns.profile_mode and ns.device != "cuda":
        say("kwiki_harness: --profile-mode needs --device cuda (Nsight Compute counts GPU kernels)")
        return 2
    harness = Harness(mod, ns.device, args.options, ns.input_sets, timeouts, events, parent)
    harness.sustained = {v for v in args.rest.get("sustained", "").split(",") if v}
    fresh = harness.fresh
    harness.seed = int(parent.ask("hello", max_samples=args.options.max_samples, sets=ns.input_sets,
                                  device=ns.device, fresh=fresh)["seed"])
    if not ns.profile_mode:
        harness.calibrate()
    records = harness.profile_params if ns.profile_mode else harness.run_params
    for params in mod.GRID:
        for rec in records(dict(params), variants):
            parent.tell("record", record=rec)
    events.say(done=True)
    parent.tell("end")
    return 1 if harness.failures else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["describe"] and len(argv) == 2:
        out(json.dumps(describe(argv[1]), sort_keys=True, default=str))
        return 0
    if argv[:1] == ["run"]:
        return run(argv[1:])
    if argv[:1] == ["judge"]:
        return judge(argv[1:])
    say((__doc__ or "").split("\n\n")[1])
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
