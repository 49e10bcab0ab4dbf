// NVRTC compilation, ptxas report parsing and compile-error reports.
#include "runtime/compiler.h"

#include "runtime/dump.h"
#include "runtime/nvrtc.h"
#include "support/error.h"

#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <regex>

namespace kiln::rt {

// ---- arch ---------------------------------------------------------------------------------------------

const std::vector<std::string>& supported_archs() {
  static const std::vector<std::string> archs = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
  return archs;
}

std::string arch_for(int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0)
    return "sm_90a";
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

void validate_arch(std::string_view arch) {
  const auto& archs = supported_archs();
  if (std::find(archs.begin(), archs.end(), arch) != archs.end())
    return;
  std::string list;
  for (const auto& a : archs)
    list += (list.empty() ? "" : ", ") + a;
  fail("unsupported target arch '{}': expected one of {} (sm_<major><minor>[a], e.g. sm_90a for H100)", arch,
       list);
}

std::string virtual_arch(std::string_view arch) {
  validate_arch(arch);
  return "compute_" + std::string(arch.substr(3));
}

// ---- resource usage -----------------------------------------------------------------------------------

std::string ResourceUsage::to_json() const {
  llvm::json::Object o{{"registers", registers},
                       {"shared_bytes", shared_bytes},
                       {"stack_frame_bytes", stack_frame_bytes},
                       {"spill_store_bytes", spill_store_bytes},
                       {"spill_load_bytes", spill_load_bytes},
                       {"constant_bytes", constant_bytes},
                       {"local_bytes", local_bytes},
                       {"max_threads_per_block", max_threads_per_block}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(o)));
  os.flush();
  return out;
}

ResourceUsage ResourceUsage::from_json(std::string_view json) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!parsed)
    fail("malformed resource-usage JSON: {}", llvm::toString(parsed.takeError()));
  const llvm::json::Object* o = parsed->getAsObject();
  if (!o)
    fail("malformed resource-usage JSON: expected an object, got '{}'", json);
  ResourceUsage u;
  auto read = [&](const char* key, auto& field) {
    if (auto v = o->getInteger(key))
      field = static_cast<std::remove_reference_t<decltype(field)>>(*v);
  };
  read("registers", u.registers);
  read("shared_bytes", u.shared_bytes);
  read("stack_frame_bytes", u.stack_frame_bytes);
  read("spill_store_bytes", u.spill_store_bytes);
  read("spill_load_bytes", u.spill_load_bytes);
  read("constant_bytes", u.constant_bytes);
  read("local_bytes", u.local_bytes);
  read("max_threads_per_block", u.max_threads_per_block);
  return u;
}

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

// The decimal integer that ends at position `end` of line, or -1 when none does.
int64_t number_ending_at(std::string_view line, size_t end) {
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9')
    --begin;
  int64_t value = -1;
  if (begin == end || std::from_chars(line.data() + begin, line.data() + end, value).ec != std::errc())
    return -1;
  return value;
}

// The integer just before the first `suffix` in line ("Used 32 registers", " registers" -> 32), or -1.
int64_t number_before(std::string_view line, std::string_view suffix) {
  size_t at = line.find(suffix);
  return at == std::string_view::npos ? -1 : number_ending_at(line, at);
}

} // namespace

