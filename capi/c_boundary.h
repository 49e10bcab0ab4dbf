// What every C entry point of libkiln shares: the exception-to-status boundary (no C++ exception crosses the
// ABI), the per-thread last error and returned strings, the GPU calls' answer where there is no GPU, the
// option structs' known sizes, and the conversions from the ABI's plain structs (kiln_tensor,
// kiln_attention_options, kiln_param) to kiln's C++ types.
#pragma once

#include "capi/kiln_c.h"
#include "dsl/config.h"
#include "dsl/dtype.h"
#include "kernels/attention/attention_bwd_api.h"
#include "runtime/cuda_driver.h"

#include <map>
#include <string>

namespace kiln::capi {

// A malformed C call (null pointer, unknown enum value, bad struct_size): KILN_ERROR_INVALID_ARGUMENT.
class InvalidArgument : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};
// A call that needs a GPU where there is none: KILN_ERROR_UNAVAILABLE.
class Unavailable : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

void set_last_error(const std::string& message);
const char* last_error_message(); // this thread's last error ("" after a success)
// Runs `body` and maps what it throws to a status, recording the message as kiln_last_error(); clears the
// last error first. Catches everything, so that nothing unwinds into C.
template <typename F> kiln_status guarded(F&& body) noexcept;
kiln_status status_of_current_exception() noexcept; // inside a catch (...)

// Stores `text` in this thread's slot for returned strings and returns a pointer valid until the next call.
const char* return_string(std::string text);

// Runs `call` (which validates, then launches): where there is no GPU, kiln's NoGpuError (thrown only once
// the call's arguments were checked) becomes KILN_ERROR_UNAVAILABLE; any other mistake, a workspace too small
// among them, stays a kiln::Error (KILN_ERROR) whether a GPU exists or not.
template <typename Call> void on_gpu(const char* what, Call&& call) {
  try {
    call();
  } catch (const rt::NoGpuError& e) {
    throw Unavailable(std::string(what) + " needs a GPU: " + e.what());
  }
}

// The pointer argument `p` named `what` must not be null (InvalidArgument otherwise).
template <typename T> const T& require(const T* p, const char* what) {
  if (p == nullptr)
    throw InvalidArgument(std::string(what) + " must not be NULL");
  return *p;
}

DType dtype_from_c(int32_t dtype, const char* what);
// A kiln_causal as attention::Causal; InvalidArgument naming `what` for another value.
attention::Causal causal_from_c(int32_t causal, const char* what);
int32_t dtype_to_c(DType dtype);
// A tensor for kiln::attention; its data pointer is the address as an integer (host or device).
attention::TensorRef tensor_ref(const kiln_tensor& t, const char* what);
// Whether `size` is one of the ABI versions' sizes of kiln_attention_options (kiln_c.h: V1, V2, V3 or the
// whole struct), and InvalidArgument unless options.struct_size is.
bool known_options_size(size_t size);
void check_struct_size(const kiln_attention_options& options);
// The same for ABI version 5's structs, whose one known size is the whole struct.
bool known_varlen_batch_size(size_t size);
bool known_decode_options_size(size_t size);
void check_struct_size(const kiln_varlen_batch& batch);
void check_struct_size(const kiln_decode_options& options);
// The options as kiln::attention's (struct_size checked; defaults when `options` is null), the mods and the
// dsink tensor of a version-3 struct included. A version-4 struct's block mask is not read here: which kind
// a call takes depends on the call (capi/block_mask_c.h).
attention::BackwardOptions attention_options(const kiln_attention_options* options);
// options.mods (parsed by parse_mod_specs) and options.mod_tensors as o.mods and o.mod_tensors: a kiln::Error
// for a bad spec or a name given twice, InvalidArgument for a malformed array.
void add_mods(attention::AttentionOptions& o, const kiln_attention_options& options);
// A kiln_autotune as rt::AutotuneMode (nullopt for KILN_AUTOTUNE_ENV); InvalidArgument naming `what`
// otherwise.
std::optional<rt::AutotuneMode> autotune_mode(int32_t autotune, const char* what);
// NAME=VALUE overrides as a map; a name given twice is a kiln::Error.
std::map<std::string, int64_t> param_overrides(const kiln_param* params, int32_t num_params);

// The autotuner's pick as kiln_c.h's JSON ({"kernel", "config", "source", "ms", "key", "table"}).
std::string tuned_launch_json(const std::string& kernel, const TunedLaunch& chosen);

template <typename F> kiln_status guarded(F&& body) noexcept {
  try {
    set_last_error("");
    body();
    return KILN_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

} // namespace kiln::capi
