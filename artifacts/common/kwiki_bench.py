"""kwiki_bench.py: the record side of kwiki_bench.cuh in Python, for the harness and Python drivers.

The same record format as the C++ header (see its top comment): `parse_args` reads the bench options of the
C++ header (--variants, --target-rse, --min-samples, --max-samples, --max-seconds, --warmup, --no-flush, --seed,
any other --name=value); `summarize` is the header's median, quartiles and rse; `check` and `record` spell a
record's check and the record; `emit` prints one JSON line on stdout and counts failed checks for `exit_code`.
The checking and timing of Python artifacts live in kwiki_harness.py. Imports no torch.

Typical use (a driver that measures something itself):
    args = parse_args(sys.argv[1:])
    emit(record("l2_profile", params={...}, check=check(True, reference="..."), extra={...}))
    sys.exit(exit_code())
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

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
    rest: dict[str, str] = {}
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

def check(passed: bool, max_abs_err: float | None = None, max_rel_err: float | None = None,
          tolerance: float | None = None, reference: str | None = None, detail: str | None = None) -> dict[str, object]:
    """A record's check in the record format, non-finite errors left out: the one place the Python side spells it."""
    return {"passed": bool(passed), "max_abs_err": finite(max_abs_err), "max_rel_err": finite(max_rel_err),
            "tolerance": finite(tolerance), "reference": reference, "detail": detail}


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


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------

def finite(v: object) -> float | None:
    """v when it is a finite number (not a bool), else None: records hold finite numbers only."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def record(variant: str, *, params: Mapping[str, object], check: Mapping[str, object], result: Result | None = None,
           bytes_: float | None = None, flops: float | None = None,
           extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """One record as a dict (`check` from check() or compare()); a failed check drops the timing; non-finite
    extras are left out."""
    timing = None
    if check["passed"] is True and result is not None:
        timing = {k: getattr(result.timing, k) for k in ("median_us", "q1_us", "q3_us", "min_us", "samples", "rse")}
    clocks = result.clocks if result is not None else Clocks()
    return {
        "kwiki_record": RECORD_VERSION,
        "variant": variant,
        "params": dict(params),
        "bytes": finite(bytes_),
        "flops": finite(flops),
        "timing": timing,
        "check": dict(check),
        "clocks": {"sm_mhz_before": clocks.sm_mhz_before, "sm_mhz_after": clocks.sm_mhz_after},
        "extra": {k: v for k, v in (extra or {}).items() if isinstance(v, (bool, str)) or finite(v) is not None},
    }


def emit(rec: Mapping[str, object], out: TextIO | None = None) -> None:
    """Write one record line (stdout by default); a failed check is counted for exit_code()."""
    global _failures
    check_ = rec["check"]
    if not (isinstance(check_, Mapping) and check_.get("passed") is True):
        _failures += 1
    stream = out or sys.stdout
    stream.write(json.dumps(rec, allow_nan=False, separators=(",", ":")) + "\n")
    stream.flush()


def exit_code() -> int:
    """0 when every emitted record passed its check, 1 otherwise."""
    return 1 if _failures else 0
