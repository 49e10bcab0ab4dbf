// Fuzzes what the `kiln` command line does with the words a user types (tools/cli.h, tools/kernel_problem.h,
// tools/attention_runs.h): NAME=VALUE lists (--set, --shape), a registered kernel's problem built from them
// (its config checked, its sizes, its grid) and that problem's launch plan, as `kiln model` and `kiln tune`
// build them, the dtype, causal-mode and arch names, and attention mod specs (`--mod`, the C ABI's and
// Python's mods: library mods and expressions, whose DSL functions and references are then built and
// evaluated). The input's first byte picks the parser, its second the kernel; the rest is lines of text. A
// bad value must be a kiln::Error; any other exception, a crash, a hang or a sanitizer report is a bug.
#include "codegen/target.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/builtin.h"
#include "support/error.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"
#include "tools/kernel_problem.h"

#include "tests/fuzz/fuzz_input.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace kiln;

namespace {

enum class Parser : uint8_t { Assignments, ShapeAndSet, KernelProblem, Names, ModSpecs, kLast = ModSpecs };

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    out.push_back(text.substr(start, end - start));
  out.push_back(text.substr(start));
  return out;
}

// The lines before the first empty one (the --shape items) and those after it (the --set items).
std::pair<std::vector<std::string>, std::vector<std::string>>
shape_and_set(const std::vector<std::string>& items) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  bool in_sets = false;
  for (const std::string& item : items) {
    if (item.empty() && !in_sets)
      in_sets = true;
    else
      (in_sets ? out.second : out.first).push_back(item);
  }
  return out;
}

void parse(Parser parser, const KernelDef& def, const std::string& text) {
  switch (parser) {
  case Parser::Assignments:
    cli::parse_assignments(lines(text), "--set");
    break;
  case Parser::ShapeAndSet: {
    const auto [shape, sets] = shape_and_set(lines(text));
    cli::shape_and_set_assignments(shape, sets);
    break;
  }
  case Parser::KernelProblem: {
    const auto [shape, sets] = shape_and_set(lines(text));
    const cli::KernelProblem problem =
        cli::parse_kernel_problem(def, cli::shape_and_set_assignments(shape, sets));
    problem.sizes_text();
    cli::describe_plan(cli::plan_for(problem, problem.config));
    break;
  }
  case Parser::ModSpecs: {
    const AttentionMods mods = parse_mod_specs(text).mods;
    (void)mods.identity(); // runs every mod's DSL function on a probe tile
    ModPoint point{
        1, 1, 3, 2, 8, 9, 2, 1, [](const std::string&, std::initializer_list<int64_t>) { return 0.5; }};
    for (const ScoreMod& m : mods.score)
      if (m.reference)
        (void)m.reference(0.25, point);
    for (const MaskMod& m : mods.mask)
      if (m.reference)
        (void)m.reference(point);
    break;
  }
  case Parser::Names:
    for (const std::string& word : lines(text)) {
      parse_dtype(word);
      for (auto* parse_name : {+[](const std::string& w) { cli::parse_causal(w, "--causal"); },
                               +[](const std::string& w) { cli::parse_attention_dtype(w, "--dtype"); },
                               +[](const std::string& w) { Target::parse(w); }}) {
        try {
          parse_name(word);
        } catch (const Error&) {
        }
      }
    }
    break;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::FuzzInput in(data, size);
  const Parser parser = in.choice<Parser>();
  const std::vector<KernelDef>& kernels = builtin_kernels().all();
  const KernelDef& def = kernels[in.integer<size_t>(0, kernels.size() - 1)];
  try {
    parse(parser, def, in.rest());
  } catch (const Error&) {
    // refused, naming what was wrong
  }
  return 0;
}
