"""kwiki_harness.py: the harness of `kind: python` artifacts. The artifact supplies kernels; this owns the
inputs, the reference comparison and the clock (protocol 2, the rules of kwiki_runner.cuh).

    python kwiki_harness.py describe MODULE                        # contract check; imports no torch
    python kwiki_harness.py run MODULE --variants a,b [--device cuda|cpu] [bench options]

`describe` imports the artifact's module (which imports torch and Triton only inside its functions) and
prints one JSON object: its variants, grid, tolerances, the problems of its contract, and whether torch
and Triton are installed (their versions, read from the package metadata, not imported).

`run` checks and times the variants and prints one record per (variant, params) on stdout, in the format
of kwiki_bench.cuh (kwiki/results/record.py reads both). For each params of the module's GRID:
 1. Input sets: make_inputs(params, seed + i) for i < input_sets (rotating, pre-filled; fewer when they do
    not fit), each with a pristine copy. Outputs: make_outputs(params, inputs), owned by the harness.
 2. Check every variant on input set 0: poison the outputs (0xFF bytes: NaN), call, sync, compare with
    reference(params, inputs) (computed in higher precision, per input set, when first needed) under the
    dtype's tolerance; the inputs must be bit-identical afterwards; returned outputs must be plain
    materialised tensors (exactly torch.Tensor, strided, not a view, no conj/neg bit, no storage shared
    with an input). A failed check: the record carries no timing.
 3. Time the variants that passed, interleaved round-robin after `warmup` calls each. Every timed sample:
    pick an input set at random; poison the outputs (returned outputs of the last call were poisoned after
    it); flush the L2 (a read of 2x its size); sync; then the call, and a sync, inside a window the torch
    profiler (CUPTI) times: the sample's time is the GPU's busy time in the window, the union of the
    intervals of every kernel, memcpy and memset that started in it, on any stream (as kwiki_runner.cuh).
    A window with no GPU work fails the variant. A random subset of samples (two among the first 8, then
    5% of the rest, at most 8; drawn from os.urandom after the run starts) is compared with the reference
    of the set it read, and its inputs with their pristine copy. NVML's SM clock, clock-event reasons and
    power are read while each sample runs (pynvml, optional).
 4. Emit one record per variant (its last params last).
A variant that raises, or whose call overruns its watchdog (faulthandler, which needs no GIL), ends this
process: the events file ($KWIKI_HARNESS_EVENTS: one JSON line per call, then the watchdog's text) says
which variant it was, and kwiki's parent (kwiki/verify/pyartifact.py) gives that variant its verdict and
runs the rest again. On a `cpu` device (host targets; the CPU tests) there is no flush, and a host clock
times the call (timing_source "wall").

The artifact runs in this process: the harness defends against kernels that cheat by accident or by
shortcut (cached outputs, skipped work, mutated inputs, lazy results), not against a module that patches
the harness itself.
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
RECHECK_WINDOW, RECHECK_AT_LEAST, RECHECK_AT_MOST, RECHECK_RATE = 8, 2, 8, 0.05
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
        applies = getattr(mod, "applies", None)
        # what a claim's params and variant must match, checked before a GPU
        out["grid"] = [{"params": p, "variants": [v for v in mod.VARIANTS if applies is None or applies(v, p)]}
                       for p in mod.GRID]
        out["tolerances"] = {k: {"atol": v[0], "rtol": v[1], "reason": v[2]} for k, v in mod.TOLERANCES.items()}
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


def windows(prof: Any) -> dict[str, tuple[int, int, frozenset[str]]]:
    """Per sample label: (busy ns, span ns, kernel names) of the GPU work launched inside its CPU range."""
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


def sample_windows(events: list[Event]) -> dict[str, tuple[int, int, frozenset[str]]]:
    """Per sample label: (busy, span, kernels) of the GPU activity (kernels, memcpys, memsets, any stream) that the
    CUDA runtime or driver calls made inside the label's CPU range launched, matched by correlation id,
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
        out[name] = (busy, span, frozenset(d.name for d in mine if not COPY.match(d.name)))
    return out


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
    events_us: list[float] = field(default_factory=list)
    seconds: float = 0.0
    rechecked: int = 0
    plan: set[int] = field(default_factory=set)
    counters: Counters = field(default_factory=Counters)
    timing_source: str = "cupti"
    kernels: frozenset[str] = frozenset()  # the kernels CUPTI saw in its timed samples


