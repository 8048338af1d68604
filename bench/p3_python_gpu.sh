#!/usr/bin/env bash
# Protocol 3's Python cheats on the GPU machine: tests/test_gpu_python.py (the Triton cheats, the CUDA library beside
# torch, and the p3-python-cheats page: honest torch eager / eager chain / torch.compile / Triton, late_{8,16,64,1000},
# reuse_5pct, helper_{05,10,25,50}), RUNS times (default 5), and a summary of what caught each cheat in how many runs.
#
#   bash bench/p3_python_gpu.sh [RUNS]
#
# Needs: torch with CUDA and Triton on the GPU machine's python3 (there already), nvidia-ml-py (there already; without
# it timer.contexts says "unavailable" and the `unseen` gate alone catches the helper processes), kwiki's runtime
# wheels carried in .whl/ (bench/wheels.sh: pydantic and its pair). Writes to $OUT (or /tmp/kwiki-out):
# pytest-<n>.txt per run, verdicts.jsonl (one line per variant and run: status, message, gates, timer), summary.txt.
set -uo pipefail
runs=${1:-5}
out=${OUT:-/tmp/kwiki-out}; mkdir -p "$out"
# shellcheck source=bench/wheels.sh
source "$(dirname "$0")/wheels.sh"
export PYTHONUNBUFFERED=1 KWIKI_P3_SUMMARY="$out/verdicts.jsonl"
rm -f "$KWIKI_P3_SUMMARY"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$out/gpu.txt" 2>&1
python3 -c "import pynvml, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  >> "$out/gpu.txt" 2>&1
for n in $(seq 1 "$runs"); do
  echo "{\"run\": $n}" >> "$KWIKI_P3_SUMMARY"
  python3 -m pytest tests/test_gpu_python.py -q -p no:cacheprovider > "$out/pytest-$n.txt" 2>&1
  echo "run $n: pytest exit $? ($(tail -n 1 "$out/pytest-$n.txt"))" | tee -a "$out/summary.txt"
done
python3 - "$KWIKI_P3_SUMMARY" >> "$out/summary.txt" <<'PY'
import collections, json, sys
rows, run = collections.defaultdict(list), 0
for line in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(line)
    if "run" in d:
        run = d["run"]
        continue
    rows[d["variant"]].append((run, d))
for variant, seen in sorted(rows.items()):
    if "timer" in seen[0][1]:
        t = [d["timer"] for _, d in seen]
        excess = [d["timer"]["event_median_us"] - d["busy_us"] for _, d in seen]
        print(f"{variant}: honest in {len(seen)} runs; busy {[round(d['busy_us'], 1) for _, d in seen]} us, "
              f"event - busy {[round(e, 1) for e in excess]} us, fixed {[round(x['fixed_us'], 1) for x in t]}, "
              f"per launch {[round(x['per_launch_us'], 1) for x in t]}, kernels {[x['kernels'] for x in t]}, "
              f"contexts {sorted({x['contexts'] for x in t if x['contexts']})}")
    else:
        print(f"{variant}: caught in {len(seen)} runs: " + " | ".join(
            f"run {r}: {d['status']}: {d['message'][:160]}{' gates ' + str([g['name'] for g in d.get('gates') or []]) if d.get('gates') else ''}"
            for r, d in seen))
PY
cat "$out/summary.txt"
