// `kiln attention --varlen=LENS`: packed variable-length attention (kiln::attention::forward_varlen) on
// random inputs, in the interpreter or on the GPU, checked against the per-sequence double reference and
// written as .npy (O [total_q, H, D], LSE [H, total_q]) as asked; with --backward the packed backward instead
// (dQ [total_q, H, D], dK and dV [total_k, H_KV, D]); with --mod the library mods on each sequence; with --bench
// the API's calls timed on the GPU. The attention command parses the flags and hands them here.
#pragma once

#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_varlen_problem.h"

#include <map>
#include <string>

namespace kiln::cli {

// "0,1,17:30,300": one entry per sequence, N (N_Q = N_K = N) or NQ:NK, lengths >= 0 in base 10. A kiln::Error
// naming `flag` and the entry otherwise.
void parse_varlen_lengths(const std::string& text, const char* flag, VarlenProblem& p);

struct VarlenRun {
  VarlenProblem problem;
  std::map<std::string, int64_t> overrides; // --set
  Executor executor = Executor::Interpreter;
  bool check = false;
  uint64_t seed = 1;
  std::string out_file, lse_file; // "" when not asked for
  DType out_dtype = DType::f32;
  // --backward: the gradients of a random dO, written to dq/dk/dv_file as asked. On the GPU without mods from
  // forward_varlen and backward_varlen as they tune (deterministic unless --nondeterministic); in the
  // interpreter or with mods at the default configs (ATOMIC_DQ=1 with --nondeterministic), over O and LSE from
  // the double forward.
  bool backward = false, atomic_dq = false;
  std::string dq_file, dk_file, dv_file;
  // --bench: forward_varlen (or with --backward, backward_varlen and forward + backward) timed on the GPU
  // through the API, the median of `reps` calls after one that may tune.
  bool bench = false;
  int reps = 20;
  // --mod: library mods applied to each sequence (attention_varlen_mods.h), run through the mods' kernels at
  // the default configs (not autotuned) and checked against the per-sequence reference with the same mods.
  AttentionMods mods;
  ModTensorValues mod_tensors;
};

// Runs it (on the GPU through forward_varlen: the autotuner's config unless --set fixed parameters; in the
// interpreter the default config), prints what ran and the check, writes the outputs; returns the exit code.
int run_varlen_attention(const VarlenRun& r);

} // namespace kiln::cli
