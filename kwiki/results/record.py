"""The result record: one JSON object per measured configuration, printed by an artifact run.

Artifacts print records (and nothing else) on stdout, one per line; logs go to stderr.
A record whose check failed carries no timing, and its run exits non-zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from kwiki.core.errors import RecordError
from kwiki.core.strict import Scalar, Strict

RECORD_VERSION = 1

# The measurement protocol: how a record's figures come about (what is timed, how the L2 is flushed,
# how samples are drawn, poisoned and re-checked, which clock readings go with them). It is part of
# every series key (kwiki.verify.series), so runs taken under two protocols never make one series.
# Bump it when the measurement itself changes, in the same change that lands the new protocol;
# never for a refactor, a new artifact, variant or shape (the artifact's own hash and the record's
# params keep those apart), nor for a change of one artifact's sources (its hash already moves).
# 2: the shared runner (per-sample poison and re-checks, CUPTI busy time, NVML windows). 3: re-checks over the whole
# window, what the timer saw (`unseen`), one process on the GPU, fresh inputs, sustained blocks, the effective clock.
PROTOCOL_VERSION = 3


class Timing(Strict):
    median_us: float = Field(gt=0)
    q1_us: float = Field(gt=0)
    q3_us: float = Field(gt=0)
    min_us: float = Field(gt=0)
    samples: int = Field(ge=1)
    rse: float | None = Field(default=None, ge=0, description="relative standard error of the median")

    @model_validator(mode="after")
    def _ordered(self) -> Timing:
        if not (self.min_us <= self.q1_us <= self.median_us <= self.q3_us):
            raise ValueError("timing must satisfy min <= q1 <= median <= q3")
        return self

    @property
    def spread(self) -> float:
        """Relative half inter-quartile range: the run's own noise."""
        return (self.q3_us - self.q1_us) / (2 * self.median_us)


class Check(Strict):
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: float | None = None
    reference: str | None = None
    detail: str | None = None


class Clocks(Strict):
    """The SM clock and NVML's power figures over a record's sampling window (protocol 2; all optional).

    Protocol 1 read the clock only before the first and after the last sample (sm_mhz_before/after).
    Protocol 2 reads NVML while each sample's launch runs: the SM clock; the clock-event reasons, so that a
    sample's window counts towards power_cap_s, thermal_s or hw_slowdown_s when its reason is set (NVML's
    violation counters where there are no reasons); and the board power, energy_j being power x window.
    window_s is the samples' windows summed: the denominator of the three times."""

    sm_mhz_before: float | None = Field(default=None, gt=0, description="SM clock at the first sample, MHz")
    sm_mhz_after: float | None = Field(default=None, gt=0, description="SM clock at the last sample, MHz")
    sm_mhz_min: float | None = Field(default=None, gt=0, description="lowest SM clock over the samples, MHz")
    sm_mhz_median: float | None = Field(default=None, gt=0, description="median SM clock over the samples, MHz")
    sm_mhz_max: float | None = Field(default=None, gt=0, description="highest SM clock over the samples, MHz")
    power_cap_s: float | None = Field(default=None, ge=0, description="time the clocks were held down by the power cap")
    thermal_s: float | None = Field(default=None, ge=0, description="time held down by thermal slowdown")
    hw_slowdown_s: float | None = Field(default=None, ge=0, description="time under hardware slowdown (HW, HW thermal, "
                                                                       "power brake)")
    energy_j: float | None = Field(default=None, ge=0, description="NVML's board power times the samples' windows, J")
    window_s: float | None = Field(default=None, ge=0, description="the samples' windows the counters cover, summed")
    sm_mhz_effective: float | None = Field(
        default=None, gt=0, description="the clock the SMs ran the kernel at (protocol 3): cycles counted by the "
                                        "kernel (clock64) over %globaltimer, or the profiler's cycle counters")
    sm_mhz_effective_by: Literal["clock64", "profiler"] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Clocks:
        lo, mid, hi = self.sm_mhz_min, self.sm_mhz_median, self.sm_mhz_max
        if lo is not None and mid is not None and hi is not None and not lo <= mid <= hi:
            raise ValueError("clocks must satisfy sm_mhz_min <= sm_mhz_median <= sm_mhz_max")
        return self

    @property
    def sm_mhz(self) -> float | None:
        """The record's SM clock: the median over its samples, else the last reading."""
        return self.sm_mhz_median if self.sm_mhz_median is not None else self.sm_mhz_after


