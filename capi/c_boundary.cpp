#include "capi/c_boundary.h"

#include "kernels/attention/attention_mod_spec.h"
#include "support/error.h"

#include <fmt/format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <cmath>

#include <new>

namespace kiln::capi {
namespace {

thread_local std::string last_error;
thread_local std::string returned;

} // namespace

void set_last_error(const std::string& message) { last_error = message; }
const char* last_error_message() { return last_error.c_str(); }

const char* return_string(std::string text) {
  returned = std::move(text);
  return returned.c_str();
}

kiln_status status_of_current_exception() noexcept {
  // Each handler copies the message first; a failure to do that (no memory) still returns a status.
  try {
    try {
      throw;
    } catch (const InvalidArgument& e) {
      last_error = e.what();
      return KILN_ERROR_INVALID_ARGUMENT;
    } catch (const Unavailable& e) {
      last_error = e.what();
      return KILN_ERROR_UNAVAILABLE;
    } catch (const Error& e) {
      last_error = e.what();
      return KILN_ERROR;
    } catch (const InternalError& e) {
      last_error = e.what();
      return KILN_ERROR_INTERNAL;
    } catch (const std::bad_alloc&) {
      last_error = "out of host memory";
      return KILN_ERROR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
      last_error = std::string("unexpected failure: ") + e.what();
      return KILN_ERROR_UNKNOWN;
    } catch (...) {
      last_error = "unexpected failure (not a std::exception)";
      return KILN_ERROR_UNKNOWN;
    }
  } catch (...) {
    return KILN_ERROR_OUT_OF_MEMORY; // the message could not be stored
  }
}

DType dtype_from_c(int32_t dtype, const char* what) {
  switch (dtype) {
  case KILN_I1:
    return DType::i1;
  case KILN_U8:
    return DType::u8;
  case KILN_I32:
    return DType::i32;
  case KILN_I64:
    return DType::i64;
  case KILN_F16:
    return DType::f16;
  case KILN_BF16:
    return DType::bf16;
  case KILN_F32:
    return DType::f32;
  case KILN_F64:
    return DType::f64;
  default:
    break;
  }
  throw InvalidArgument(fmt::format("{}: dtype must be a kiln_dtype from {} (KILN_I1) to {} (KILN_F64); got {}",
                                    what, static_cast<int>(KILN_I1), static_cast<int>(KILN_F64), dtype));
}

int32_t dtype_to_c(DType dtype) {
  switch (dtype) {
  case DType::i1:
    return KILN_I1;
  case DType::u8:
    return KILN_U8;
  case DType::i32:
    return KILN_I32;
  case DType::i64:
    return KILN_I64;
  case DType::f16:
    return KILN_F16;
  case DType::bf16:
    return KILN_BF16;
  case DType::f32:
    return KILN_F32;
  case DType::f64:
    return KILN_F64;
  }
  throw InternalError("dtype_to_c: unknown DType");
}

attention::TensorRef tensor_ref(const kiln_tensor& t, const char* what) {
  if (t.ndim < 0 || t.ndim > KILN_MAX_DIMS)
    throw InvalidArgument(fmt::format("{}: ndim must be from 0 to {}; got {}", what, KILN_MAX_DIMS, t.ndim));
  attention::TensorRef r;
  r.data = reinterpret_cast<uint64_t>(t.data);
  r.dtype = dtype_from_c(t.dtype, what);
  r.shape.assign(t.shape, t.shape + t.ndim);
  r.strides.assign(t.strides, t.strides + t.ndim);
  return r;
}

bool known_options_size(size_t size) {
  // Version 4 is the whole struct; versions 1 to 3 end earlier (the fields past them keep their defaults);
  // any other size comes from a newer header than this library, or from no header at all.
  return size == sizeof(kiln_attention_options) || size == KILN_ATTENTION_OPTIONS_V1_SIZE ||
         size == KILN_ATTENTION_OPTIONS_V2_SIZE || size == KILN_ATTENTION_OPTIONS_V3_SIZE;
}

void check_struct_size(const kiln_attention_options& options) {
  const size_t v1 = KILN_ATTENTION_OPTIONS_V1_SIZE, v2 = KILN_ATTENTION_OPTIONS_V2_SIZE,
               v3 = KILN_ATTENTION_OPTIONS_V3_SIZE;
  if (!known_options_size(options.struct_size))
    throw InvalidArgument(fmt::format("kiln_attention_options.struct_size must be {} (call "
                                      "kiln_attention_options_init), or {} / {} / {} for a version-1 / 2 / 3 "
                                      "caller; got {}",
                                      sizeof(kiln_attention_options), v1, v2, v3, options.struct_size));
}

bool known_varlen_batch_size(size_t size) { return size == sizeof(kiln_varlen_batch); }
bool known_decode_options_size(size_t size) { return size == sizeof(kiln_decode_options); }

void check_struct_size(const kiln_varlen_batch& batch) {
  if (!known_varlen_batch_size(batch.struct_size))
    throw InvalidArgument(
        fmt::format("kiln_varlen_batch.struct_size must be {} (call kiln_varlen_batch_init); got {}",
                    sizeof(kiln_varlen_batch), batch.struct_size));
}

void check_struct_size(const kiln_decode_options& options) {
  if (!known_decode_options_size(options.struct_size))
    throw InvalidArgument(
        fmt::format("kiln_decode_options.struct_size must be {} (call kiln_decode_options_init); got {}",
                    sizeof(kiln_decode_options), options.struct_size));
}

attention::Causal causal_from_c(int32_t causal, const char* what) {
  switch (causal) {
  case KILN_CAUSAL_NONE:
    return attention::Causal::None;
  case KILN_CAUSAL_TOP_LEFT:
    return attention::Causal::TopLeft;
  case KILN_CAUSAL_BOTTOM_RIGHT:
    return attention::Causal::BottomRight;
  default:
    break;
  }
  throw InvalidArgument(fmt::format("{} must be KILN_CAUSAL_NONE (0), KILN_CAUSAL_TOP_LEFT (1) or "
                                    "KILN_CAUSAL_BOTTOM_RIGHT (2); got {}",
                                    what, causal));
}

attention::BackwardOptions attention_options(const kiln_attention_options* options) {
  attention::BackwardOptions o;
  if (options == nullptr)
    return o;
  check_struct_size(*options);
  o.causal = causal_from_c(options->causal, "kiln_attention_options.causal");
  if (options->layout != KILN_LAYOUT_BHSD && options->layout != KILN_LAYOUT_BSHD)
    throw InvalidArgument(fmt::format(
        "kiln_attention_options.layout must be KILN_LAYOUT_BHSD (0) or KILN_LAYOUT_BSHD (1); got {}",
        options->layout));
  o.layout = options->layout == KILN_LAYOUT_BSHD ? "bshd" : "bhsd";
  o.deterministic = options->deterministic != 0;
  o.tf32 = options->tf32 != 0;
  o.sm_scale = options->scale;
  o.stream = options->stream;
  if (options->struct_size >= KILN_ATTENTION_OPTIONS_V2_SIZE) {
    o.exact_masked_v = options->exact_masked_v != 0;
    o.autotune = autotune_mode(options->autotune, "kiln_attention_options.autotune");
  }
  if (options->struct_size >= KILN_ATTENTION_OPTIONS_V3_SIZE) {
    add_mods(o, *options);
    if (options->dsink != nullptr)
      o.dsink = tensor_ref(*options->dsink, "kiln_attention_options.dsink");
  }
  return o;
}

void add_mods(attention::AttentionOptions& o, const kiln_attention_options& options) {
  if (options.num_mod_tensors < 0)
    throw InvalidArgument(
        fmt::format("kiln_attention_options.num_mod_tensors must be >= 0; got {}", options.num_mod_tensors));
  if (options.num_mod_tensors > 0 && options.mod_tensors == nullptr)
    throw InvalidArgument("kiln_attention_options.mod_tensors must not be NULL when num_mod_tensors > 0");
  if (options.mods != nullptr) {
    try {
      o.mods = parse_mod_specs(options.mods).mods;
    } catch (const Error& e) {
      fail("kiln_attention_options.mods: {}", e.what());
    }
  }
  for (int32_t i = 0; i < options.num_mod_tensors; ++i) {
    const kiln_mod_tensor& m = options.mod_tensors[i];
    const std::string what = fmt::format("kiln_attention_options.mod_tensors[{}]", i);
    if (m.name == nullptr)
      throw InvalidArgument(what + ".name must not be NULL");
    const attention::TensorRef t = tensor_ref(m.tensor, (what + " ('" + m.name + "')").c_str());
    if (!o.mod_tensors.emplace(m.name, t).second)
      fail("{}: the mod tensor '{}' is given twice; expected each name once", what, m.name);
  }
}

std::optional<rt::AutotuneMode> autotune_mode(int32_t autotune, const char* what) {
  switch (autotune) {
  case KILN_AUTOTUNE_ENV:
    return std::nullopt;
  case KILN_AUTOTUNE_OFF:
    return rt::AutotuneMode::Off;
  case KILN_AUTOTUNE_CACHED:
    return rt::AutotuneMode::Cached;
  case KILN_AUTOTUNE_ON:
    return rt::AutotuneMode::On;
  case KILN_AUTOTUNE_FORCE:
    return rt::AutotuneMode::Force;
  default:
    break;
  }
  throw InvalidArgument(fmt::format("{} must be a kiln_autotune from {} (KILN_AUTOTUNE_ENV) to {} "
                                    "(KILN_AUTOTUNE_FORCE); got {}",
                                    what, static_cast<int>(KILN_AUTOTUNE_ENV), static_cast<int>(KILN_AUTOTUNE_FORCE),
                                    autotune));
}

std::string tuned_launch_json(const std::string& kernel, const TunedLaunch& chosen) {
  const rt::TuneResult& r = *chosen.result;
  llvm::json::Object config;
  for (const auto& [name, value] : chosen.config.params)
    config[name] = value;
  config["num_warps"] = chosen.config.num_warps;
  config["num_stages"] = chosen.config.num_stages;
  llvm::json::Array table;
  for (const rt::CandidateResult& c : r.table) {
    llvm::json::Object row{{"config", c.id}, {"status", rt::candidate_status_name(c.status)}};
    if (std::isfinite(c.ms))
      row["ms"] = c.ms;
    if (!c.reason.empty())
      row["reason"] = c.reason;
    table.push_back(std::move(row));
  }
  llvm::json::Object out{{"kernel", kernel},
                         {"config", std::move(config)},
                         {"source", rt::tune_source_name(r.source)},
                         {"key", r.key.key},
                         {"table", std::move(table)}};
  if (r.best)
    out["ms"] = r.best_ms;
  return llvm::formatv("{0}", llvm::json::Value(std::move(out))).str();
}

std::map<std::string, int64_t> param_overrides(const kiln_param* params, int32_t num_params) {
  if (num_params < 0)
    throw InvalidArgument(fmt::format("num_params must be >= 0; got {}", num_params));
  if (num_params > 0 && params == nullptr)
    throw InvalidArgument("params must not be NULL when num_params > 0");
  std::map<std::string, int64_t> out;
  for (int32_t i = 0; i < num_params; ++i) {
    if (params[i].name == nullptr)
      throw InvalidArgument(fmt::format("params[{}].name must not be NULL", i));
    if (!out.emplace(params[i].name, params[i].value).second)
      fail("parameter '{}' is given twice", params[i].name);
  }
  return out;
}

} // namespace kiln::capi
