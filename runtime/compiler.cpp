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

namespace {

// Little-endian field readers over an ELF image; out-of-range reads return nullopt instead of faulting.
template <typename T> std::optional<T> read_le(std::string_view bytes, uint64_t at) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T))
    return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return static_cast<T>(v);
}

struct ElfSection {
  std::string_view name;
  std::string_view data;
};

// The sections of a 64-bit little-endian ELF, or {} when the image is not one.
std::vector<ElfSection> elf_sections(std::string_view elf) {
  if (elf.size() < 64 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 || elf[5] != 1)
    return {};
  auto shoff = read_le<uint64_t>(elf, 0x28);
  auto shentsize = read_le<uint16_t>(elf, 0x3a);
  auto shnum = read_le<uint16_t>(elf, 0x3c);
  auto shstrndx = read_le<uint16_t>(elf, 0x3e);
  if (!shoff || !shentsize || !shnum || !shstrndx || *shentsize < 64 || *shstrndx >= *shnum)
    return {};
  struct Raw {
    uint32_t name;
    uint64_t offset, size;
    uint32_t type;
  };
  std::vector<Raw> raw;
  for (uint16_t i = 0; i < *shnum; ++i) {
    uint64_t at = *shoff + uint64_t{i} * *shentsize;
    auto name = read_le<uint32_t>(elf, at);
    auto type = read_le<uint32_t>(elf, at + 4);
    auto offset = read_le<uint64_t>(elf, at + 0x18);
    auto size = read_le<uint64_t>(elf, at + 0x20);
    if (!name || !type || !offset || !size)
      return {};
    raw.push_back({*name, *offset, *size, *type});
  }
  auto contents = [&](const Raw& r) -> std::string_view {
    constexpr uint32_t kNoBits = 8;  // SHT_NOBITS (.nv.shared.*) occupies no file bytes
    if (r.type == kNoBits || r.offset > elf.size() || elf.size() - r.offset < r.size)
      return {};
    return elf.substr(r.offset, r.size);
  };
  std::string_view names = contents(raw[*shstrndx]);
  std::vector<ElfSection> out;
  for (const Raw& r : raw) {
    std::string_view name;
    if (r.name < names.size())
      name = names.substr(r.name, names.find('\0', r.name) - r.name);
    out.push_back({name, contents(r)});
  }
  return out;
}

} // namespace

ResourceUsage read_cubin_usage(std::string_view cubin, std::string_view lowered_name) {
  ResourceUsage u;
  std::vector<ElfSection> sections = elf_sections(cubin);
  std::string_view symtab, strtab, info;
  for (const ElfSection& s : sections) {
    if (s.name == ".symtab")
      symtab = s.data;
    else if (s.name == ".strtab")
      strtab = s.data;
    else if (s.name == ".nv.info")
      info = s.data;
  }
  // The index of lowered_name in .symtab: .nv.info attributes name their function by it.
  std::optional<uint32_t> symbol;
  for (uint64_t at = 0; at + 24 <= symtab.size(); at += 24) {
    uint32_t name = *read_le<uint32_t>(symtab, at);
    if (name < strtab.size() && strtab.substr(name, strtab.find('\0', name) - name) == lowered_name) {
      symbol = static_cast<uint32_t>(at / 24);
      break;
    }
  }
  if (!symbol)
    return u;
  // .nv.info holds records {u8 format, u8 attribute, payload}; format 4 carries a u16 size then that many
  // bytes, formats 2 and 3 a 2-byte value, format 1 nothing.
  constexpr uint8_t kFormatSizedValue = 4, kFormatNoValue = 1;
  constexpr uint8_t kAttrRegCount = 0x2f, kAttrFrameSize = 0x11;
  for (uint64_t at = 0; at + 2 <= info.size();) {
    uint8_t format = static_cast<uint8_t>(info[at]);
    uint8_t attribute = static_cast<uint8_t>(info[at + 1]);
    if (format == kFormatNoValue) {
      at += 2;
      continue;
    }
    if (format != kFormatSizedValue) {
      at += 4;
      continue;
    }
    auto size = read_le<uint16_t>(info, at + 2);
    if (!size)
      break;
    if (*size == 8 && read_le<uint32_t>(info, at + 4) == symbol) {
      auto value = read_le<uint32_t>(info, at + 8);
      if (attribute == kAttrRegCount && value)
        u.registers = static_cast<int>(*value);
      if (attribute == kAttrFrameSize && value)
        u.stack_frame_bytes = *value;
    }
    at += 4 + *size;
  }
  return u;
}

// ptxas refuses an instruction that needs more registers than __launch_bounds__ leaves each thread; say what
// sets that cap, which the log does not.
std::string register_limit_hint(std::string_view log) {
  if (log.find("Insufficient registers") == std::string::npos)
    return "";
  return "\nthe kernel's __launch_bounds__(threads, MIN_BLOCKS_PER_SM) caps each thread at 65536 / (threads x "
         "MIN_BLOCKS_PER_SM) registers (at most 255), fewer than this kernel needs: lower MIN_BLOCKS_PER_SM, "
         "num_warps or the tiles";
}

std::vector<std::string> ptxas_product_advisories(std::string_view log) {
  std::vector<std::string> out;
  for (std::string_view line : split_lines(log)) {
    if (line.find("(C75") == std::string_view::npos || line.find("(C7519)") != std::string_view::npos)
      continue;
    const size_t first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
    out.emplace_back(line.substr(first, last - first + 1));
  }
  return out;
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
    // The first line is what a one-line report (the tuner's table) shows: it names a register cap when that is why.
    const std::string hint = register_limit_hint(log);
    std::string msg = fmt::format("NVRTC failed to compile kernel '{}' for {} (NVRTC {}): {}{}\n", req.kernel_name,
                                  req.arch, n.version_string(), n.nvrtcGetErrorString(result),
                                  hint.empty() ? "" : " (an instruction needs more registers than the kernel's "
                                                      "__launch_bounds__ leave a thread)");
    msg += quote_error_lines(log, req.source);
    msg += "NVRTC log:\n" + log;
    msg += hint;
    try {
      auto paths = dump_artifacts(req.kernel_name, {{"cu", req.source}, {"log", log}});
      if (!paths.empty())
        msg += fmt::format("\nsource and log dumped to {}", paths.front());
    } catch (const Error& e) {
      msg += fmt::format("\n(could not dump the failing source: {})", e.what());
    }
    throw Error(msg);
  }

  // ptxas ignores setmaxnreg where it cannot tell the register count at entry, and says so only as a warning;
  // a warp-specialised kernel whose consumers' .inc then waits on registers the producer never released could
  // hang, so the warning is an error here.
  if (log.find("C7508") != std::string::npos)
    fail("NVRTC compiled kernel '{}' for {}, but ptxas ignored its setmaxnreg (warning C7508): the register count "
         "at entry must be capped (__launch_bounds__ with its second argument)\nNVRTC log:\n{}",
         req.kernel_name, req.arch, log);
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
  if (out.usage.registers < 0) {
    ResourceUsage from_cubin = read_cubin_usage(out.cubin, out.lowered_name);
    out.usage.registers = from_cubin.registers;
    out.usage.stack_frame_bytes = from_cubin.stack_frame_bytes;
  }
  return out;
}

} // namespace kiln::rt
