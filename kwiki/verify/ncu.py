"""Nsight Compute itself: the metrics kwiki asks for, the `ncu` command line, and its CSV report read into a
record's figures (kwiki.verify.profile runs it and audits what it counted)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping

from kwiki.core.proc import find_tool

# ncu metric -> figure (sums over a record's kernels, except the rates: those of its longest kernel)
SUMS = {
    "dram__bytes_read.sum": "ncu_dram_read_bytes",
    "dram__bytes_write.sum": "ncu_dram_write_bytes",
    "lts__t_bytes.sum": "ncu_l2_bytes",
    "lts__t_sectors_srcunit_tex_op_write.sum": "ncu_l2_write_sectors",
    "smsp__inst_executed.sum": "ncu_inst_executed",
    "smsp__sass_inst_executed_op_global_ld.sum": "ncu_inst_global_ld",
    "smsp__sass_inst_executed_op_global_st.sum": "ncu_inst_global_st",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "ffma",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": "fadd",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": "fmul",
}
RATES = {
    "lts__t_sector_hit_rate.pct": "ncu_l2_hit_rate_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "ncu_occupancy_pct",
    # the profiler's cycle counters over the kernel's duration: the clock a library kernel (cuBLAS, cuDNN, Triton)
    # ran at, where kwiki_clock.cuh's in-kernel stamps cannot go (protocol 3); cycles per second, as MHz below
    "sm__cycles_elapsed.avg.per_second": "ncu_sm_mhz_effective",
}
TENSOR = r"regex:^sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active$"  # the name moves by arch
# the tensor path's math operations by source and destination type (bf16 -> fp32, tf32 -> fp32, fp8 ...): a FLOP
# count for tensor-core kernels as ffma/fadd/fmul are for FP32 ones; each type also has _sparsity_on/_off parts,
# left out of the sum (the plain counter holds both)
TENSOR_OPS = r"regex:^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$"
TENSOR_OPS_PREFIX = "sm__ops_path_tensor_src_"
# shared memory by instruction kind (ld, st, ldsm, stsm, ldgsts, ...; the kinds differ by arch, hence the regexes),
# as patched SASS counts them: the warp instructions, the wavefronts (passes) the shared-memory pipe served them in,
# and the wavefronts bank conflicts added, where it counts those (on sm_90 for ldsm, stsm and ldgsts, not for plain
# ld and st; the l1tex unit's own conflict counters, which have them, also count other arbitration: a conflict-free
# padded transpose read 1.06-1.12 "ways" on an H100, 2026-12-05)
SMEM = r"regex:^smsp__sass_l1tex_data_(pipe_lsu_wavefronts|bank_conflicts_pipe_lsu)_mem_shared_op_[a-z]+\.sum$"
SMEM_INST = r"regex:^smsp__sass_inst_executed_op_(shared_[a-z]+|ldsm|stsm)\.sum$"
SMEM_PREFIXES = {"smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_": "wavefronts",
                 "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_": "conflicts",
                 "smsp__sass_inst_executed_op_": "inst"}  # its kinds say shared_ld, shared_st: read as ld, st
SMEM_METRIC = re.compile("|".join(m.removeprefix("regex:") for m in (SMEM, SMEM_INST)))
# the bytes TMA loads land in shared memory: what the L1TEX unit of each SM takes in from the crossbar for global TMA
# loads, so a box multicast to C CTAs counts C times, as the "smem" level declares it (`ncu_tma_smem_bytes`; the
# L2 serves fewer bytes than that when CTAs load the same box at nearly the same time). On an H100 and an H200,
# 2026-12-06, it counted exactly the declared bytes of tma_sm90a's cluster variants, copy and multicast, clusters
# of 2 and 4 (on the H100 also those of its single-CTA streams). A regex, so a GPU without the counter gives no
# column instead of failing the profile.
TMA_SMEM_METRIC = "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum"
TMA_SMEM = r"regex:^l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld\.sum$"
# the counts asked for by a regex (their columns are named as SUMS' are), summed like SUMS
REGEX_SUMS = {TMA_SMEM_METRIC: "ncu_tma_smem_bytes"}
SECTOR_BYTES = 32  # an L2 sector
HELPERS = ["gpu__time_duration.sum", "launch__grid_size"]
METRICS = [*HELPERS, *SUMS, *RATES, TENSOR, TENSOR_OPS, SMEM, SMEM_INST, TMA_SMEM]


# ---------------------------------------------------------------- ncu itself


def find_ncu(environ: Mapping[str, str] | None = None) -> str | None:
    """ncu from $KWIKI_NCU, the PATH, or the usual install places; None when absent."""
    return find_tool("ncu", "KWIKI_NCU", ["/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu"], environ)


def ncu_argv(ncu: str, app: list[str], *, metrics: list[str], log_file: str, kernel_regex: str | None = None,
             launch_count: int | None = None, profile_from_start: bool = False,
             cache_control: str = "all", extra: list[str] | None = None) -> list[str]:
    """The ncu command line: `--clock-control none` always (whatever `extra` says: a locked base clock would
    measure another GPU than the timing runs did), CSV of the raw page in base units to `log_file`, then `app`."""
    out = [ncu, "--clock-control", "none", "--cache-control", cache_control]
    if not profile_from_start:
        out += ["--profile-from-start", "off"]
    if kernel_regex:
        out += ["--kernel-name-base", "demangled", "--kernel-name", f"regex:{kernel_regex}"]
    if launch_count is not None:
        out += ["--launch-count", str(launch_count)]
    rest = list(extra or [])
    while "--clock-control" in rest:  # the caller's clock control is dropped, value and all
        i = rest.index("--clock-control")
        del rest[i:i + 2]
    rest = [a for a in rest if not a.startswith("--clock-control=")]
    return [*out, *rest, "--metrics", ",".join(metrics), "--csv", "--page", "raw", "--print-units", "base",
            "--log-file", log_file, *app]


# ncu's scaled units (`--print-units auto`, its default): a decimal prefix on any unit (Kbyte, Mbyte, Gbyte/second,
# Minst, Kcycle), and the time units, whose base is the nanosecond
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}


def unit_scale(unit: str) -> float:
    """The factor that turns a value in ncu's `unit` into its base unit: 'Mbyte' -> 1e6, 'usecond' -> 1e3."""
    head = unit.strip().partition("/")[0]  # a rate's prefix is its numerator's: Gbyte/second -> byte/second
    if head in _TIME:
        return _TIME[head]
    return _PREFIX[head[0]] if len(head) > 1 and head[0] in _PREFIX and head[1].islower() else 1.0


