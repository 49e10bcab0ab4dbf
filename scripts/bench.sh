#!/usr/bin/env bash
# The whole benchmark on a GPU machine, in one command:
#   1. kiln_bench --precompile, sharded over the CPU cores (warms the on-disk compile cache),
#   2. kiln_bench attention matmul memory seeds (kiln's kernels, each checked against a double reference,
#      then timed) -> raw/kiln.json,
#   3. kiln_bench ablation compile autotune model (each code-generator switch off in turn, compile latency,
#      the autotuner's checks, the performance model against measurement) -> raw/kiln-extra.json,
#   4. bench/peers.py (PyTorch SDPA backends, cuBLAS, copy bandwidth on the same case keys),
#   5. bench/report.py (merged JSON, markdown tables, PNG plots under docs/bench/<device-slug>*),
# then prints the headline table and each stage's time against its estimate. Each stage has a time limit
# so that the standard sweep ends within about 8 minutes (--quick: about 2); a stage cut short keeps the
# cases it finished (the JSON files are rewritten after every case).
#
# Usage: scripts/bench.sh [--quick] [--no-tune] [--no-extra] [extra kiln_bench options, e.g. --config BLOCK_N=128]
# FA2, matmul, softmax and vector add are timed with the autotuner's pick for each shape unless --no-tune
# (or --config) is given.
# --no-extra skips stage 3 (the report then has no ablation, compile, autotune or model sections).
# Where one command may run at most 10 minutes (the GPU tool), split the run in two:
#   scripts/bench.sh --extra-only            stage 3 alone; its JSON goes to $OUT/kiln-extra.json
#   scripts/bench.sh --extra-json FILE       stages 1, 2, 4, 5, reporting FILE as stage 3's results
# Environment: KILN_BIN (default build/kiln_bench), PYTHON (default python3), OUT (when set, e.g. the
# GPU tool's output folder, the report and the raw JSON are copied there too).
set -uo pipefail
cd "$(dirname "$0")/.."

quick=""
tune="--tune"
run_extra=1
extra_only=0
extra_json=""
extra=()
want_extra_json=0
for arg in "$@"; do
  if ((want_extra_json)); then
    extra_json="$arg"
    want_extra_json=0
    continue
  fi
  case "$arg" in
  --quick) quick="--quick" ;;
  --no-tune) tune="" ;;
  --no-extra) run_extra=0 ;;
  --extra-only) extra_only=1 ;;
  --extra-json) want_extra_json=1 run_extra=0 ;;
  -h | --help)
    sed -n '2,21p' "$0"
    exit 0
    ;;
  *) extra+=("$arg") ;;
  esac
done

bin="${KILN_BIN:-build/kiln_bench}"
python="${PYTHON:-python3}"
dest="docs/bench"
raw="$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench.XXXXXX")"
if [[ ! -x "$bin" ]]; then
  echo "bench.sh: no kiln_bench at '$bin' (build it, or set KILN_BIN)" >&2
  exit 2
fi
sweep_suites=(attention matmul memory seeds)
extra_suites=(ablation compile autotune model)
# Per stage, in seconds: the limit, and what a run on an H100/H200 is expected to take (printed beside
# the actual time). Stages: precompile, kiln sweep, kiln extra suites, peers. Tuning (the default: FA2
# is timed with the autotuner's pick per shape, as kiln::attention::forward runs it) costs the sweep
# time. kiln_bench prints its own per-suite estimates and times too.
if [[ -n "$quick" ]]; then
  limits=(25 50 75 25)
  expect=(10 35 40 20)
else
  limits=(60 300 150 120)
  expect=(30 215 100 90)
  [[ -z "$tune" ]] && expect[1]=170
fi

timings=()
stage_start=0
stage() {
  echo "== bench.sh: $* ($(date +%T))" >&2
  stage_start=$SECONDS
}
# stage_done NAME INDEX: records the stage's actual time against its estimate and limit.
stage_done() {
  local took=$((SECONDS - stage_start))
  timings+=("$1: ${took} s (expected ~${expect[$2]} s, limit ${limits[$2]} s)")
  echo "== bench.sh: $1 took ${took} s (expected ~${expect[$2]} s, limit ${limits[$2]} s)" >&2
}