class Harness:
    def __init__(self, mod: ModuleType, device: str, opts: kb.Options, seed: int, input_sets: int,
                 timeouts: dict[str, float], events: Events):
        import torch

        self.torch, self.mod, self.device, self.opts, self.seed = torch, mod, device, opts, seed
        self.want_sets, self.timeouts, self.events = input_sets, timeouts, events
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))  # after the run starts
        self.nvml = Nvml(device)
        self.failures = 0
        self.flush = None
        if device == "cuda" and opts.flush_l2:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self.flush = torch.ones(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    # -- one call, under the watchdog
    def call(self, case: Case, inputs: Tensors, outputs: Tensors, phase: str) -> Any:
        self.events.say(call=case.variant, phase=phase)
        self.events.arm(case.timeout_s)
        try:
            ret = case.fn(dict(inputs), dict(outputs))
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (a variant that raises: its verdict, then this process ends)
            self.events.disarm()
            self.events.say(raised=case.variant, phase=phase, message=f"{type(exc).__name__}: {exc}"[:400])
            traceback.print_exc(file=sys.stderr)
            sys.stdout.flush()
            os._exit(EXIT_RAISED)
        self.events.disarm()
        return ret

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
        applies = getattr(mod, "applies", None)  # optional: which variants a params entry is for
        variants = [v for v in variants if applies is None or applies(v, params)]
        if not variants:
            return []
        tol = tuple(mod.TOLERANCES[params["dtype"]])
        sets = [mod.make_inputs(params, self.seed, self.device)]
        set_bytes = sum(t.numel() * t.element_size() for t in sets[0].values() if isinstance(t, torch.Tensor))
        n_sets = self.want_sets
        if self.device == "cuda":
            free, _ = torch.cuda.mem_get_info()
            n_sets = max(2, min(n_sets, int(0.4 * free // max(1, 2 * set_bytes))))
        sets += [mod.make_inputs(params, self.seed + i, self.device) for i in range(1, n_sets)]
        pristine = [{k: v.clone() for k, v in s.items() if isinstance(v, torch.Tensor)} for s in sets]
        refs: dict[int, Tensors] = {}

        def ref(i: int) -> Tensors:
            if i not in refs:
                refs[i] = mod.reference(params, dict(pristine[i]))
            return refs[i]

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
        # 1. check, on input set 0
        for case in cases:
            self.poison(outputs)
            ret = self.call(case, sets[0], outputs, "check")
            got, bad = self.outputs_of(ret, outputs, sets[0])
            if bad:
                case.passed, case.detail = False, bad
            else:
                case.passed, case.detail, case.max_abs, case.max_rel = self.verify(got, ref(0), sets[0], pristine[0],
                                                                                   tol)
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
            case.plan = self.recheck_plan()
        self.time([c for c in cases if c.passed], sets, pristine, outputs, ref, tol)
        return [self.record(c, params, tol, len(sets)) for c in cases]

    def recheck_plan(self) -> set[int]:
        span = min(RECHECK_WINDOW, self.opts.max_samples)
        plan = set(self.rng.sample(range(span), min(RECHECK_AT_LEAST, span)))
        for i in range(span, self.opts.max_samples):
            if len(plan) >= RECHECK_AT_MOST:
                break
            if self.rng.random() < RECHECK_RATE:
                plan.add(i)
        return plan

    def done(self, case: Case) -> bool:
        n = len(case.samples)
        if not case.passed or n >= self.opts.max_samples:
            return True
        if n < max(case.plan & set(range(RECHECK_WINDOW)), default=-1) + 1:
            return False  # the early re-checks must have happened
        stable = n >= self.opts.min_samples and kb.summarize(case.samples).rse <= self.opts.target_rse
        return stable or (n >= 3 and case.seconds >= self.opts.max_seconds)

    def time(self, cases: list[Case], sets: list[Tensors], pristine: list[Tensors], outputs: Tensors,
             ref: Callable[[int], Tensors], tol: Tolerance) -> None:
        cuda = self.device == "cuda"
        active = [c for c in cases if not self.done(c)]
        while active:
            labels: dict[str, tuple[Case, int]] = {}
            ctx = self.profiler() if cuda else None
            if ctx is not None:
                ctx.__enter__()
            for _ in range(8):  # rounds per profiler session
                for case in active:
                    if self.done(case):
                        continue
                    k = len(case.samples) + sum(1 for c, _ in labels.values() if c is case)
                    if k >= self.opts.max_samples:
                        continue
                    i = self.rng.randrange(len(sets))
                    self.sample(case, k, i, sets, pristine, outputs, ref, tol, labels)
                if ctx is None:
                    break
            if ctx is not None:
                ctx.__exit__(None, None, None)
                self.collect(ctx, labels)
            active = [c for c in active if not self.done(c)]

    def profiler(self) -> Any:
        import warnings

        from torch.profiler import ProfilerActivity, profile

        # one per session
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False)

    def sample(self, case: Case, k: int, i: int, sets: list[Tensors], pristine: list[Tensors], outputs: Tensors,
               ref: Callable[[int], Tensors], tol: Tolerance, labels: dict[str, tuple[Case, int]]) -> None:
        torch = self.torch
        cuda = self.device == "cuda"
        t0 = time.perf_counter()
        self.poison(outputs)  # poison -> flush -> launch
        if self.flush is not None:
            self.flush.max()
        if cuda:
            torch.cuda.synchronize()
        self.events.say(call=case.variant, phase="time")
        self.events.arm(case.timeout_s)
        label = f"{SAMPLE_PREFIX}{case.variant}.{k}"
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
                case.samples.append(max((time.perf_counter() - w0) * 1e6, 1e-3))
        except Exception as exc:  # noqa: BLE001
            self.events.disarm()
            self.events.say(raised=case.variant, phase="time", message=f"{type(exc).__name__}: {exc}"[:400])
            traceback.print_exc(file=sys.stderr)
            sys.stdout.flush()
            os._exit(EXIT_RAISED)
        self.events.disarm()
        got, bad = self.outputs_of(ret, outputs, sets[i])
        changed = inputs_changed(sets[i], pristine[i])  # after every call, not only the re-checked ones
        if bad or changed:
            case.passed, case.detail = False, f"timed sample {k}: {bad or changed}"
        elif k in case.plan:
            ok, detail, _, _ = self.verify(got, ref(i), sets[i], pristine[i], tol)
            case.rechecked += 1
            if not ok:
                case.passed = False
                case.detail = f"timed sample {k} (input set {i}) differs from the reference: {detail}"
        if got is not outputs:
            self.poison(got)
        case.seconds += time.perf_counter() - t0

    def collect(self, prof: Any, labels: dict[str, tuple[Case, int]]) -> None:
        found = windows(prof)
        any_activity = any(b > 0 for b, _, _ in found.values())
        for label, (case, k) in sorted(labels.items(), key=lambda x: x[1][1]):
            busy, span, kernels = found.get(label, (0, 0, frozenset()))
            if not any_activity:  # no CUPTI here: the event pair's time, said so
                case.timing_source = "events"
                case.samples.append(case.events_us[len(case.samples)])
                continue
            if busy <= 0:
                case.passed, case.detail = False, f"timed sample {k} ran no GPU work (nothing for the clock to time)"
                continue
            case.samples.append(busy / 1e3)
            case.spans.append(span / 1e3)
            case.kernels |= kernels

    def record(self, case: Case, params: dict[str, Any], tol: Tolerance, n_sets: int) -> dict[str, Any]:
        torch = self.torch
        work = self.mod.work(params) or {}
        timing = None
        if case.passed and case.samples:
            t = kb.summarize(case.samples)
            timing = {"median_us": t.median_us, "q1_us": t.q1_us, "q3_us": t.q3_us, "min_us": t.min_us,
                      "samples": t.samples, "rse": t.rse}
        extra: dict[str, Any] = {"input_sets": n_sets, "torch": torch.__version__, "harness": "python"}
        triton = version_of("triton")
        if triton:
            extra["triton"] = triton
        if case.spans:
            extra["span_median_us"] = kb.summarize(case.spans).median_us
        if case.events_us:
            extra["event_median_us"] = kb.summarize(case.events_us).median_us
        if not case.passed:
            self.failures += 1
        return {
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


def run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kwiki_harness.py run", allow_abbrev=False)
    p.add_argument("module")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--input-sets", type=int, default=3)
    p.add_argument("--timeouts", default="{}", help="JSON: variant -> watchdog seconds of one call")
    p.add_argument("--call-timeout", type=float, default=120.0)
    ns, rest = p.parse_known_args(argv)
    args = kb.parse_args(rest)
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
    harness = Harness(mod, ns.device, args.options, args.seed & 0xFFFFFFFF, ns.input_sets, timeouts, events)
    for params in mod.GRID:
        for rec in harness.run_params(dict(params), variants):
            out(json.dumps(rec, allow_nan=False, separators=(",", ":")))
    events.say(done=True)
    return 1 if harness.failures else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["describe"] and len(argv) == 2:
        out(json.dumps(describe(argv[1]), sort_keys=True, default=str))
        return 0
    if argv[:1] == ["run"]:
        return run(argv[1:])
    say((__doc__ or "").split("\n\n")[1])
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
