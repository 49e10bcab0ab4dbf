#!/usr/bin/env bash
# The whole benchmark on a GPU machine, in one command:
#   1. kiln_bench --precompile, sharded over the CPU cores (warms the on-disk compile cache),
#   2. kiln_bench (kiln's kernels, each checked against a double reference, then timed),
#   3. bench/peers.py (PyTorch SDPA backends, cuBLAS, copy bandwidth on the same case keys),
#   4. bench/report.py (merged JSON, markdown tables, PNG plots under docs/bench/<device-slug>*),
# then prints the headline table. Each stage has a time limit so that the standard sweep ends within
# about 8 minutes (--quick: about 1.5); a stage cut short keeps the cases it finished (the JSON files
# are rewritten after every case).
#
# Usage: scripts/bench.sh [--quick] [--no-tune] [extra kiln_bench options, e.g. --config BLOCK_N=128]
# FA2 is timed with the autotuner's pick for each shape unless --no-tune (or --config) is given.
# Environment: KILN_BIN (default build/kiln_bench), PYTHON (default python3), OUT (when set, e.g. the
# GPU tool's output folder, the report and the raw JSON are copied there too).
set -uo pipefail
cd "$(dirname "$0")/.."

quick=""
tune="--tune"
extra=()
for arg in "$@"; do
  case "$arg" in
  --quick) quick="--quick" ;;
  --no-tune) tune="" ;;
  -h | --help)
    sed -n '2,15p' "$0"
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
# Stage limits in seconds: precompile, kiln_bench, peers. Tuning (the default: FA2 is timed with the
# autotuner's pick per shape, as kiln::attention::forward runs it) needs more time for kiln_bench.
if [[ -n "$quick" ]]; then limits=(25 50 25); else limits=(60 260 120); fi
[[ -n "$tune" && -z "$quick" ]] && limits[1]=360

stage() { echo "== bench.sh: $* ($(date +%T))" >&2; }

stage "precompiling"
jobs="$(nproc 2>/dev/null || echo 4)"
(( jobs > 16 )) && jobs=16
pids=()
for ((i = 0; i < jobs; i++)); do
  timeout "${limits[0]}" "$bin" --precompile --shard "$i/$jobs" $quick "${extra[@]}" 2>"$raw/precompile.$i.log" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
grep -h "FAILED" "$raw"/precompile.*.log >&2 || true

stage "kiln_bench"
timeout "${limits[1]}" "$bin" $quick $tune --json "$raw/kiln.json" "${extra[@]}"
kiln_status=$?
(( kiln_status == 124 )) && echo "bench.sh: kiln_bench hit its ${limits[1]} s limit; reporting what it finished" >&2

stage "peers.py"
PYTHONUNBUFFERED=1 timeout "${limits[2]}" "$python" bench/peers.py $quick --json "$raw/peers.json" \
  --kiln-json "$raw/kiln.json"
peers_status=$?
(( peers_status != 0 )) && echo "bench.sh: peers.py exited with $peers_status; reporting without what it missed" >&2

stage "report.py"
touch "$raw/report.stamp"
"$python" bench/report.py --kiln "$raw/kiln.json" --peers "$raw/peers.json" --out-dir "$dest" --headline \
  >"$raw/headline.md"
report_status=$?

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT/raw"
  cp "$raw"/*.json "$raw"/*.log "$OUT/raw/" 2>/dev/null || true
  # The files report.py wrote this run.
  find "$dest" -maxdepth 1 -type f -newer "$raw/report.stamp" -exec cp {} "$OUT/" \;
fi

cat "$raw/headline.md"
stage "done: kiln_bench $kiln_status, peers $peers_status, report $report_status; raw JSON in $raw"
if (( report_status != 0 )); then exit "$report_status"; fi
exit "$kiln_status"
