// Host-side attention problems: shapes, layouts and strides, random inputs, the double-precision
// reference (O and LSE), configs that match a problem, and interpreted runs of FA1/FA2. Tests,
// benchmarks and the GPU checks all describe attention through AttentionProblem.
#pragma once

#include "dsl/interpreter.h"
#include "kernels/executor.h"
#include "dsl/registry.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct AttentionProblem {
  int64_t B = 1, H = 1, H_KV = 1, N_Q = 1, N_K = 1, D = 64;
  DType dtype = DType::f16;
  int causal = 0;           // 0 none, 1 top-left, 2 bottom-right (the CAUSAL param)
  bool bshd_layout = false; // tensors stored [B, N, H, D] rather than [B, H, N, D]
  double sm_scale = 0;      // 0 → 1 / sqrt(D)
  bool k_transposed = true; // which K variant of the kernels to run (K_TRANSPOSED)
  bool tf32 = false;        // f32 only: tf32 dots
  bool exact_masked_v = false; // EXACT_MASKED_V: hidden keys selected out of masked tiles' P·V

  double scale() const;
  int64_t head_dim_tile() const; // HEAD_DIM: the power of two >= max(D, 16)
  // SPLIT_D for the forward (fa2_fwd.h): D within (HEAD_DIM/2, 3/4 HEAD_DIM] at HEAD_DIM >= 64, so that tiles of
  // HEAD_DIM/2 and HEAD_DIM/4 columns cover it (D = 96, 192); not with exact_masked_v, whose selection is built
  // for one tile.
  bool split_head_dim() const;
  int64_t head_dim_columns() const; // what the forward's head-dim tiles cover: head_dim_columns(HEAD_DIM, SPLIT_D)
  std::string str() const;       // "B1 H4 H_KV2 N_Q17 N_K100 D96 f16 causal=2 bshd"
};

// Rows and keys are i32 in the kernels, and a tile's indices run up to one tile past the end: the margin
// covers any tile a config can ask for.
inline constexpr int64_t kMaxAttentionSize = (int64_t{1} << 31) - (int64_t{1} << 16);
// CUDA's limit on gridDim.y, which the kernels fill with B * H (B * H_KV for dK/dV).
inline constexpr int64_t kMaxAttentionGridY = 65535;

// A problem kiln's kernels cannot run is a kiln::Error naming the field (H % H_KV, D > 256, a size of
// kMaxAttentionSize or more, B * H above kMaxAttentionGridY, ...). Sizes that pass keep every element count
// and byte count of the problem's tensors far inside 64 bits.
void check_attention_problem(const AttentionProblem& p);

// Strides in elements of one [B, heads, N, D] tensor in the problem's layout; D has stride 1.
struct TensorStrides {
  int64_t b = 0, h = 0, n = 0;
};
struct AttentionStrides {
  TensorStrides q, k, v, o;
};
AttentionStrides attention_strides(const AttentionProblem& p);
// Where element (b, h, n, d) of a tensor with strides `s` sits, in elements.
int64_t element_offset(const TensorStrides& s, int64_t b, int64_t h, int64_t n, int64_t d);
// Whether query i sees key j under the problem's CAUSAL rule.
bool visible(const AttentionProblem& p, int64_t i, int64_t j);
// Every element of `b` set to NaN, so that an element a kernel never writes is seen.
void poison(HostBuffer& b);
int64_t q_numel(const AttentionProblem& p);  // Q and O
// ANCHORS.md's FLOP convention: 4·B·H·N_Q·N_K·D (two matmuls of 2·N_Q·N_K·D per head), halved when causal.
double attention_flops(const AttentionProblem& p);
int64_t kv_numel(const AttentionProblem& p); // K and V

struct AttentionInputs {
  HostBuffer q, k, v; // in the problem's dtype and layout
};
// Q, K, V uniformly random in [-scale, scale], rounded to the problem's dtype.
AttentionInputs make_inputs(const AttentionProblem& p, uint64_t seed, double scale);

