"""The parent's side of a Python artifact's harness: what its module cannot change (protocol 3, issue 40).

The harness (artifacts/common/kwiki_harness.py) runs the artifact's module in its own process, so anything
that process decides, the module can reach: a re-check plan in a caller's frame, a comparison or a clock to
patch, a memoised reference to copy, a record to rewrite on stdout. Here, in kwiki's process (no CUDA
context, no module imported), the Referee serves the harness's Unix socket and
 - chooses the base seed, each timed sample's input set (or fresh seed), and, only after a sample reported
   "done", whether it is judged (kwiki.results.recheck's p(i)) and at which positions it ships elements;
 - brackets every sample with its own clock, from "go" to "done", and calibrates that clock on the
   harness's trivial windows (one torch op, eight torch ops);
 - has the shipped elements judged by `kwiki_harness.py judge`, a process that makes the inputs again from
   their seeds and computes the reference, but never calls a variant (run after the harness has ended, so
   one process at a time holds a context on the GPU);
 - writes the records: the harness's, with the timing recomputed from the times it reported for the samples
   bracketed here, `rechecked` counted here, and the check failed when a judged sample disagreed, a sample
   that was to be judged was not, or this clock saw samples longer than reported by more than
   2 x fixed + 2 x per_launch x kernels + PARENT_FLOOR_US + PARENT_SHARE x time (medians over the samples).
Lines the harness process prints on stdout are kept in the log, never read as records.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwiki.results import recheck

CHANNEL_ENV = "KWIKI_HARNESS_CHANNEL"  # kwiki_harness.CHANNEL_ENV
TRIVIAL = ""  # the variant name of the harness's calibration windows
# the socket's and Python's jitter around a sample: on the H200 (2026-12-02) honest torch.compile and Triton variants
# of the softmax and SwiGLU artifacts came out 550-1100 us above what they reported at a calibrated 2 x fixed cost of
# 126-258 us, so the allowance is 4 x the calibration, 1 ms and half the reported time (a host target shares its
# cores with the work it times: the CPU tests run on 2 loaded cores)
PARENT_FLOOR_US = {"cuda": 1000.0, "cpu": 4000.0}  # cpu: the CPU tests, on 2 cores shared with a parallel suite
PARENT_FACTOR = 4.0
PARENT_SHARE = 0.5
PARENT_FIXED_LIMIT_US = 5000.0  # a bracket of one torch op slower than this: the clock cannot bound the samples
PER_LAUNCH_LIMIT_US = 50.0
TAIL_MIN, TAIL_SECONDS = 1024, 0.1  # kwiki_harness.TAIL_MIN, TAIL_SECONDS (kwiki_runner.cuh's kTailMin, kTailSeconds)

Key = tuple[str, str]  # (params as JSON, variant)


@dataclass
class CaseLog:
    """What the parent saw of one (params, variant)."""

    seeds: dict[Any, int] = field(default_factory=dict)  # sample -> the seed of the inputs it read
    started: dict[Any, int] = field(default_factory=dict)  # sample -> ns at "go"
    brackets: dict[Any, float] = field(default_factory=dict)  # sample -> us from "go" to "done"
    times: dict[Any, float] = field(default_factory=dict)  # sample -> us the harness reported
    positions: dict[Any, int] = field(default_factory=dict)  # judged sample -> the positions' seed
    shipped: dict[Any, dict[str, Any]] = field(default_factory=dict)  # judged sample -> its "checked" message
    verdicts: dict[Any, tuple[bool, str]] = field(default_factory=dict)  # judged sample -> the judge's verdict


def tail_calls(want: int, median_us: float) -> int:
    """kwiki_harness.tail_calls: the tail check's back-to-back calls, at most TAIL_SECONDS of the case's median."""
    return max(1, min(want, int(TAIL_SECONDS * 1e6 / max(median_us, 0.1))))


def _named(k: Any) -> str:
    if k == "check":
        return "the checked call"
    if k == "tail":
        return "the call after the tail's back-to-back calls"
    if isinstance(k, str):
        return f"the last call of sustained block {k[1:]}"
    return f"timed sample {k}"


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _quantile(s: list[float], p: float) -> float:
    pos = p * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def timing_of(us: list[float]) -> dict[str, Any]:
    """kwiki_bench.summarize's timing (median, quartiles, min, rse), recomputed from the reported times."""
    s = sorted(us)
    med = _quantile(s, 0.5)
    sd = (_quantile(s, 0.75) - _quantile(s, 0.25)) / 1.349
    rse = 1.2533 * sd / math.sqrt(len(s)) / med if med > 0 else 0.0
    return {"median_us": med, "q1_us": _quantile(s, 0.25), "q3_us": _quantile(s, 0.75), "min_us": s[0],
            "samples": len(s), "rse": rse}