if ((extra_only)); then
  stage "kiln_bench ${extra_suites[*]} (limit ${limits[2]} s, expected ~${expect[2]} s)"
  timeout "${limits[2]}" "$bin" "${extra_suites[@]}" $quick --json "$raw/kiln-extra.json" "${extra[@]}"
  extra_status=$?
  stage_done "kiln_bench extra suites" 2
  [[ -n "${OUT:-}" ]] && cp "$raw/kiln-extra.json" "$OUT/kiln-extra.json"
  exit "$extra_status"
fi
if [[ -n "$extra_json" && ! -f "$extra_json" ]]; then
  echo "bench.sh: --extra-json: no file '$extra_json'" >&2
  exit 2
fi

stage "precompiling (limit ${limits[0]} s, expected ~${expect[0]} s)"
jobs="$(nproc 2>/dev/null || echo 4)"
((jobs > 16)) && jobs=16
pids=()
precompile_suites=("${sweep_suites[@]}")
((run_extra)) && precompile_suites+=("${extra_suites[@]}")
for ((i = 0; i < jobs; i++)); do
  timeout "${limits[0]}" "$bin" --precompile --shard "$i/$jobs" $quick "${precompile_suites[@]}" "${extra[@]}" \
    2>"$raw/precompile.$i.log" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
grep -h "FAILED" "$raw"/precompile.*.log >&2 || true
stage_done precompile 0

stage "kiln_bench ${sweep_suites[*]} (limit ${limits[1]} s, expected ~${expect[1]} s)"
timeout "${limits[1]}" "$bin" "${sweep_suites[@]}" $quick $tune --json "$raw/kiln.json" "${extra[@]}"
kiln_status=$?
((kiln_status == 124)) && echo "bench.sh: kiln_bench hit its ${limits[1]} s limit; reporting what it finished" >&2
stage_done "kiln_bench sweep" 1

extra_status=0
kiln_jsons=(--kiln "$raw/kiln.json")
if [[ -n "$extra_json" ]]; then
  cp "$extra_json" "$raw/kiln-extra.json"
  kiln_jsons+=(--kiln "$raw/kiln-extra.json")
fi
if ((run_extra)); then
  stage "kiln_bench ${extra_suites[*]} (limit ${limits[2]} s, expected ~${expect[2]} s)"
  timeout "${limits[2]}" "$bin" "${extra_suites[@]}" $quick --json "$raw/kiln-extra.json" "${extra[@]}"
  extra_status=$?
  ((extra_status == 124)) &&
    echo "bench.sh: kiln_bench (extra suites) hit its ${limits[2]} s limit; reporting what it finished" >&2
  kiln_jsons+=(--kiln "$raw/kiln-extra.json")
  stage_done "kiln_bench extra suites" 2
fi

stage "peers.py (limit ${limits[3]} s, expected ~${expect[3]} s)"
PYTHONUNBUFFERED=1 timeout "${limits[3]}" "$python" bench/peers.py $quick --json "$raw/peers.json" \
  --kiln-json "$raw/kiln.json"
peers_status=$?
((peers_status != 0)) && echo "bench.sh: peers.py exited with $peers_status; reporting without what it missed" >&2
stage_done peers.py 3

stage "report.py"
touch "$raw/report.stamp"
"$python" bench/report.py "${kiln_jsons[@]}" --peers "$raw/peers.json" --out-dir "$dest" --headline \
  >"$raw/headline.md"
report_status=$?

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT/raw"
  cp "$raw"/*.json "$raw"/*.log "$OUT/raw/" 2>/dev/null || true
  # The files report.py wrote this run.
  find "$dest" -maxdepth 1 -type f -newer "$raw/report.stamp" -exec cp {} "$OUT/" \;
fi

cat "$raw/headline.md"
echo >&2
for t in "${timings[@]}"; do echo "bench.sh: $t" >&2; done
stage "done: kiln_bench $kiln_status, extra suites $extra_status, peers $peers_status, report $report_status; raw JSON in $raw"
if ((report_status != 0)); then exit "$report_status"; fi
if ((kiln_status != 0)); then exit "$kiln_status"; fi
exit "$extra_status"