def read_csv(report: str) -> list[dict[str, str]]:
    """The kernel rows of `ncu --csv --page raw`, by column name, each value in its metric's base unit: bytes, not
    Mbyte (kwiki asks for `--print-units base`; a report in scaled units is converted by its units row, the row
    whose ID cell is blank, which is then dropped). ==PROF== and application lines are dropped."""
    lines = [line for line in report.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return []
    header = rows[0]  # "ID", "Process ID", ..., "Kernel Name", ..., the metrics; then the units row (ID blank)
    units = next((r for r in rows[1:2] if len(r) == len(header) and not r[0].strip()), None)
    scale = {h: unit_scale(u) for h, u in zip(header, units, strict=True)} if units else {}
    out = []
    for r in rows[1:]:
        if len(r) != len(header) or not r[0].strip().isdigit():
            continue
        row = dict(zip(header, r, strict=True))
        for h, f in scale.items():
            v = number(row[h]) if f != 1.0 else None
            if v is not None:
                row[h] = repr(v * f)
        out.append(row)
    return out


def number(text: str | None) -> float | None:
    """ncu's '1,266,100,000' -> 1266100000.0; 'n/a' and blanks -> None."""
    if text is None:
        return None
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def figures(rows: list[dict[str, str]]) -> dict[str, float]:
    """One record's figures from its kernels' rows: counts summed, rates of its longest kernel."""
    out: dict[str, float] = {"ncu_kernels": float(len(rows))}
    if not rows:
        return out
    for metric, name in {**SUMS, **REGEX_SUMS}.items():
        vals = [number(r.get(metric)) for r in rows]
        if any(v is not None for v in vals):
            out[name] = sum(v or 0.0 for v in vals)
    ops = [number(v) for r in rows for k, v in r.items()
           if k.startswith(TENSOR_OPS_PREFIX) and k.endswith(".sum") and "_sparsity_" not in k]
    if any(v is not None for v in ops):
        out["ncu_tensor_ops"] = sum(v or 0.0 for v in ops)
    longest = max(rows, key=lambda r: number(r.get("gpu__time_duration.sum")) or 0.0)
    for metric, name in RATES.items():
        v = number(longest.get(metric))
        if v is not None:
            out[name] = v
    if "ncu_sm_mhz_effective" in out:
        out["ncu_sm_mhz_effective"] /= 1e6
    tensor = [v for k, v in longest.items() if k.startswith("sm__pipe_tensor") and number(v) is not None]
    if tensor:
        out["ncu_tensor_pipe_pct"] = max(number(v) or 0.0 for v in tensor)
    if "ncu_dram_read_bytes" in out or "ncu_dram_write_bytes" in out:
        out["ncu_dram_bytes"] = out.get("ncu_dram_read_bytes", 0.0) + out.get("ncu_dram_write_bytes", 0.0)
    if "ncu_l2_write_sectors" in out:
        out["ncu_l2_write_bytes"] = SECTOR_BYTES * out.pop("ncu_l2_write_sectors")
        if "ncu_dram_bytes" in out:
            owed = max(out.get("ncu_dram_write_bytes", 0.0), out["ncu_l2_write_bytes"])
            out["ncu_dram_owed_bytes"] = out.get("ncu_dram_read_bytes", 0.0) + owed
    out.update(smem_figures(rows))
    if "ffma" in out:
        out["ncu_fp32_flops"] = 2 * out["ffma"] + out.get("fadd", 0.0) + out.get("fmul", 0.0)
    for k in ("ffma", "fadd", "fmul"):
        out.pop(k, None)
    return out


def smem_figures(rows: list[dict[str, str]]) -> dict[str, float]:
    """Shared-memory counts by instruction kind, summed over the kernels' rows: `ncu_smem_<kind>_inst`,
    `ncu_smem_<kind>_wavefronts` and `ncu_smem_<kind>_conflicts` (ld, st, ldsm, ...), and two degrees:
    `ncu_smem_<kind>_ways`, the wavefronts served per wavefront the accesses needed (wavefronts over wavefronts less
    conflicts: 1.0 conflict-free, n for n-way conflicts, whatever the access width), where the conflicts are
    counted; `ncu_smem_<kind>_wavefronts_per_inst`, which for 4-byte accesses of full warps is the same degree (a
    conflict-free one is one wavefront) and for 16-byte ones four times it."""
    sums: dict[str, float] = {}
    for row in rows:
        for metric, text in row.items():
            if not SMEM_METRIC.match(metric):  # what SMEM and SMEM_INST ask for, not global_ld's count in SUMS
                continue
            for prefix, what in SMEM_PREFIXES.items():
                v = number(text) if metric.startswith(prefix) else None
                if v is not None:
                    name = f"ncu_smem_{metric[len(prefix):-len('.sum')].removeprefix('shared_')}_{what}"
                    sums[name] = sums.get(name, 0.0) + v
    out = dict(sums)
    for name, waves in sums.items():
        if not name.endswith("_wavefronts"):
            continue
        kind = name[len("ncu_smem_"):-len("_wavefronts")]
        conflicts, inst = sums.get(f"ncu_smem_{kind}_conflicts"), sums.get(f"ncu_smem_{kind}_inst")
        if conflicts is not None and waves > 0 and 0 <= conflicts < waves:
            out[f"ncu_smem_{kind}_ways"] = waves / (waves - conflicts)
        if inst:
            out[f"ncu_smem_{kind}_wavefronts_per_inst"] = waves / inst
    return out