ResourceUsage parse_ptxas_usage(std::string_view log, std::string_view lowered_name) {
  // ptxas reports, per function:
  //   ptxas info    : Compiling entry function '<name>' for 'sm_80'
  //   ptxas info    : Function properties for <name>
  //       8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 10 registers, used 0 barriers, 4096 bytes smem, 380 bytes cmem[0]
  ResourceUsage u;
  std::string_view current;
  bool in_properties = false;
  for (std::string_view line : split_lines(log)) {
    auto name_after = [&](std::string_view marker) -> std::optional<std::string_view> {
      size_t at = line.find(marker);
      if (at == std::string_view::npos)
        return std::nullopt;
      std::string_view rest = line.substr(at + marker.size());
      if (!rest.empty() && rest.front() == '\'')
        rest = rest.substr(1, rest.find('\'', 1) == std::string_view::npos ? rest.size() - 1
                                                                           : rest.find('\'', 1) - 1);
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t'))
        rest.remove_suffix(1);
      return rest;
    };
    if (auto name = name_after("Compiling entry function ")) {
      current = *name;
      in_properties = false;
      continue;
    }
    if (auto name = name_after("Function properties for ")) {
      current = *name;
      in_properties = true;
      continue;
    }
    bool ours = lowered_name.empty() || current == lowered_name;
    if (!ours)
      continue;
    if (in_properties && line.find("bytes stack frame") != std::string_view::npos) {
      u.stack_frame_bytes = number_before(line, " bytes stack frame");
      u.spill_store_bytes = number_before(line, " bytes spill stores");
      u.spill_load_bytes = number_before(line, " bytes spill loads");
      continue;
    }
    if (line.find("Used ") != std::string_view::npos && line.find(" registers") != std::string_view::npos) {
      in_properties = false;
      u.registers = static_cast<int>(number_before(line, " registers"));
      int64_t smem = number_before(line, " bytes smem");
      u.shared_bytes = smem < 0 ? 0 : smem;  // ptxas omits smem when there is none
      int64_t cmem = 0;
      for (size_t at = line.find(" bytes cmem["); at != std::string_view::npos;
           at = line.find(" bytes cmem[", at + 1))
        cmem += std::max<int64_t>(0, number_ending_at(line, at));
      u.constant_bytes = cmem;
    }
  }
  return u;
}

std::string quote_error_lines(std::string_view log, std::string_view source, int context_lines) {
  static const std::regex error_line(R"(^(.*)\((\d+)\): (error|catastrophic error)[^:]*: (.*)$)");
  std::vector<std::string_view> src = split_lines(source);
  std::string out;
  int quoted = 0;
  for (std::string_view line : split_lines(log)) {
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_match(line.begin(), line.end(), m, error_line))
      continue;
    if (++quoted > 10) {
      out += "  (more errors follow in the log)\n";
      break;
    }
    int lineno = std::stoi(m[2].str());
    out += fmt::format("{}\n", line);
    int lo = std::max(1, lineno - context_lines);
    int hi = std::min<int>(static_cast<int>(src.size()), lineno + context_lines);
    for (int i = lo; i <= hi; ++i)
      out += fmt::format("  {} {:>5} | {}\n", i == lineno ? '>' : ' ', i, src[i - 1]);
  }
  return out;
}

// ---- compiling ----------------------------------------------------------------------------------------

std::vector<std::string> nvrtc_options(const CompileRequest& req) {
  std::vector<std::string> opts = {"--gpu-architecture=" + req.arch, "-std=c++17", "-default-device",
                                   "--ptxas-options=-v"};
  if (req.fast_math)
    opts.push_back("--use_fast_math");
  opts.insert(opts.end(), req.options.begin(), req.options.end());
  return opts;
}

namespace {

// One NVRTC program, destroyed on every path out.
class Program {
public:
  Program(Nvrtc& n, const std::string& source, const std::string& name) : n_(n) {
    n_.check(n_.nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr),
             "nvrtcCreateProgram", name);
  }
  ~Program() {
    if (prog_)
      n_.nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcResult compile(const std::vector<std::string>& options) {
    std::vector<const char*> argv;
    for (const auto& o : options)
      argv.push_back(o.c_str());
    return n_.nvrtcCompileProgram(prog_, static_cast<int>(argv.size()), argv.data());
  }
  std::string log() {
    size_t size = 0;
    n_.check(n_.nvrtcGetProgramLogSize(prog_, &size), "nvrtcGetProgramLogSize");
    std::string text(size, '\0');
    if (size > 0)
      n_.check(n_.nvrtcGetProgramLog(prog_, text.data()), "nvrtcGetProgramLog");
    while (!text.empty() && text.back() == '\0')
      text.pop_back();
    return text;
  }
  // Returns false (no throw) when NVRTC has no such output for this program.
  bool output(nvrtcResult (*size_fn)(nvrtcProgram, size_t*), nvrtcResult (*get_fn)(nvrtcProgram, char*),
              std::string& out, bool text) {
    size_t size = 0;
    if (size_fn(prog_, &size) != nvrtc_codes::kSuccess || size == 0)
      return false;
    out.assign(size, '\0');
    if (get_fn(prog_, out.data()) != nvrtc_codes::kSuccess)
      return false;
    if (text)
      while (!out.empty() && out.back() == '\0')
        out.pop_back();
    return !out.empty();
  }
  nvrtcProgram get() { return prog_; }

private:
  Nvrtc& n_;
  nvrtcProgram prog_ = nullptr;
};

std::string sanitized_file_name(const std::string& kernel_name) {
  std::string out;
  for (char c : kernel_name)
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_');
  return out + ".cu";
}

} // namespace