class Timer(Strict):
    """What the timer saw beside the busy time (protocol 3): the bracket the launch stream's CUDA events (or the
    Python harness's) put around each sample, the span of its GPU work, how many kernels ran, and this process's
    own cost of a bracket: the `unseen` gate (kwiki.verify.gates) holds the bracket to the busy time plus them."""

    event_median_us: float = Field(ge=0, description="median bracket time: event pair around the launch (host "
                                                     "enqueue included)")
    span_median_us: float | None = Field(default=None, ge=0, description="median first start to last end of the "
                                                                         "sample's GPU work")
    kernels: float = Field(ge=0, description="median number of kernels per sample (copies and fills not counted)")
    fixed_us: float = Field(ge=0, description="this process's bracket minus busy time for one trivial launch "
                                              "(median of 21)")
    per_launch_us: float = Field(ge=0, description="this process's extra bracket time per further kernel")
    contexts: Literal["listed", "own-not-listed", "unavailable"] | None = Field(
        default=None, description="whether NVML could list the processes holding a context on the GPU during "
                                  "timing (listed: only the artifact's own was there)")


class Sustained(Strict):
    """The sustained figure (protocol 3): blocks of back-to-back launches of the compared cases in alternation
    after the clock and power settled; median_us is one launch's share of a block's busy time."""

    median_us: float = Field(gt=0)
    q1_us: float = Field(gt=0)
    q3_us: float = Field(gt=0)
    min_us: float = Field(gt=0)
    samples: int = Field(ge=1, description="blocks (one per round)")
    launches: int = Field(ge=1, description="launches per block (median)")
    duty: float = Field(ge=0, le=1.05, description="busy time over wall time across the blocks")
    sm_mhz: float | None = Field(default=None, gt=0, description="NVML's SM clock during the blocks (median)")
    power_w: float | None = Field(default=None, ge=0, description="NVML's board power during the blocks (median)")
    settle_s: float = Field(ge=0, description="back-to-back time before the first block")
    settled: bool = Field(description="whether clock and power settled within the settle limit")

    @model_validator(mode="after")
    def _ordered(self) -> Sustained:
        if not (self.min_us <= self.q1_us <= self.median_us <= self.q3_us):
            raise ValueError("sustained must satisfy min <= q1 <= median <= q3")
        return self


class Roof(Strict):
    """A measured read roof (artifacts/common/kwiki_ceiling.cuh): time = t0 + bytes / BW fitted over a size
    sweep of read kernels in the same run. A record of an artifact's `ceiling` variant carries it in its
    extras (roof_*); the speed of light for that record's bytes is bytes / BW, t0 is reported, never added."""

    gb_per_s: float = Field(gt=0, description="BW: the fitted read bandwidth")
    t0_us: float = Field(description="the fitted fixed cost of a launch (not part of the roof)")
    r2: float = Field(le=1, description="weighted coefficient of determination of the fit")
    max_residual: float = Field(ge=0, description="largest |time - fit| / time over the points")
    bw_rse: float = Field(ge=0, description="relative standard error of BW")
    points: list[tuple[float, float, str]] = Field(
        min_length=3, description="(bytes, median us, fastest kernel) per size of the sweep")
    kernels: list[str] = Field(default_factory=list, description="the read kernels each size was timed with")


ROOF_KEYS = ("roof_gb_per_s", "roof_t0_us", "roof_r2", "roof_max_residual", "roof_bw_rse", "roof_points")


