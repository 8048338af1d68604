#!/usr/bin/env bash
# Run `kwiki verify` on the GPU machine (the device tool), N times in a row, and pack what it wrote.
#
#   bash bench/gpu_verify.sh [RUNS] [kwiki verify args ...]
#
# Pass the checkout's commit along (the copy on the GPU machine has no .git):
#   KWIKI_COMMIT=$(git rev-parse --short=12 HEAD) KWIKI_DIRTY=$([ -n "$(git status --porcelain -uno)" ] && echo 1 || echo 0)
# Needs: $OUT (the device tool's output folder), .whl/ carried along (bench/wheels.sh says what it holds).
# Writes to $OUT: verify-<n>.json (the --json report of each run), verify-<n>.log (progress),
# compile.txt (exit codes, run-to-run comparison; with COMPILE_BENCH=1 also cold and cached --compile-only times), written.tgz (wiki/ and results/ as the runs left them).
set -uo pipefail
runs=${1:-1}; shift || true
out=${OUT:-/tmp/kwiki-out}; mkdir -p "$out"
# shellcheck source=bench/wheels.sh
source "$(dirname "$0")/wheels.sh"
export PYTHONUNBUFFERED=1
kw() { python3 -m kwiki.cli "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
if [ -n "${COMPILE_BENCH:-}" ]; then  # cold and cached --compile-only wall times on this machine
  rm -rf .kwiki/build
  TIMEFORMAT="cold compile-only: %R s"; { time kw verify --compile-only --quiet >/dev/null 2>&1; } 2>> "$out/compile.txt"
  TIMEFORMAT="cached compile-only: %R s"; { time kw verify --compile-only --quiet >/dev/null 2>&1; } 2>> "$out/compile.txt"
fi
# BUDGET_S: start another run only while the runs so far plus one more of the longest fit in it (the device's
# per-command limit); STOP_ON_ERROR=1: no further run after one with a claim in error or a run that crashed
start=$SECONDS; longest=0
for n in $(seq 1 "$runs"); do
  if [ "$n" -gt 1 ] && [ -n "${BUDGET_S:-}" ] && [ $((SECONDS - start + longest)) -gt "$BUDGET_S" ]; then
    echo "verify run $n: not started (${BUDGET_S} s budget)" | tee -a "$out/compile.txt"; break
  fi
  t0=$SECONDS
  kw verify --json "$@" > "$out/verify-$n.json" 2> "$out/verify-$n.log"
  echo "verify run $n: exit $? in $((SECONDS - t0)) s" | tee -a "$out/compile.txt"
  longest=$(( SECONDS - t0 > longest ? SECONDS - t0 : longest ))
  if [ -n "${STOP_ON_ERROR:-}" ] && python3 - "$out/verify-$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [c["claim"] for c in r["claims"] if c["verdict"] == "error"]
print("errors:", bad[:20])
sys.exit(0 if bad else 1)
PY
  then echo "verify run $n: errors, no further run" | tee -a "$out/compile.txt"; break; fi
done
tar czf "$out/written.tgz" wiki results .kwiki/runs 2>/dev/null
python3 bench/compare_runs.py >> "$out/compile.txt" 2>&1 || true
cat "$out/compile.txt"; tail -n 30 "$out/verify-$runs.log"
