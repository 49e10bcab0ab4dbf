#!/usr/bin/env bash
# The whole GPU check, run on a GPU machine: device info, the runtime and GPU test suites, and a
# compute-sanitizer pass over one config of each kernel. Logs go to $OUT (or ./gpu-check-logs);
# a short table is printed last.
# Usage: scripts/gpu_check.sh [BIN_DIR] [--all [SECONDS] | --attention-tma | --api | --api-backward | --backward |
#                                        --backward-large | --backward-differential | --mods | --varlen |
#                                        --varlen-backward]
#        (BIN_DIR holds kiln_*_tests; default build/tests)
# --all runs the ten parts at once, each in its own process with its own compile cache and its logs under
# $OUT/<part>/, each cut at SECONDS (default 540) so that the summary still prints inside one 10-minute command;
# it exits non-zero when a part failed or was cut. The double-precision references run on every core
# (support/parallel_chunks.h), so the parts share the machine well: on an H200 (16 cores, 2026-12-01, cold
# caches) the ten parts took 354 s together, the slowest 354 s (backward-differential; api-backward 324 s); one at
# a time they took about 46 minutes before the references ran in parallel. On a fresh H200 on 2026-12-02 (§101's
# code, cut at 530) the same took 528 s: backward-differential 500 s, api-backward 470 s, varlen-backward 368 s;
# a part near the cut is the first thing to split if the check grows.
# Ten parts, each within the GPU tool's 10-minute limit per command; together they are the whole check. Their
# times alone, before the parallel references (an H100 SXM unless an H200 is named), and in the H200's --all run:
#   (none)          the runtime suite and every GPU suite but those below (the differential suite included: 520
#                   random forward problems through the API), and the compute-sanitizer passes over them: 9.2 min
#                   cold on an H200 (350 tests, 2026-11-29, with the suites --mods and --attention-tma now run);
#                   277 GPU tests in 309 s under --all (2026-12-01);
#   --attention-tma FA2's forward on the TMA, warp-specialised, ping-pong, late-product, persistent (static and
#                   dynamic), lazy-rescale, exp2-on-FMA and tile-barrier schedules (96 cases; a dynamic case launches
#                   three times) and the sanitizer passes over a few of them: 6.5 min cold on an H200; 60 s for the
#                   cases and 28 s for the sanitizer passes under --all (2026-12-01); and every forward and backward
#                   config that reads a wgmma operand from registers (GpuRegisterOperands, 78 runs): 101 s alone,
#                   cold (2026-12-02);
#   --mods          the forward with attention mods and block masks (kernels and API) and the sinks' gradients
#                   through the API: about 2.7 min on an H200; 106 s under --all;
#   --api           the attention API's forward suites (autotuning through the API, mods, the command line,
#                   non-finite inputs): 3.2 min cold without the non-finite suites; 251 s under --all;
#   --api-backward  the backward through the API, with and without mods: 5.7 min cold; 324 s under --all;
#   --backward      the attention backward's kernel suites but the large one, the block-pointer atomic_add suite
#                   (the dQ accumulation's op) and the sanitizer passes over the backward's kernels: 4.7 min cold
#                   on an H200; 189 s under --all;
#   --backward-large the backward's long sequences, D = 256, every tuning config, the warp-specialised dK/dV and
#                   the fused one, both loops on a persistent grid (GpuFa2BwdLarge), and racecheck passes over the
#                   fused and the persistent ones: 4.2 min cold on an H200 before the fused suite (66-85 s alone,
#                   101 s under racecheck); 261 s (+ 11 s racecheck) under --all; 358 s (+ 10 s) on 2026-12-03
#                   (worklog §113) before the persistent pass (43 s alone, warm);
#   --backward-differential 120 random backward problems through the API
#                   (tests/gpu/attention_bwd_differential_gpu_test.cpp: default configs, drawn deterministic pairs,
#                   drawn ATOMIC_DQ=1 tiles), compile-bound: 341 s alone on an H200, cold (2026-11-30); 354 s under
#                   --all;
#   --varlen        attention over packed variable-length batches, forward (kernels, random problems, the API),
#                   and a memcheck pass over one ragged case: 1.4 min cold; 220 s under --all;
#   --varlen-backward the same for the backward: 6.8 min cold; 259 s under --all.
set -uo pipefail
bin=build/tests
part=forward
all_limit=""
want_limit=0
for arg in "$@"; do
  if ((want_limit)); then
    want_limit=0
    if [[ "$arg" =~ ^[0-9]+$ ]]; then
      all_limit=$arg
      continue
    fi
  fi
  case "$arg" in
  --all) part=all want_limit=1 all_limit=540 ;;
  --backward) part=backward ;;
  --backward-large) part=backward_large ;;
  --attention-tma) part=attention_tma ;;
  --api) part=api ;;
  --api-backward) part=api_backward ;;
  --backward-differential) part=backward_differential ;;
  --mods) part=mods ;;
  --varlen) part=varlen ;;
  --varlen-backward) part=varlen_backward ;;
  *) bin=$arg ;;
  esac