def _points(text: object) -> list[tuple[float, float, str]]:
    """'bytes:us:kernel;...' -> [(bytes, us, kernel), ...]"""
    if not isinstance(text, str):
        raise ValueError("extra.roof_points must be a string 'bytes:us:kernel;...'")
    out = []
    for part in text.split(";"):
        fields = part.split(":")
        if len(fields) != 3:
            raise ValueError(f"extra.roof_points: {part!r} is not 'bytes:us:kernel'")
        try:
            out.append((float(fields[0]), float(fields[1]), fields[2]))
        except ValueError:
            raise ValueError(f"extra.roof_points: {part!r} holds a value that is not a number") from None
    return out


class Record(Strict):
    kwiki_record: int = Field(description=f"record format version; this kwiki reads {RECORD_VERSION}")
    variant: str
    params: dict[str, Scalar] = Field(default_factory=dict)
    bytes: float | None = Field(default=None, ge=0, description="bytes moved by one launch (declared)")
    bytes_level: Literal["dram", "l2", "smem"] = Field(
        default="dram", description="where `bytes` are moved: DRAM, L2 or shared memory; the physical gate "
                                    "holds them to that level's peak")
    flops: float | None = Field(default=None, ge=0, description="floating-point operations of one launch")
    flops_dtype: str | None = Field(
        default=None, description="the dtype `flops` run in (bf16, fp16, tf32, fp8, fp32, ...); when absent the "
                                  "physical gate takes params.dtype, else the architecture's highest rate")
    timing: Timing | None = None
    timing_source: Literal["cupti", "events", "wall"] | None = Field(
        default=None, description="what timed the samples: CUPTI's GPU timestamps of all work on every stream, "
                                  "a CUDA event pair on the launch stream (the fallback), or a host clock around "
                                  "the call (host-target Python artifacts)")
    protocol: int | None = Field(default=None, ge=1, description="the measurement protocol of the artifact's run "
                                                                 "(PROTOCOL_VERSION of kwiki_bench.cuh)")
    rechecked: int | None = Field(default=None, ge=0, description="timed samples compared with the reference")
    check: Check
    clocks: Clocks = Field(default_factory=Clocks)
    extra: dict[str, Scalar] = Field(default_factory=dict)
    timer: Timer | None = None
    sustained: Sustained | None = None
    kernels: list[str] | None = Field(
        default=None, description="the kernels CUPTI saw run inside the timed samples (demangled C++ names; an "
                                  "extern \"C\" name as is); absent: not seen (timed without CUPTI, or not timed). "
                                  "The identity gate holds them to the manifest's `kernels` globs")

    @model_validator(mode="after")
    def _versioned(self) -> Record:
        if self.kwiki_record != RECORD_VERSION:
            raise ValueError(f"record version {self.kwiki_record}, this kwiki reads {RECORD_VERSION}")
        if not self.check.passed and self.timing is not None:
            raise ValueError("a record whose check failed must carry no timing")
        have = [k for k in ROOF_KEYS if k in self.extra]
        if have and len(have) < len(ROOF_KEYS):
            raise ValueError(f"a roof needs every one of {', '.join(ROOF_KEYS)}; missing "
                             f"{', '.join(k for k in ROOF_KEYS if k not in self.extra)}")
        if (self.timer is not None or self.sustained is not None) and self.timing is None:
            raise ValueError("timer and sustained go with a timing")
        if have and self.timing is not None:
            raise ValueError("a roof record carries no timing of its own (its time is bytes / BW)")
        if have:
            try:
                self.roof  # noqa: B018 - validated here, so a bad roof is an error of the record's line
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                raise ValueError(f"roof.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
        return self

    @property
    def roof(self) -> Roof | None:
        """The read roof a ceiling record carries in its extras, else None."""
        if "roof_gb_per_s" not in self.extra:
            return None
        e = self.extra
        kernels = e.get("roof_kernels")
        return Roof.model_validate({
            "gb_per_s": e["roof_gb_per_s"], "t0_us": e["roof_t0_us"], "r2": e["roof_r2"],
            "max_residual": e["roof_max_residual"], "bw_rse": e["roof_bw_rse"], "points": _points(e["roof_points"]),
            "kernels": kernels.split(",") if isinstance(kernels, str) and kernels else []})

    def figures(self) -> dict[str, float]:
        """Every figure a claim can select: timing, derived bandwidth and throughput, extras, a passed check's errors
        (max_abs_err, max_rel_err), what the timer saw (span_us, event_us, kernels), the effective clock, and the
        sustained regime's figures prefixed `sustained_` (kwiki.wiki.model.Selector.key). A roof record (no timing
        of its own) has the roof's: time_us = bytes / BW, gb_per_s = BW."""
        out = {k: float(v) for k, v in self.extra.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        # the check's errors against the reference (a Python artifact's: relative to max(|ref|, atol)), for claims
        # on accuracy (an fp8 accumulator's promotion interval); an extra of the same name is the artifact's own
        for name in ("max_abs_err", "max_rel_err"):
            err = getattr(self.check, name)
            if err is not None and self.check.passed:
                out.setdefault(name, float(err))
        if self.timer is not None:
            out["event_us"] = self.timer.event_median_us
            out["kernels"] = self.timer.kernels
            if self.timer.span_median_us is not None:
                out["span_us"] = self.timer.span_median_us
        mhz = self.clocks.sm_mhz_effective
        if mhz is not None:
            out["sm_mhz_effective"] = mhz
            sms = self.extra.get("sms")
            if self.flops and self.timing is not None and isinstance(sms, int) and sms > 0:
                # FLOPs per SM per cycle at the clock the kernel counted: the tensor cores' per-clock rate
                out["flop_per_clk_per_sm"] = self.flops / (self.timing.median_us * mhz * sms)
        if self.sustained is not None:
            sus = self.sustained
            out.update({f"sustained_{k}": v for k, v in self._rates(sus.median_us).items()})
            out["sustained_duty"] = sus.duty
            if sus.sm_mhz is not None:
                out["sustained_sm_mhz"] = sus.sm_mhz
        roof = self.roof if self.timing is None else None
        if self.timing is not None:
            t = self.timing.median_us
        elif roof is not None and self.bytes:
            t = self.bytes / roof.gb_per_s / 1e3
        else:
            return out
        out.update(self._rates(t))
        if self.clocks.sm_mhz is not None:
            out["sm_mhz"] = self.clocks.sm_mhz
        return out

    def _rates(self, t: float) -> dict[str, float]:
        """time_us and what follows from it with the record's bytes and FLOPs."""
        out = {"time_us": t, "time_ms": t / 1e3}
        if self.bytes:
            out["gb_per_s"] = self.bytes / t / 1e3
            out["tb_per_s"] = self.bytes / t / 1e6
        if self.flops:
            out["tflop_per_s"] = self.flops / t / 1e6
            out["gflop_per_s"] = self.flops / t / 1e3
        return out


def parse_records(stdout: str, artifact: str, flops_dtypes: Mapping[str, str] | None = None) -> list[Record]:
    """Validate every stdout line as a record; RecordError names the first bad line. `flops_dtypes`: variant ->
    the dtype its manifest says its FLOPs run in (Manifest.flops_dtypes), in place of the one its run wrote."""
    records = []
    for lineno, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise RecordError(f"stdout line {lineno} is not JSON: {str(exc)[:120]}", path=artifact,
                              line=lineno) from None
        try:
            record = Record.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"]) or "record"
            raise RecordError(f"stdout line {lineno}: {where}: {err['msg']}", path=artifact, line=lineno) from None
        if flops_dtypes and record.variant in flops_dtypes:
            record.flops_dtype = flops_dtypes[record.variant]
        records.append(record)
    return records


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a record may hold")