// Outputs in logical order, whatever the layout: O [B, H, N_Q, D] and LSE [B, H, N_Q].
struct AttentionResult {
  std::vector<double> o, lse;
};
// Tensors in double and logical order: Q and dO [B, H, N_Q, D], K and V [B, H_KV, N_K, D].
struct AttentionTensors64 {
  std::vector<double> q, k, v, dout;
};
// The elements of `buf` (strides `s`) in logical order [B, heads, n, D].
std::vector<double> logical_tensor(const HostBuffer& buf, const TensorStrides& s, int64_t B, int64_t heads,
                                   int64_t n, int64_t D);
// Q, K, V of `in` in logical order (dout left empty).
AttentionTensors64 logical_tensors(const AttentionProblem& p, const AttentionInputs& in);
// The forward in double on logical tensors (t.dout unused): O and LSE as reference() gives them.
AttentionResult reference_forward(const AttentionProblem& p, const AttentionTensors64& t);
// The same with each score of a key the CAUSAL rule lets through passed through `score` (b, h, query i, key
// j, the scaled q·k in double) before the softmax; it returns the final score, −inf to hide the key. The
// score and mask mods' reference (attention_mods_host.h).
using ReferenceScoreFn = std::function<double(int64_t b, int64_t h, int64_t i, int64_t j, double score)>;
AttentionResult reference_forward(const AttentionProblem& p, const AttentionTensors64& t,
                                  const ReferenceScoreFn& score);

// softmax(Q Kᵀ · scale) V and the natural-log logsumexp in double precision from the rounded inputs.
// A query row that sees no key gets O = 0 and LSE = −inf.
AttentionResult reference(const AttentionProblem& p, const AttentionInputs& in);

// `c` with the problem-bound params of `p` applied (HEAD_DIM, EVEN_D, CAUSAL, K_TRANSPOSED, DTYPE, TF32,
// EXACT_MASKED_V), and SPLIT_D where `c` has it (the forward's configs): EVEN_D then says whether D fills the
// columns the head-dim tiles cover.
Config with_attention_problem(Config c, const AttentionProblem& p);
// Configs whose problem-bound params (HEAD_DIM, EVEN_D, CAUSAL, K_TRANSPOSED, DTYPE, TF32) match `p`,
// with GPU-sized tiles; tests shrink BLOCK_M/BLOCK_N for the interpreter.
Config default_fa2_config(const AttentionProblem& p);
Config default_fa1_config(const AttentionProblem& p);
// The kernel's config space with `p`'s problem-bound params applied.
std::vector<Config> fa2_config_space(const AttentionProblem& p);
// A kiln::Error when an attention parameter of `config` is outside its declared range (BLOCK_M=0) or disagrees
// with `p` (e.g. HEAD_DIM < D, EVEN_D wrong, DTYPE differs).
void check_attention_config(const AttentionProblem& p, const Config& config);
SizeArgs attention_size_args(const AttentionProblem& p);

// The kernels' output buffers: O in the problem's dtype and layout, LSE f32 [B, H, N_Q]; and FA1's
// f32 scratch (OACC [B, H, N_Q, HEAD_DIM], L and M [B, H, N_Q]).
struct AttentionOutputs {
  HostBuffer o, lse;
};
struct Fa1Scratch {
  HostBuffer oacc, l, m;
};
AttentionOutputs make_outputs(const AttentionProblem& p); // poisoned with NaN
Fa1Scratch make_fa1_scratch(const AttentionProblem& p);    // poisoned with NaN (the kernel initialises it)

// Interpreter arguments in the kernels' order (see fa2_fwd.h / fa1_fwd.h). The buffers are referenced,
// not copied: they must outlive the run.
std::vector<InterpArg> fa2_interp_args(const AttentionProblem& p, AttentionInputs& in, AttentionOutputs& out);
std::vector<InterpArg> fa1_interp_args(const AttentionProblem& p, AttentionInputs& in, AttentionOutputs& out,
                                       Fa1Scratch& scratch);

// O and LSE of the outputs, in logical order (see AttentionResult).
AttentionResult gather_outputs(const AttentionProblem& p, const AttentionOutputs& out);

// Runs the kernel in the interpreter on outputs poisoned with NaN and returns them in logical order.
AttentionResult run_fa2_interpreted(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                                    Executor executor = Executor::Interpreter);
AttentionResult run_fa1_interpreted(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                                    Executor executor = Executor::Interpreter);

} // namespace kiln
