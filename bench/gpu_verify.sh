#!/usr/bin/env bash
# Run `kwiki verify` on the GPU machine (the device tool), N times in a row, and pack what it wrote.
#
#   bash bench/gpu_verify.sh [RUNS] [kwiki verify args ...]
#
# Pass the checkout's commit along (the copy on the GPU machine has no .git):
#   KWIKI_COMMIT=$(git rev-parse --short=12 HEAD) KWIKI_DIRTY=$([ -n "$(git status --porcelain -uno)" ] && echo 1 || echo 0)
# Needs: $OUT (the device tool's output folder), .whl/ carried along (../shared/device/wheels.sh).
# Writes to $OUT: verify-<n>.json (the --json report of each run), verify-<n>.log (progress),
# compile.txt (exit codes, run-to-run comparison; with COMPILE_BENCH=1 also cold and cached --compile-only times), written.tgz (wiki/ and results/ as the runs left them).
set -uo pipefail
runs=${1:-1}; shift || true
out=${OUT:-/tmp/kwiki-out}; mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
kw() { python3 -m kwiki.cli "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
if [ -n "${COMPILE_BENCH:-}" ]; then  # cold and cached --compile-only wall times on this machine
  rm -rf .kwiki/build
  TIMEFORMAT="cold compile-only: %R s"; { time kw verify --compile-only --quiet >/dev/null 2>&1; } 2>> "$out/compile.txt"
  TIMEFORMAT="cached compile-only: %R s"; { time kw verify --compile-only --quiet >/dev/null 2>&1; } 2>> "$out/compile.txt"
fi
for n in $(seq 1 "$runs"); do
  kw verify --json "$@" > "$out/verify-$n.json" 2> "$out/verify-$n.log"
  echo "verify run $n: exit $?" | tee -a "$out/compile.txt"
done
tar czf "$out/written.tgz" wiki results .kwiki/runs 2>/dev/null
python3 bench/compare_runs.py >> "$out/compile.txt" 2>&1 || true
cat "$out/compile.txt"; tail -n 30 "$out/verify-$runs.log"