CompiledKernel compile_cuda(const CompileRequest& req) {
  if (req.kernel_name.empty())
    fail("compile_cuda: the kernel (entry function) name is empty; expected the name of a __global__ function");
  if (req.source.empty())
    fail("compile_cuda: kernel '{}' has empty source text", req.kernel_name);
  validate_arch(req.arch);
  Nvrtc& n = nvrtc();

  std::string file = sanitized_file_name(req.kernel_name);
  Program prog(n, req.source, file);
  n.check(n.nvrtcAddNameExpression(prog.get(), req.kernel_name.c_str()), "nvrtcAddNameExpression",
          req.kernel_name);
  std::vector<std::string> options = nvrtc_options(req);
  nvrtcResult result = prog.compile(options);
  std::string log = prog.log();
  if (result != nvrtc_codes::kSuccess) {
    std::string msg = fmt::format("NVRTC failed to compile kernel '{}' for {} (NVRTC {}): {}\n", req.kernel_name,
                                  req.arch, n.version_string(), n.nvrtcGetErrorString(result));
    msg += quote_error_lines(log, req.source);
    msg += "NVRTC log:\n" + log;
    try {
      auto paths = dump_artifacts(req.kernel_name, {{"cu", req.source}, {"log", log}});
      if (!paths.empty())
        msg += fmt::format("\nsource and log dumped to {}", paths.front());
    } catch (const Error& e) {
      msg += fmt::format("\n(could not dump the failing source: {})", e.what());
    }
    throw Error(msg);
  }

  CompiledKernel out;
  out.kernel_name = req.kernel_name;
  out.arch = req.arch;
  out.log = log;
  const char* lowered = nullptr;
  n.check(n.nvrtcGetLoweredName(prog.get(), req.kernel_name.c_str(), &lowered), "nvrtcGetLoweredName",
          fmt::format("looking up kernel '{}': is it a __global__ function in the source?", req.kernel_name));
  out.lowered_name = lowered ? lowered : req.kernel_name;
  if (!prog.output(n.nvrtcGetCUBINSize, n.nvrtcGetCUBIN, out.cubin, /*text=*/false))
    fail("NVRTC compiled kernel '{}' for {} but produced no cubin (options: --gpu-architecture must name a real "
         "sm_XX arch)",
         req.kernel_name, req.arch);
  if (req.want_ptx && !prog.output(n.nvrtcGetPTXSize, n.nvrtcGetPTX, out.ptx, /*text=*/true)) {
    // NVRTC keeps no PTX when compiling for a real arch; compile again for the virtual one.
    Program ptx_prog(n, req.source, file);
    std::vector<std::string> ptx_options = options;
    ptx_options[0] = "--gpu-architecture=" + virtual_arch(req.arch);
    if (ptx_prog.compile(ptx_options) != nvrtc_codes::kSuccess)
      fail("NVRTC compiled kernel '{}' for {} but not for {}: {}", req.kernel_name, req.arch,
           virtual_arch(req.arch), ptx_prog.log());
    if (!ptx_prog.output(n.nvrtcGetPTXSize, n.nvrtcGetPTX, out.ptx, /*text=*/true))
      fail("NVRTC produced no PTX for kernel '{}' ({})", req.kernel_name, virtual_arch(req.arch));
  }
  out.usage = parse_ptxas_usage(log, out.lowered_name);
  return out;
}

} // namespace kiln::rt
