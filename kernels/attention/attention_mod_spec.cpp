#include "kernels/attention/attention_mod_spec.h"

#include "kernels/attention/attention_mod_expr.h"
#include "kernels/attention/attention_mod_library.h"
#include "support/error.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace kiln {

namespace {

constexpr const char* kHelp = "causal[=top-left|bottom-right], sliding_window=LEFT[,RIGHT], prefix_lm=N, "
                              "softcap=CAP, alibi, document, bias[=f32|f16|bf16], sinks, score=EXPR, mask=EXPR";

// The whole of `text` as an integer, else an Error naming the spec and what it takes.
int64_t parse_int(const std::string& spec, const std::string& text, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    fail("mod spec '{}': '{}' is not {}", spec, text, what);
  return v;
}

double parse_number(const std::string& spec, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    fail("mod spec '{}': '{}' is not a number", spec, text);
  return v;
}

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n");
  if (first == std::string::npos)
    return "";
  return s.substr(first, s.find_last_not_of(" \t\n") - first + 1);
}

} // namespace

const char* mod_spec_help() { return kHelp; }

void add_mod_spec(AttentionMods& mods, const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string name = spec.substr(0, eq);
  const bool has_arg = eq != std::string::npos;
  const std::string arg = has_arg ? spec.substr(eq + 1) : "";
  auto no_arg = [&] {
    if (has_arg)
      fail("mod spec '{}': '{}' takes no argument; got '{}'", spec, name, arg);
  };
  auto need_arg = [&](const char* what) {
    if (!has_arg)
      fail("mod spec '{}': '{}' takes an argument: {}=<{}>", spec, name, name, what);
  };
  if (name == "causal") {
    if (!has_arg || arg == "top-left")
      mods.mask.push_back(causal_mask(false));
    else if (arg == "bottom-right")
      mods.mask.push_back(causal_mask(true));
    else
      fail("mod spec '{}': causal takes top-left or bottom-right; got '{}'", spec, arg);
  } else if (name == "sliding_window") {
    need_arg("LEFT[,RIGHT]");
    const size_t comma = arg.find(',');
    const int64_t left = parse_int(spec, arg.substr(0, comma), "a number of keys");
    const int64_t right = comma == std::string::npos ? 0 : parse_int(spec, arg.substr(comma + 1), "a number of keys");
    mods.mask.push_back(sliding_window(left, right));
  } else if (name == "prefix_lm") {
    need_arg("N");
    mods.mask.push_back(prefix_lm(parse_int(spec, arg, "a number of keys")));
  } else if (name == "softcap") {
    need_arg("CAP");
    mods.score.push_back(softcap(parse_number(spec, arg)));
  } else if (name == "alibi") {
    no_arg();
    mods.score.push_back(alibi());
  } else if (name == "document") {
    no_arg();
    mods.mask.push_back(document_mask());
  } else if (name == "sinks") {
    no_arg();
    mods.sink.push_back(attention_sinks());
  } else if (name == "bias") {
    const DType dt = !has_arg || arg == "f32" ? DType::f32
                     : arg == "f16"           ? DType::f16
                     : arg == "bf16"          ? DType::bf16
                                              : DType::i1;
    if (dt == DType::i1)
      fail("mod spec '{}': bias takes f32, f16 or bf16; got '{}'", spec, arg);
    mods.score.push_back(additive_bias(dt));
  } else if (name == "score") {
    need_arg("EXPR");
    mods.score.push_back(score_mod_from_expression(arg));
  } else if (name == "mask") {
    need_arg("EXPR");
    mods.mask.push_back(mask_mod_from_expression(arg));
  } else {
    fail("mod spec '{}': unknown mod '{}'; expected one of {}", spec, name, kHelp);
  }
}

ModSpecs parse_mod_specs(const std::string& specs) {
  ModSpecs out;
  size_t start = 0;
  while (start <= specs.size()) {
    const size_t semi = std::min(specs.find(';', start), specs.size());
    const std::string spec = trimmed(specs.substr(start, semi - start));
    if (!spec.empty())
      add_mod_spec(out.mods, spec);
    start = semi + 1;
  }
  try {
    out.tensors = out.mods.tensors();
  } catch (const Error& e) {
    fail("mod specs '{}': {}", specs, e.what());
  }
  return out;
}

} // namespace kiln