class Referee:
    """Serves one harness process's socket on a thread of its own; read its state once the process ended."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="kwiki-h")
        self.path = os.path.join(self.dir, "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.settimeout(0.2)
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.seed = self.rng.getrandbits(31)
        self.max_samples = recheck.MIN_SAMPLES
        self.fresh = False
        self.device = "cuda"
        self.sets = 1
        self.params = "{}"
        self.cases: dict[Key, CaseLog] = {}
        self.records: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.connected = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def case(self, variant: str) -> CaseLog:
        return self.cases.setdefault((self.params, variant), CaseLog())

    # -- the socket
    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            break
        else:
            return
        self.connected = True
        self.listener.close()  # one harness: nothing else connects
        with conn, conn.makefile("rwb") as f:
            conn.settimeout(None)
            for line in f:
                try:
                    msg = json.loads(line)
                    reply = self.handle(msg)
                except (ValueError, KeyError, TypeError) as exc:
                    self.problems.append(f"the harness sent a message kwiki cannot read: {exc}")
                    return
                if reply is not None:
                    f.write(json.dumps(reply).encode() + b"\n")
                    f.flush()

    def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        now = time.monotonic_ns()
        op = msg["op"]
        if op == "hello":
            self.max_samples, self.fresh = int(msg["max_samples"]), bool(msg["fresh"])
            self.device = "cpu" if msg.get("device") == "cpu" else "cuda"
            return {"seed": self.seed}
        if op == "params":
            self.params = json.dumps(msg["params"], sort_keys=True)
            return None
        if op == "sets":
            self.sets = max(1, int(msg["n"]))
            return None
        if op == "record":
            self.records.append(msg["record"])
            return None
        if op == "end":
            return None
        return self.sample_op(op, msg, now)

    def sample_op(self, op: str, msg: dict[str, Any], now: int) -> dict[str, Any] | None:
        """The messages about one call of a variant (k: a timed sample's index; "check", "tail", "s<round>")."""
        log, k = self.case(str(msg["v"])), msg["k"]
        if op == "prep":
            if self.fresh:
                log.seeds[k] = self.rng.getrandbits(31)
                return {"seed": log.seeds[k]}
            i = self.rng.randrange(self.sets)
            log.seeds[k] = self.seed + i
            return {"set": i}
        if op == "go":  # the sample's call starts now
            log.started[k] = now
            return None
        if op == "done":
            if k in log.started:
                log.brackets[k] = (now - log.started.pop(k)) / 1e3
            judged = msg["v"] != TRIVIAL and (isinstance(k, str) or self.rng.random() < recheck.probability(
                int(k), self.max_samples))  # a string: the checked call, the tail, a sustained block: always
            if not judged:
                return {"positions": None}
            log.positions[k] = self.rng.getrandbits(31)
            if k == "check":
                log.seeds[k] = self.seed
            return {"positions": log.positions[k]}
        if op == "tail":
            return {"n": tail_calls(self.rng.randrange(TAIL_MIN, 2 * TAIL_MIN), float(msg["median_us"]))}
        if op == "block":
            return {"extra": self.rng.randrange(int(msg["base"]) // 2 + 1)}
        if op == "checked":
            log.shipped[k] = msg
            return None
        if op == "time":
            log.times[k] = float(msg["us"])
            return None
        raise ValueError(f"unknown op {op!r}")

    # -- the judge
    def requests(self) -> list[dict[str, Any]]:
        """One line per judged sample whose elements the harness shipped and itself found right."""
        out: list[dict[str, Any]] = []
        for (params, variant), log in sorted(self.cases.items()):
            for k, msg in log.shipped.items():
                if not msg.get("ok") or k not in log.positions or k not in log.seeds:
                    continue
                out.append({"id": f"{len(out)}", "variant": variant, "k": k, "params": json.loads(params),
                            "seed": log.seeds[k], "positions": log.positions[k], "out": msg["out"],
                            "in": msg["in"]})
        out.sort(key=lambda r: (json.dumps(r["params"], sort_keys=True), r["seed"]))
        return out

    def take_verdicts(self, requests: list[dict[str, Any]], lines: str) -> None:
        said: dict[str, tuple[bool, str]] = {}
        for line in lines.splitlines():
            try:
                v = json.loads(line)
                said[str(v["id"])] = (bool(v["ok"]), str(v.get("detail", "")))
            except (ValueError, KeyError, TypeError):
                continue
        for r in requests:
            log = self.cases[(json.dumps(r["params"], sort_keys=True), r["variant"])]
            log.verdicts[r["k"]] = said.get(r["id"], (False, "the judge gave no verdict"))

    # -- the records
    def calibration(self) -> tuple[float | None, float]:
        """(the median excess of this clock over the harness's report for one torch op, per further op)."""
        one: list[float] = []
        eight: list[float] = []
        for (_, variant), log in self.cases.items():
            if variant != TRIVIAL:
                continue
            for k, b in log.brackets.items():
                if k in log.times:
                    (one if int(k) % 2 == 0 else eight).append(b - log.times[k])
        if not one:
            return None, 0.0
        fixed = max(0.0, _median(one))
        per = min(PER_LAUNCH_LIMIT_US, max(0.0, (_median(eight) - fixed) / 7)) if eight else 0.0
        return fixed, per

    def record(self, rec: dict[str, Any], fixed: float | None, per_launch: float) -> dict[str, Any]:
        """The harness's record as kwiki writes it."""
        key = (json.dumps(rec.get("params", {}), sort_keys=True), str(rec.get("variant")))
        log = self.cases.get(key, CaseLog())
        given = rec.get("check")
        check: dict[str, Any] = given if isinstance(given, dict) else {"passed": False}
        why = self.why_failed(log, rec, fixed, per_launch) if check.get("passed") is True else None
        extra = rec.setdefault("extra", {}) if isinstance(rec.get("extra"), dict) else {}
        timed = [k for k in log.times if isinstance(k, int)]
        if why is None and check.get("passed") is True and rec.get("timing") is not None and timed:
            rec["timing"] = timing_of([log.times[k] for k in sorted(timed)])
            rec["rechecked"] = sum(1 for k in log.verdicts if k != "check")
            extra["parent_median_us"] = _median([log.brackets[k] for k in timed if k in log.brackets])
            if fixed is not None:
                extra["parent_fixed_us"] = fixed
        if why is not None:
            rec["check"] = {**check, "passed": False, "detail": why}
            for k in ("timing", "timer", "sustained", "rechecked", "timing_source", "kernels"):
                rec[k] = None
        return rec

    def why_failed(self, log: CaseLog, rec: dict[str, Any], fixed: float | None, per_launch: float) -> str | None:
        for k, (ok, detail) in sorted(log.verdicts.items(), key=lambda x: (x[0] != "check", str(x[0]).zfill(9))):
            if not ok:
                return f"{_named(k)}: kwiki's judge: {detail}"
        for k in log.positions:
            shipped = log.shipped.get(k)
            if shipped is None:
                return f"{_named(k)} was to be judged and the harness shipped nothing"
            if not shipped.get("ok"):
                return f"{_named(k)}: {shipped.get('detail')}"
        if rec.get("timing") is None:
            return None
        timed = [k for k in log.times if isinstance(k, int) and k in log.brackets]
        if not timed:
            return "no timed sample was bracketed by kwiki's clock"
        if fixed is None or fixed > PARENT_FIXED_LIMIT_US:
            return (f"kwiki's clock cannot bound the samples: one torch op took {fixed:.0f} us beyond what the harness "
                    f"reported (at most {PARENT_FIXED_LIMIT_US:g})" if fixed is not None else
                    "the harness ran no calibration windows for kwiki's clock")
        seen, said = _median([log.brackets[k] for k in timed]), _median([log.times[k] for k in timed])
        excess = _median([log.brackets[k] - log.times[k] for k in timed])
        given = rec.get("timer")
        timer: dict[str, Any] = given if isinstance(given, dict) else {}
        kernels = float(timer.get("kernels") or 1.0)
        floor = PARENT_FLOOR_US[self.device]
        allowance = PARENT_FACTOR * (fixed + per_launch * kernels) + floor + PARENT_SHARE * said
        if excess > allowance:
            return (f"kwiki's clock saw {seen:.1f} us a sample (median from go to done), the harness reported "
                    f"{said:.1f} us: {excess:.1f} us more (median), above the allowance of {allowance:.1f} us "
                    f"({PARENT_FACTOR:g} x ({fixed:.1f} fixed + {per_launch:.1f} x {kernels:g} kernels) + {floor:g} + "
                    f"{PARENT_SHARE:g} x time)")
        return None

    def composed(self) -> str:
        """The records, one JSON line each, as kwiki reads them."""
        fixed, per = self.calibration()
        return "".join(json.dumps(self.record(r, fixed, per), allow_nan=False, separators=(",", ":")) + "\n"
                       for r in self.records)


def judge(referee: Referee, run: Callable[[Path], tuple[str, str]], work: Path) -> str:
    """Have the judged samples judged: `run(requests file)` runs the judge and returns (its stdout, a note);
    returns the note ('' when nothing was to be judged)."""
    reqs = referee.requests()
    if not reqs or not referee.records:  # no record to judge (the harness ended early: it runs again)
        return ""
    path = work / "judge-requests.jsonl"
    path.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in reqs), encoding="utf-8")
    stdout, note = run(path)
    referee.take_verdicts(reqs, stdout)
    path.unlink(missing_ok=True)
    return note
