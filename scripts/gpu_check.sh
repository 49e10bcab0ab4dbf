#!/usr/bin/env bash
# The whole GPU check, run on a GPU machine: device info, the runtime and GPU test suites, and a
# compute-sanitizer pass over one config of each kernel. Logs go to $OUT (or ./gpu-check-logs);
# a short table is printed last.
# Usage: scripts/gpu_check.sh [BIN_DIR] [--attention-tma | --api | --api-backward | --backward | --backward-large |
#                                        --mods | --varlen | --varlen-backward]
#        (BIN_DIR holds kiln_*_tests; default build/tests)
# Nine parts, each within the GPU tool's 10-minute limit per command; together they are the whole check (times
# measured on an H100 SXM unless an H200 is named):
#   (none)          the runtime suite and every GPU suite but those below (the differential suite included: 520
#                   random forward problems through the API), and the compute-sanitizer passes over them: 6.1 min
#                   cold (256 GPU tests, 2026-11-25; the decode suites, 43 tests, add about 1.4 min); with the
#                   suites --mods now runs it had reached 9.2 min cold on an H200 (350 tests, 2026-11-29), so the
#                   TMA and warp-specialised forward's suite moved to --attention-tma;
#   --attention-tma FA2's forward on the TMA, warp-specialised, ping-pong, late-product, persistent (static and
#                   dynamic), lazy-rescale and exp2-on-FMA schedules (85 cases, about 2 s each cold; a dynamic case
#                   launches three times) and the sanitizer passes over a few of them: 6.5 min cold on an H200
#                   (4.8 for the cases, 2026-11-29);
#   --mods          the forward with attention mods and block masks (kernels and API) and the sinks' gradients
#                   through the API: about 2.7 min of that H200 run;
#   --api           the attention API's forward suites (autotuning through the API, mods, the command line,
#                   non-finite inputs): 1 min with a warm compile cache; cold, its suites but the non-finite ones
#                   took 3.2 min in a run of both API parts together, which outgrew 10 minutes before finishing;
#   --api-backward  the backward through the API, with and without mods: 0.5 min warm, 5.7 min cold (that run);
#   --backward      the attention backward's kernel suites but the large one (about 4.7 min cold on an H200), the
#                   block-pointer atomic_add suite (the dQ accumulation's op) and the sanitizer passes over the
#                   backward's kernels; with the large suite it took 8.8 min cold on an H200 (2026-11-29);
#   --backward-large the backward's long sequences, D = 256, every tuning config, the warp-specialised dK/dV and
#                   the fused one (GpuFa2BwdLarge), and a racecheck pass over the fused one: 4.2 min cold on an H200
#                   before the fused suite, which took 66-85 s alone and 101 s under racecheck (2026-11-30, after
#                   worklog §90);
#   --varlen        attention over packed variable-length batches, forward (kernels, random problems, the API),
#                   and a memcheck pass over one ragged case: 1.4 min cold (60 GPU tests, 2026-11-25);
#   --varlen-backward the same for the backward: 6.8 min cold (57 GPU tests, 2026-11-25).
set -uo pipefail
bin=build/tests
part=forward
for arg in "$@"; do
  case "$arg" in
  --backward) part=backward ;;
  --backward-large) part=backward_large ;;
  --attention-tma) part=attention_tma ;;
  --api) part=api ;;
  --api-backward) part=api_backward ;;
  --mods) part=mods ;;
  --varlen) part=varlen ;;
  --varlen-backward) part=varlen_backward ;;
  *) bin=$arg ;;
  esac
done
out=${OUT:-gpu-check-logs}
mkdir -p "$out"
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
attention_tma_suites='*GpuAttentionTma*'
api_suites='*GpuAttentionApi*:*GpuModsApi*:*CliGpuTest*:*GpuAttentionNonFinite*'
api_backward_suites='*GpuAttentionBwdApi*:*GpuModsBwd*'
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
  sanitize racecheck sanitizer_racecheck_fused_backward '*GpuFa2BwdLarge.FusedAtomic*' ;;
attention_tma)
  suites attention_tma "$attention_tma_suites"
  sanitize memcheck sanitizer_memcheck_attention_tma '*GpuAttentionTma*N_K333*'
  sanitize racecheck sanitizer_racecheck_attention_tma '*GpuAttentionTma*N_K333*'
  # Barrier use (named barriers, mbarrier waits) of the warp-specialised schedules.
  sanitize synccheck sanitizer_synccheck_attention_tma '*GpuAttentionTma*N_K333*:*GpuAttentionTma*bshd*' ;;
api) suites api "$api_suites" ;;
api_backward) suites api_backward "$api_backward_suites" ;;
mods) suites mods "$mods_suites" ;;
varlen)
  suites varlen "$varlen_suites"
  sanitize memcheck sanitizer_memcheck_varlen '*GpuVarlen.*ragged_causalBR*' ;;
varlen_backward)
  suites varlen_backward "$varlen_backward_suites"
  sanitize memcheck sanitizer_memcheck_varlen_backward '*GpuVarlenBwd.*ragged_causalBR*' ;;
*)
  run runtime_tests "$bin/kiln_runtime_tests"
  run gpu_tests "$bin/kiln_gpu_tests" --gtest_filter="-$backward_suites:$api_suites:$api_backward_suites:$mods_suites:$varlen_suites:$varlen_backward_suites:$attention_tma_suites"
  sanitize memcheck sanitizer_memcheck '*GpuVectorAdd*:*GpuMatmul*M128_*:*GpuMatmulTma*M264*:*TmaGpu*:*GpuFa2Big*N1024_D64_c1*:*GpuSoftmax*:*GpuMatmulSplitK*M300_N200_K1000_f16*:*GpuMatmulSplitK*M64_N64*:*GpuChunkedLogsumexp*f16_R4*:*GpuStagedLoads*s3*:*GpuReductionSlots*'
  sanitize racecheck sanitizer_racecheck '*GpuMatmul*M128_*:*GpuMatmulTma*M264*:*GpuFa2Big*N1024_D64_c0*:*GpuSoftmax*:*GpuMatmulSplitK*M300_N200_K1000_f16*:*GpuStagedLoads*s3*:*GpuReductionSlots*'
  # Barrier use (named barriers, mbarrier waits) of the TMA and warp-specialised paths (attention's: --attention-tma).
  sanitize synccheck sanitizer_synccheck '*GpuMatmulTma*M264*:*GpuMatmulTma*M520_N392_K328_bf16*' ;;
esac
echo "== device"; cat "$out/device.txt"
echo "== failures"; grep -h -E '^\[  FAILED  \]' "$out"/*.log | sort -u | head -40
echo "== summary"
for k in "${!status[@]}"; do printf '%-22s %s\n' "$k" "${status[$k]}"; done | sort
