"""kwiki_bench.py: the Python twin of kwiki_bench.cuh, for torch-based baselines.

Same protocol and the same record format as the C++ header (see its top comment):
random inputs (never zeros), outputs poisoned before checked runs, elementwise comparison
|got - ref| <= atol + rtol*|ref| against a higher-precision reference with NaN/Inf never passing,
warm-up, an L2 flush (reading a buffer of 2x the L2 size, so no dirty lines are left for the
timed launch to write back) before every timed sample outside the timed region, CUDA events
recorded on the current stream, candidates sampled round-robin (interleaved), and sampling
until the median's relative standard error is <= 0.5% (1.2533 * (IQR/1.349) / sqrt(n) / median),
max_samples or max_seconds per candidate.
Records go to stdout, one JSON object per line; logs to stderr. Torch and NVML are imported
only inside the functions that use them, so this module imports without either.

Typical use:
    args = parse_args(sys.argv[1:])
    results = bench({"torch_copy": lambda: dst.copy_(src)}, args.options)
    emit(record("torch_copy", params={...}, bytes_=..., result=results["torch_copy"], check=c))
    sys.exit(exit_code())
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

RECORD_VERSION = 1
_failures = 0


@dataclass
class Options:
    target_rse: float = 0.005
    min_samples: int = 20
    max_samples: int = 2000
    max_seconds: float = 2.0
    warmup: int = 3
    flush_l2: bool = True


@dataclass
class Timing:
    median_us: float
    q1_us: float
    q3_us: float
    min_us: float
    samples: int
    rse: float


@dataclass
class Clocks:
    sm_mhz_before: float | None = None
    sm_mhz_after: float | None = None


@dataclass
class Result:
    name: str
    timing: Timing
    clocks: Clocks


@dataclass
class Args:
    variants: list[str] | None
    options: Options
    seed: int
    rest: dict[str, str] = field(default_factory=dict)

    def want(self, name: str) -> bool:
        return self.variants is None or name in self.variants


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------

def parse_args(argv: list[str], known: list[str] | None = None) -> Args:
    """--variants a,b,c, the bench options of the C++ header, --seed, and any other --name=value."""
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--variants", default=None)
    p.add_argument("--target-rse", type=float, default=Options.target_rse)
    p.add_argument("--min-samples", type=int, default=Options.min_samples)
    p.add_argument("--max-samples", type=int, default=Options.max_samples)
    p.add_argument("--max-seconds", type=float, default=Options.max_seconds)
    p.add_argument("--warmup", type=int, default=Options.warmup)
    p.add_argument("--no-flush", action="store_true")
    p.add_argument("--seed", type=int, default=None)
    ns, unknown = p.parse_known_args(argv)
    rest = {}
    for item in unknown:
        if not item.startswith("--"):
            p.error(f"unexpected argument {item!r}")
        key, _, value = item[2:].partition("=")
        rest[key] = value or "1"
    variants = [v for v in ns.variants.split(",") if v] if ns.variants is not None else None
    if known is not None and variants is not None:
        unknown_v = sorted(set(variants) - set(known))
        if unknown_v:
            p.error(f"unknown variant(s): {', '.join(unknown_v)}")
    opts = Options(ns.target_rse, ns.min_samples, ns.max_samples, ns.max_seconds, ns.warmup, not ns.no_flush)
    seed = ns.seed if ns.seed is not None else time.monotonic_ns() ^ 0x5EED
    return Args(variants, opts, seed, rest)


# ---------------------------------------------------------------------------------------------
# Inputs and checks
# ---------------------------------------------------------------------------------------------

def random_tensor(shape, dtype, seed: int, lo: float = -1.0, hi: float = 1.0, device: str = "cuda"):
    """Uniform in [lo, hi) (never zeros), from a seeded generator on the device."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(seed & 0x7FFFFFFFFFFFFFFF)
    x = torch.rand(shape, generator=g, device=device, dtype=torch.float32)
    return (lo + (hi - lo) * x).to(dtype)


def poison(t) -> None:
    """0xFF in every byte: NaN for float dtypes."""
    import torch

    t.view(torch.uint8).fill_(0xFF)


TOLERANCES = {"float64": (1e-12, 1e-12), "float32": (1e-6, 1e-5), "float16": (1e-4, 2 / 1024), "bfloat16": (1e-3, 2 / 128)}


def tolerance_for(dtype) -> tuple[float, float]:
    """(atol, rtol) for values stored in dtype: about two units in the last place, relative."""
    return TOLERANCES[str(dtype).removeprefix("torch.")]


def check(passed: bool, max_abs_err: float | None = None, max_rel_err: float | None = None,
          tolerance: float | None = None, reference: str | None = None, detail: str | None = None) -> dict:
    """A record's check in the record format, non-finite errors left out: the one place the Python side spells it."""
    return {"passed": bool(passed), "max_abs_err": _finite(max_abs_err), "max_rel_err": _finite(max_rel_err),
            "tolerance": _finite(tolerance), "reference": reference, "detail": detail}


