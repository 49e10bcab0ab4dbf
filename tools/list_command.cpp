// `kiln list`: the kernels of the tool's registry (kiln's own, or a user's: kiln/tool_main.h) with their
// parameters (defaults), config-space size, size args and tuning key, and what `run` knows of it: its
// tensors' dims and whether it registers a reference for --check.
#include "tools/cli.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

namespace kiln::cli {
namespace {

llvm::cl::SubCommand list_sub("list", "List the registered kernels, their parameters and tuning keys");
llvm::cl::opt<bool> json("json", llvm::cl::desc("Machine-readable output"), llvm::cl::sub(list_sub),
                         llvm::cl::cat(kiln_category()));

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

int run_list(const KernelRegistry& kernels) {
  llvm::json::Array entries;
  std::string text;
  for (const KernelDef& d : kernels.all()) {
    const size_t space = d.config_space ? d.config_space().size() : 0;
    llvm::json::Array params;
    text += fmt::format("{}\n  {}\n  params:\n", d.name, d.summary);
    for (const ParamDef& p : d.params) {
      params.push_back(llvm::json::Object{
          {"name", p.name}, {"default", p.default_value}, {"help", p.help}, {"takes", p.expected()}});
      text += fmt::format("    {:<14} = {:<5} {} [{}]\n", p.name, p.default_value, p.help,
                          p.kind == ParamKind::Choice ? fmt::format("{} to {}", p.min, p.max) : p.expected());
    }
    text += fmt::format("    {:<14} = {:<5} {}\n", "num_warps", d.default_num_warps, "warps per program");
    text += fmt::format("    {:<14} = {:<5} {}\n", "num_stages", d.default_num_stages,
                        "pipeline depth of staged loads");
    std::vector<std::string> tensors;
    for (const auto& [name, dims] : d.tensor_dims)
      tensors.push_back(name + "[" + joined(dims) + "]");
    text += fmt::format("  config space: {} configs\n  size args:    {}\n  tuning key:   {}\n", space,
                        joined(d.size_args), joined(d.tuning_key));
    if (!tensors.empty())
      text += fmt::format("  tensors:      {}\n", joined(tensors));
    text += fmt::format("  reference:    {}\n\n", d.reference ? "yes (run --check)" : "none");
    llvm::json::Array size_args, key;
    for (const std::string& s : d.size_args)
      size_args.push_back(s);
    for (const std::string& s : d.tuning_key)
      key.push_back(s);
    entries.push_back(llvm::json::Object{{"name", d.name},
                                         {"summary", d.summary},
                                         {"params", std::move(params)},
                                         {"num_warps", d.default_num_warps},
                                         {"num_stages", d.default_num_stages},
                                         {"config_space_size", static_cast<int64_t>(space)},
                                         {"size_args", std::move(size_args)},
                                         {"tuning_key", std::move(key)},
                                         {"reference", static_cast<bool>(d.reference)}});
  }
  if (json)
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(entries))) << "\n";
  else
    llvm::outs() << text;
  return 0;
}

} // namespace

Command list_command() { return {&list_sub, run_list}; }

} // namespace kiln::cli
