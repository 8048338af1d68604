#!/usr/bin/env bash
# Verify pages one group at a time on the GPU machine (the device tool), within a time budget, packing what kwiki
# wrote after each group, so that a call cut short by its limit still brings back every group that finished.
#
#   BUDGET_S=250 bash bench/gpu_pages.sh "page-a page-b" "page-c" ... [-- kwiki verify args]
#   BUDGET_S=560 bash bench/gpu_pages.sh --all [-- kwiki verify args]    # every measured page, in the groups of
#                                                                        # bench/page_groups.py (made over there,
#                                                                        # once the wheels are installed)
#
# Pages that share an artifact must be in one group: each group is a run, and an artifact in two groups would be run
# twice in one call (two runs of its series). bench/page_groups.py makes such groups.
#
#   RUNS=3 BUDGET_S=550 bash bench/gpu_pages.sh "page-new" -- --no-audit --until-runs 3   # a new series' 3 runs
#
# Each device call starts from a fresh copy of this checkout, so `--until-runs N` counts the runs committed here,
# not those of an earlier call whose archive is not merged yet: merge it (bench/merge_written.py) and commit between
# calls, or expect every call to run each series once more (then `merge_written.py --last-wins` takes them all in).
#
# Each quoted group is one `kwiki verify --json ARGS GROUP` (default ARGS: --no-audit), RUNS times in a row (default
# 1; a repeat only after a run that ran something, all "ok"), run under `timeout` for
# what is left of BUDGET_S (a group with under 30 s left is not started). Needs KWIKI_COMMIT / KWIKI_DIRTY (the copy
# on the GPU machine has no .git), $OUT, and .whl/ carried along (bench/wheels.sh says what it holds).
# Triton's compiled kernels (.kwiki/triton-cache, kwiki.verify.pyartifact) do not outlive a device machine, and a
# Triton-heavy artifact compiles for minutes on a fresh one. With TRITON_CACHE_OUT=1 the cache comes back as
# $OUT/triton-cache.tgz (when under 48 MiB); unpack it here into .kwiki/ (`tar xzf .../triton-cache.tgz -C .kwiki`)
# and carry `.kwiki/triton-cache` beside `.whl` in the next call, whose verify then compiles only what changed.
#
# Writes to $OUT (three files: the device tool brings back 8 at most): summary.txt, written.tgz (wiki/ and results/),
# logs.tgz (pages-<n>.json, the --json report, pages-<n>.log, the progress, and runs-<n>/, the artifacts' own logs of
# that run, of each group, numbered on across invocations of one call).
#
# GPU_MODEL=H200 stops before anything runs (exit 3, a line in summary.txt) when the GPU's name does not contain it:
# the device tool may lend another Hopper than the one the pages' claims are stated for (2026-12-05: seven H100s in a
# row), and a run there spends the call on figures no page takes (kwiki verify leaves a page measured on another GPU
# model as it is, unless --other-gpu).
set -uo pipefail
out=${OUT:-/tmp/kwiki-out}; mkdir -p "$out"
if [ -n "${GPU_MODEL:-}" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$gpu" in
    *"$GPU_MODEL"*) ;;
    *) echo "gpu_pages.sh: the GPU is '${gpu:-none}', not the $GPU_MODEL asked for: nothing run" | tee -a "$out/summary.txt"; exit 3 ;;
  esac
fi
logs=$(mktemp -d)
# a second invocation in the same device call goes on from the first one's logs (numbering after them), so that its
# logs.tgz holds both (it replaced the first one's on 2026-12-03)
[ -f "$out/logs.tgz" ] && tar xzf "$out/logs.tgz" -C "$logs"
budget=${BUDGET_S:-540}
groups=(); args=(); all=0
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; args=("$@"); break; fi
  if [ "$1" = "--all" ]; then all=1; shift; continue; fi
  groups+=("$1"); shift
done
[ ${#args[@]} -eq 0 ] && args=(--no-audit)
# shellcheck source=bench/wheels.sh
source "$(dirname "$0")/wheels.sh"
if [ "$all" = 1 ]; then  # page_groups.py imports kwiki (pydantic): only now, with the wheels installed
  mapfile -t listed < <(python3 "$(dirname "$0")/page_groups.py") || exit 2
  for line in "${listed[@]}"; do groups+=("$line"); done
fi
[ ${#groups[@]} -gt 0 ] || { echo "gpu_pages.sh: no page groups (give quoted groups or --all)" >&2; exit 2; }
export PYTHONUNBUFFERED=1
runs=${RUNS:-1}
# another run of a group only when its last one ran something and every run of it was "ok" (a failed check is not
# worth repeating): with `--until-runs N` in the args, RUNS=N brings new series to N runs in one device call
again() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d.get("runs") and all(r["status"] == "ok" for r in d["runs"]) else 1)' "$1" 2>/dev/null
}
n=$(find "$logs" -name "pages-*.json" | wc -l)
for group in "${groups[@]}"; do
  for ((r = 1; r <= runs; r++)); do
    n=$((n + 1)); left=$((budget - SECONDS))
    if [ "$left" -lt 30 ]; then echo "group $n ($group): not started, ${left} s left" | tee -a "$out/summary.txt"; break; fi
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout "$left" python3 -m kwiki.cli verify --json "${args[@]}" $group > "$logs/pages-$n.json" 2> "$logs/pages-$n.log"
    echo "group $n ($group, run $r of $runs): exit $? in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    # the pages it left behind the results store (they share an artifact it ran): a group of their own, or this one
    python3 -c 'import json, sys
print("\n".join("  " + n for n in json.load(open(sys.argv[1])).get("notes", []) if "behind the results store" in n))' \
      "$logs/pages-$n.json" 2>/dev/null | grep . | tee -a "$out/summary.txt"
    # the artifacts' own logs of that run (.kwiki/runs/<run id>/: where its time went), under runs-<n>/
    run_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("run_id") or "")' \
             "$logs/pages-$n.json" 2>/dev/null)
    if [ -n "$run_id" ] && [ -d ".kwiki/runs/$run_id" ]; then
      mkdir -p "$logs/runs-$n" && cp ".kwiki/runs/$run_id"/*.log "$logs/runs-$n/" 2>/dev/null
    fi
    tar czf "$out/written.tgz" wiki results
    tar czf "$out/logs.tgz" -C "$logs" .
    again "$logs/pages-$n.json" || break
  done
done
if [ "${TRITON_CACHE_OUT:-0}" = 1 ] && [ -d .kwiki/triton-cache ]; then
  if [ "$(du -sm .kwiki/triton-cache | cut -f1)" -lt 48 ]; then
    tar czf "$out/triton-cache.tgz" -C .kwiki triton-cache
  else
    echo "triton cache: over 48 MiB, not brought back" | tee -a "$out/summary.txt"
  fi
fi
cat "$out/summary.txt"