def compare(got, ref, atol: float, rtol: float, reference: str) -> dict:
    """Every element finite and |got - ref| <= atol + rtol*|ref| (ref in float64)."""
    import torch

    g = got.detach().to(torch.float64).flatten().cpu()
    r = ref.detach().to(torch.float64).flatten().cpu()
    err = (g - r).abs()
    ok = torch.isfinite(g) & (err <= atol + rtol * r.abs())
    bad = int((~ok).sum())
    finite = torch.isfinite(err)
    max_abs = float(err[finite].max()) if bool(finite.all()) and err.numel() else None
    max_rel = float((err / r.abs().clamp_min(atol)).max()) if max_abs is not None else None
    detail = f"{bad} of {g.numel()} outside atol={atol:.3g} rtol={rtol:.3g}" if bad else f"{g.numel()} elements within atol={atol:.3g} rtol={rtol:.3g}"
    return check(bad == 0 and g.numel() > 0, max_abs, max_rel, rtol, reference, detail)


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

def summarize(us: list[float]) -> Timing:
    """Median, quartiles (linear interpolation), min and rse = 1.2533*(IQR/1.349)/sqrt(n)/median."""
    s = sorted(us)
    n = len(s)

    def q(p: float) -> float:
        pos = p * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return s[lo] + (pos - lo) * (s[hi] - s[lo])

    med = q(0.5)
    sd = (q(0.75) - q(0.25)) / 1.349
    rse = 1.2533 * sd / math.sqrt(n) / med if med > 0 else 0.0
    return Timing(med, q(0.25), q(0.75), s[0], n, rse)


def sm_clock_mhz() -> float | None:
    """The current SM clock of the current CUDA device through NVML, or None when unavailable."""
    try:
        import pynvml
    except ImportError:
        return None
    import torch

    try:
        pynvml.nvmlInit()
        bus = torch.cuda.get_device_properties(torch.cuda.current_device()).pci_bus_id
        h = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        return float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except (pynvml.NVMLError, AttributeError):  # no driver library, or a torch without pci_bus_id
        return None


def bench(candidates: Mapping[str, Callable[[], object]], opts: Options | None = None) -> dict[str, Result]:
    """Warm up each candidate, then time them round-robin with an L2 flush before every sample."""
    import torch

    opts = opts or Options()
    stream = torch.cuda.current_stream()
    flush = None
    if opts.flush_l2:
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        flush = torch.ones(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")
    for fn in candidates.values():
        for _ in range(opts.warmup):
            fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples: dict[str, list[float]] = {k: [] for k in candidates}
    seconds = dict.fromkeys(candidates, 0.0)
    clocks = {k: Clocks() for k in candidates}
    done: set[str] = set()
    while len(done) < len(candidates):
        for name, fn in candidates.items():
            if name in done:
                continue
            if not samples[name]:
                clocks[name].sm_mhz_before = sm_clock_mhz()
            t0 = time.perf_counter()
            if flush is not None:
                flush.max()  # reads the buffer; a write flush would leave dirty lines for the timed launch
            start.record(stream)
            fn()
            stop.record(stream)
            stop.synchronize()
            samples[name].append(start.elapsed_time(stop) * 1e3)
            seconds[name] += time.perf_counter() - t0
            n = len(samples[name])
            stable = n >= opts.min_samples and summarize(samples[name]).rse <= opts.target_rse
            if stable or n >= opts.max_samples or (n >= 3 and seconds[name] >= opts.max_seconds):
                done.add(name)
                clocks[name].sm_mhz_after = sm_clock_mhz()
    return {k: Result(k, summarize(samples[k]), clocks[k]) for k in candidates}


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------

def _finite(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def record(variant: str, *, params: Mapping[str, object], check: dict, result: Result | None = None,
           bytes_: float | None = None, flops: float | None = None, extra: Mapping[str, object] | None = None) -> dict:
    """One record as a dict (`check` from check() or compare()); a failed check drops the timing; non-finite
    extras are left out."""
    timing = None
    if check["passed"] and result is not None:
        timing = {k: getattr(result.timing, k) for k in ("median_us", "q1_us", "q3_us", "min_us", "samples", "rse")}
    clocks = result.clocks if result is not None else Clocks()
    return {
        "kwiki_record": RECORD_VERSION,
        "variant": variant,
        "params": dict(params),
        "bytes": _finite(bytes_),
        "flops": _finite(flops),
        "timing": timing,
        "check": dict(check),
        "clocks": {"sm_mhz_before": clocks.sm_mhz_before, "sm_mhz_after": clocks.sm_mhz_after},
        "extra": {k: v for k, v in (extra or {}).items() if isinstance(v, (bool, str)) or _finite(v) is not None},
    }


def emit(rec: dict, out=None) -> None:
    """Print one record line; a failed check is counted for exit_code()."""
    global _failures
    if not rec["check"]["passed"]:
        _failures += 1
    print(json.dumps(rec, allow_nan=False, separators=(",", ":")), file=out or sys.stdout, flush=True)


def exit_code() -> int:
    """0 when every emitted record passed its check, 1 otherwise."""
    return 1 if _failures else 0
