"""l2_profile.py: what the tile order of the persistent GEMM does to the L2, read by Nsight Compute.

    python3 l2_profile.py BINARY [--shapes=8192x8192x8192,...] --variants a,b,c

BINARY is the binary of artifacts/gemm_bf16_sm90a (the manifest says build.binary_of), built once by kwiki. For each variant
and shape it runs the binary once under `ncu`, which profiles the first launch of the GEMM kernel
(`gemm_ws`): the binary's correctness check launches it first, on fresh random inputs, and prints its
own record (check result and a timing under the profiler, which this driver drops: time comes from
the gemm_bf16_sm90a artifact, not from a profiled run). ncu flushes every cache before each replay
pass (`--cache-control all`), so the kernel starts from a cold L2, as in the timing protocol, and it
leaves the clocks alone (`--clock-control none`).

One record per variant and shape, with the binary's check and these extras:
  l2_hit_rate_pct       lts__t_sector_hit_rate.pct: L2 sector lookups that hit, all operations
  l2_read_hit_rate_pct  lts__t_sector_op_read_hit_rate.pct: the same for reads (TMA loads of A and B)
  dram_read_mb          dram__bytes_read.sum / 1e6: what came from HBM
  l2_read_mb            lts__t_sectors_op_read.sum * 32 / 1e6: read sectors looked up in the L2 slices,
                        from every source unit (the SMs' TMA loads, and lookups the L2 fabric forwards
                        between the two L2 partitions). It is not what the SMs asked the L2 for: that
                        demand, (M/128) (N/256) K (128 + 256) * 2 bytes for these 128x256 tiles, is the
                        same for every tile order, while this figure moves with the order and has come
                        out both above and below it. Compare it between orders of one shape only.
  compulsory_mb         (M*K + N*K) * 2 / 1e6: A and B read once, the least any order can read
  group                 the tile order's band height in tile-rows (1 = row-major, -1 = Hilbert curve)
A run whose check fails, or that ncu cannot profile, gives a record without figures and exit 1;
no ncu on this machine is exit 2 (an environment problem).

Finding ncu, its command line (`--clock-control none` always) and reading its CSV (in base units) are those of
`kwiki verify --profile` (kwiki/verify/profile.py: find_ncu, ncu_argv, read_csv), run by the same Python.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "common"))
import kwiki_bench as kb  # noqa: E402

from kwiki.verify.profile import find_ncu, ncu_argv, number, read_csv  # noqa: E402

# variant -> the tile order's band height in tile-rows (1: row-major), -1 for the Hilbert curve
VARIANTS = {"ws_persistent_linear": 1, "ws_persistent_group8": 8, "ws_persistent": 16, "ws_persistent_hilbert": -1}
KERNEL = "gemm_ws"  # a regular expression over demangled names
METRICS = {
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "lts__t_sector_op_read_hit_rate.pct": "l2_read_hit_rate_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "lts__t_sectors_op_read.sum": "l2_read_sectors",
}
# the binary under the profiler: its check, then as little timing as its options allow
QUIET_TIMING = ["--warmup=0", "--min-samples=1", "--max-samples=2", "--max-seconds=0.01"]


def ncu_or_exit() -> str:
    """ncu (kwiki's find_ncu: $KWIKI_NCU, the PATH, the usual install places); exit 2 naming them when absent."""
    ncu = find_ncu()
    if ncu is None:
        print("l2_profile: Nsight Compute (ncu) not found: set KWIKI_NCU, or put ncu on the PATH", file=sys.stderr)
        sys.exit(2)
    return ncu


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for item in filter(None, text.split(",")):
        try:
            m, n, k = (int(x) for x in item.lower().split("x"))
        except ValueError:
            print(f"l2_profile: bad shape {item!r}: want MxNxK", file=sys.stderr)
            sys.exit(2)
        out.append((m, n, k))
    return out


def read_metrics(report: str) -> dict[str, float]:
    """The first kernel row of ncu's `--csv --page raw` report (kwiki's read_csv: base units), by metric name."""
    rows = read_csv(report)
    if not rows:
        raise ValueError("ncu printed no kernel row (was the kernel launched?)")
    out = {}
    for name in METRICS:
        value = number(rows[0].get(name))
        if value is None:
            raise ValueError(f"ncu's report has no value in column {name}")
        out[name] = value
    return out


def profile(ncu: str, binary: str, variant: str, shape: tuple[int, int, int], seed: int) -> dict:
    m, n, k = shape
    params = {"M": m, "N": n, "K": k}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        app = [binary, f"--shapes={m}x{n}x{k}", "--variants", variant, f"--seed={seed}", *QUIET_TIMING]
        argv = ncu_argv(ncu, app, metrics=list(METRICS), log_file=str(log), kernel_regex=KERNEL, launch_count=1,
                        profile_from_start=True)
        print("l2_profile: " + " ".join(argv), file=sys.stderr, flush=True)
        proc = subprocess.run(argv, capture_output=True, text=True)
        sys.stderr.write(proc.stderr[-4000:])
        report = log.read_text(errors="replace") if log.exists() else ""
    own = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    own = [r for r in own if r.get("variant") == variant and r.get("params", {}).get("M") == m]
    if proc.returncode != 0 or not own:
        detail = f"the profiled binary exited {proc.returncode} with {len(own)} record(s) for {variant}"
        return kb.record(variant, params=params, check=kb.check(False, detail=detail))
    c = own[0]["check"]
    check = kb.check(bool(c["passed"]), c.get("max_abs_err"), c.get("max_rel_err"), c.get("tolerance"),
                     c.get("reference"), c.get("detail"))
    if not check["passed"]:
        return kb.record(variant, params=params, check=check)
    try:
        got = read_metrics(report)
    except ValueError as exc:
        sys.stderr.write(report[-4000:])
        check = kb.check(False, reference=check["reference"], detail=f"ncu: {exc}")
        return kb.record(variant, params=params, check=check)
    extra = {METRICS[name]: value for name, value in got.items()}
    extra = {
        "l2_hit_rate_pct": extra["l2_hit_rate_pct"],
        "l2_read_hit_rate_pct": extra["l2_read_hit_rate_pct"],
        "dram_read_mb": extra["dram_read_bytes"] / 1e6,
        "l2_read_mb": extra["l2_read_sectors"] * 32 / 1e6,
        "compulsory_mb": (m * k + n * k) * 2 / 1e6,
        "group": VARIANTS[variant],
    }
    return kb.record(variant, params=params, check=check, flops=2.0 * m * n * k, extra=extra)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("--"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    binary, args = argv[0], kb.parse_args(argv[1:], known=list(VARIANTS))
    shapes = parse_shapes(args.rest.get("shapes", "8192x8192x8192,4096x4096x4096"))
    ncu = ncu_or_exit()
    for variant in VARIANTS:
        if args.want(variant):
            for shape in shapes:
                kb.emit(profile(ncu, binary, variant, shape, args.seed))
    return kb.exit_code()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