done
out=${OUT:-gpu-check-logs}
mkdir -p "$out"
if [[ $part == all ]]; then
  t0=$(date +%s)
  parts=(forward attention-tma mods api api-backward backward backward-large backward-differential varlen varlen-backward)
  for p in "${parts[@]}"; do
    flag=--$p
    [[ $p == forward ]] && flag=""
    mkdir -p "$out/$p"
    # timeout ends the part's whole process group (its test binary and sanitizer too), not only its shell.
    OUT="$out/$p" KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-cache}-$p" \
      timeout -k 5 "$all_limit" bash "$0" "$bin" $flag > "$out/$p/summary.txt" 2>&1 &
  done
  wait
  echo "== all parts at once ($(( $(date +%s) - t0 )) s; each cut at ${all_limit} s)"
  rc=0
  for p in "${parts[@]}"; do
    echo "== part $p"
    if grep -q '^== summary' "$out/$p/summary.txt"; then
      sed -n '/^== failures/,$p' "$out/$p/summary.txt"
    else
      rc=1
      echo "(cut at ${all_limit} s before its summary; the suites it finished:)"
      grep -H -E '^\[  (PASSED|FAILED) ' "$out/$p"/*.log 2>/dev/null
    fi
    grep -q -E '^\[  FAILED  \]' "$out/$p"/*.log 2>/dev/null && rc=1
  done
  exit $rc
fi
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
# The CLI tests run the kiln binary that sits beside the test binaries' folder (build/kiln for build/tests).
if [[ -z "${KILN_TOOL:-}" && -x "$(dirname "$bin")/kiln" ]]; then
  export KILN_TOOL="$(cd "$(dirname "$bin")" && pwd)/kiln"
fi
# and a user's tool on kiln::tool_main (tests/install/my_kiln.cpp), built beside the test binaries.
if [[ -z "${KILN_USER_TOOL:-}" && -x "$bin/my_kiln" ]]; then
  export KILN_USER_TOOL="$(cd "$bin" && pwd)/my_kiln"
fi
# and the tutorials' kernels in a user's tool (tests/tutorial_kernels_tool.cpp), for `run --check` on the GPU.
if [[ -z "${KILN_TUTORIAL_TOOL:-}" && -x "$bin/kiln_tutorial_tool" ]]; then
  export KILN_TUTORIAL_TOOL="$(cd "$bin" && pwd)/kiln_tutorial_tool"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/device.txt" 2>&1
backward_suites='*GpuFa2Bwd*:*GpuBlockMaskBwd*:*GpuBlockAtomicAdd*'
backward_large_suites='*GpuFa2BwdLarge*'
# FA2's forward schedules on the TMA path, and every config that reads a wgmma operand from registers (forward
# and backward: tests/gpu/register_operands_gpu_test.cpp, the guard against ptxas reusing those registers).
attention_tma_suites='*GpuAttentionTma*:*GpuRegisterOperands*'
api_suites='*GpuAttentionApi*:*GpuModsApi*:*CliGpuTest*:*GpuAttentionNonFinite*'
api_backward_suites='*GpuAttentionBwdApi*:*GpuModsBwd*'
# Random backward problems through the API at drawn configs (compile-bound: about 100 kernels).
backward_differential_suites='*GpuAttentionBwdDifferential*'
# Attention over packed variable-length batches: the forward's suites (with mods: forward and backward), then
# the backward's.
varlen_suites='*GpuVarlen.*:*GpuVarlenApi*:*GpuVarlenRandom*:*GpuVarlenMods*'
varlen_backward_suites='*GpuVarlenBwd*'
# The forward with mods and block masks (their backward suites are in --backward and --api-backward).
mods_suites='*GpuMods.*:*GpuBlockMask.*:*GpuBlockMaskApi.*:*GpuSinkGrad.*:*GpuSinkGradApi.*'
declare -A status
run() { # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  status[$name]="rc=$rc $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$name.log" | tr '\n' ' ')"
}
# A compute-sanitizer pass (tool, log name, gtest filter), where compute-sanitizer is installed.
sanitize() {
  command -v compute-sanitizer >/dev/null || return 0
  run "$2" compute-sanitizer --tool "$1" --error-exitcode 9 "$bin/kiln_gpu_tests" --gtest_filter="$3"
}
# The GPU suites of a part (its name, a gtest filter): log gpu_tests_<name>.log.
suites() { run "gpu_tests_$1" "$bin/kiln_gpu_tests" --gtest_filter="$2"; }
case $part in
backward)
  suites backward "$backward_suites-$backward_large_suites"
  sanitize memcheck sanitizer_memcheck_backward '*GpuFa2BwdSmall*:*GpuBlockAtomicAdd*'
  sanitize racecheck sanitizer_racecheck_backward '*GpuFa2BwdSmall*:*GpuBlockAtomicAdd*' ;;
backward_large)
  suites backward_large "$backward_large_suites"
  sanitize racecheck sanitizer_racecheck_fused_backward '*GpuFa2BwdLarge.FusedAtomic*'
  sanitize racecheck sanitizer_racecheck_persistent_backward '*GpuFa2BwdLarge.PersistentGrids*' ;;
attention_tma)
  suites attention_tma "$attention_tma_suites"
  sanitize memcheck sanitizer_memcheck_attention_tma '*GpuAttentionTma*N_K333*'
  sanitize racecheck sanitizer_racecheck_attention_tma '*GpuAttentionTma*N_K333*'
  # Barrier use (named barriers, mbarrier waits) of the warp-specialised schedules.
  sanitize synccheck sanitizer_synccheck_attention_tma '*GpuAttentionTma*N_K333*:*GpuAttentionTma*bshd*' ;;
api) suites api "$api_suites" ;;
api_backward) suites api_backward "$api_backward_suites" ;;
backward_differential) suites backward_differential "$backward_differential_suites" ;;
mods) suites mods "$mods_suites" ;;
varlen)
  suites varlen "$varlen_suites"
  sanitize memcheck sanitizer_memcheck_varlen '*GpuVarlen.*ragged_causalBR*' ;;
varlen_backward)
  suites varlen_backward "$varlen_backward_suites"
  sanitize memcheck sanitizer_memcheck_varlen_backward '*GpuVarlenBwd.*ragged_causalBR*' ;;
*)
  run runtime_tests "$bin/kiln_runtime_tests"
  run gpu_tests "$bin/kiln_gpu_tests" --gtest_filter="-$backward_suites:$api_suites:$api_backward_suites:$mods_suites:$varlen_suites:$varlen_backward_suites:$attention_tma_suites:$backward_differential_suites"
  sanitize memcheck sanitizer_memcheck '*GpuVectorAdd*:*GpuMatmul*M128_*:*GpuMatmulTma*M264*:*TmaGpu*:*GpuFa2Big*N1024_D64_c1*:*GpuSoftmax*:*GpuMatmulSplitK*M300_N200_K1000_f16*:*GpuMatmulSplitK*M64_N64*:*GpuChunkedLogsumexp*f16_R4*:*GpuStagedLoads*s3*:*GpuReductionSlots*'
  sanitize racecheck sanitizer_racecheck '*GpuMatmul*M128_*:*GpuMatmulTma*M264*:*GpuFa2Big*N1024_D64_c0*:*GpuSoftmax*:*GpuMatmulSplitK*M300_N200_K1000_f16*:*GpuStagedLoads*s3*:*GpuReductionSlots*'
  # Barrier use (named barriers, mbarrier waits) of the TMA and warp-specialised paths (attention's: --attention-tma).
  sanitize synccheck sanitizer_synccheck '*GpuMatmulTma*M264*:*GpuMatmulTma*M520_N392_K328_bf16*' ;;
esac
echo "== device"; cat "$out/device.txt"
echo "== failures"; grep -h -E '^\[  FAILED  \]' "$out"/*.log | sort -u | head -40
echo "== summary"
for k in "${!status[@]}"; do printf '%-22s %s\n' "$k" "${status[$k]}"; done | sort
