// Autotuned launches: candidates and tuning keys from a KernelDef, and the prune/compile/time hooks.
#include "jit/tuned_kernel.h"

#include "jit/compile_request.h"
#include "support/error.h"

#include <algorithm>
#include <iterator>
#include <set>

namespace kiln {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// `base` checked against the kernel's params (an Error naming an unknown one or a value outside its range) and
// completed with defaults.
Config complete_base(const KernelDef& def, const Config& base) {
  Config c = def.with_overrides(def.default_config(), base.params);
  c.num_warps = base.num_warps;
  c.num_stages = base.num_stages;
  def.check(c);
  return c;
}

std::vector<Config> space_of(const KernelDef& def) {
  return def.config_space ? def.config_space() : std::vector<Config>{};
}

// Per-candidate state shared by the hooks; each slot is touched by one pool thread at a time.
struct CandidateSlot {
  std::optional<Kernel> ir;
  GeneratedKernel generated;
  std::string codegen_error;
  std::string beyond_target; // why the target cannot run this config at all (a TargetLimitError): pruned
  rt::CompiledKernel compiled;
  std::shared_ptr<JitKernel> loaded;
};

// Whether the current context still works after a failed launch: resource failures (too many registers or
// too much shared memory for the launch) leave it usable and only disqualify the candidate; a sticky error
// (an illegal address) does not, and must stop the tuning.
bool context_usable() { return rt::driver().cuCtxSynchronize() == rt::cu::kSuccess; }

} // namespace

std::vector<std::string> tuned_params(const KernelDef& def, const std::vector<Config>& space) {
  const Config defaults = def.default_config();
  std::set<std::string> names;
  for (const Config& c : space)
    for (const auto& [name, value] : c.params)
      names.insert(name);
  std::vector<std::string> tuned;
  for (const std::string& name : names) {
    std::set<int64_t> values;
    bool everywhere = true;
    for (const Config& c : space) {
      auto it = c.params.find(name);
      everywhere &= it != c.params.end();
      if (it != c.params.end())
        values.insert(it->second);
    }
    // One value in every config is the space's choice too where it is not the default (a space of
    // BLOCK_N=4096 configs): the base's default must not replace it.
    auto d = defaults.params.find(name);
    const bool pinned = values.size() == 1 && (d == defaults.params.end() || d->second != *values.begin());
    if (values.size() > 1 || !everywhere || pinned)
      tuned.push_back(name);
  }
  return tuned;
}

std::vector<Config> tuning_candidates(const KernelDef& def, const Config& base_in) {
  const Config base = complete_base(def, base_in);
  const std::vector<Config> space = space_of(def);
  if (space.empty())
    return {base};
  const std::vector<std::string> tuned = tuned_params(def, space);
  std::vector<Config> out;
  for (const Config& c : space) {
    Config cand = base;
    for (const std::string& name : tuned)
      if (auto it = c.params.find(name); it != c.params.end())
        cand.params[name] = it->second;
    cand.num_warps = c.num_warps;
    cand.num_stages = c.num_stages;
    out.push_back(cand);
  }
  return out;
}

std::string tuning_key_text(const KernelDef& def, const SizeArgs& sizes, const Config& base_in) {
  auto known = [&](const std::string& name) {
    return std::find(def.size_args.begin(), def.size_args.end(), name) != def.size_args.end();
  };
  for (const auto& [name, value] : sizes)
    if (!known(name))
      fail("kernel '{}' has no size argument '{}'; its size arguments are: {}", def.name, name,
           join(def.size_args));
  std::string key;
  for (const std::string& name : def.tuning_key) {
    if (!known(name))
      fail("kernel '{}': tuning key '{}' is not one of its size arguments ({})", def.name, name,
           join(def.size_args));
    auto it = sizes.find(name);
    if (it == sizes.end())
      fail("kernel '{}': size argument '{}' is part of the tuning key but was not given; pass all of: {}",
           def.name, name, join(def.tuning_key));
    key += fmt::format("{}{}={}", key.empty() ? "" : " ", name,
                       def.bucket ? def.bucket(name, it->second) : it->second);
  }
  const Config base = complete_base(def, base_in);
  const std::vector<std::string> tuned = tuned_params(def, space_of(def));
  // The problem-fixed params after a bar, only where there are some: a key of sizes alone ends in no "|".
  std::string fixed;
  for (const auto& [name, value] : base.params)
    if (std::find(tuned.begin(), tuned.end(), name) == tuned.end())
      fixed += fmt::format("{}{}={}", fixed.empty() ? "" : " ", name, value);
  if (!fixed.empty())
    key += (key.empty() ? "| " : " | ") + fixed;
  return key;
}

std::string candidate_label(const KernelDef& def, const Config& c, const std::vector<std::string>& tuned) {
  std::string tiles, others;
  for (const std::string& name : tuned) {
    const int64_t v = c.get(name);
    if (name.rfind("BLOCK_", 0) == 0) {
      tiles += fmt::format("B{}={} ", name.substr(6), v);
      continue;
    }
    auto d =
        std::find_if(def.params.begin(), def.params.end(), [&](const ParamDef& p) { return p.name == name; });
    if (d == def.params.end() || d->default_value != v)
      others += fmt::format(" {}={}", name, v);
  }
  return tiles + fmt::format("w={} s={}", c.num_warps, c.num_stages) + others;
}

std::string device_prune_reason(const Config& config, int64_t shared_bytes, const rt::DeviceInfo& device) {
  if (shared_bytes > device.max_shared_per_block_optin)
    return fmt::format("needs {} bytes of shared memory; device '{}' allows {} per block (opt-in limit)",
                       shared_bytes, device.name, device.max_shared_per_block_optin);
  // __launch_bounds__(threads, MIN_BLOCKS_PER_SM) promises that many resident CTAs and ptxas caps registers
  // for it; when their shared memory cannot fit on one SM, fewer reside and the cap costs registers for
  // nothing.
  const int64_t min_blocks = config.get_or("MIN_BLOCKS_PER_SM", 1);
  if (min_blocks > 1 && Target::ctas_by_shared_memory(shared_bytes, device.max_shared_per_sm) < min_blocks)
    return fmt::format("MIN_BLOCKS_PER_SM={} needs {} x ({} + {} reserved) bytes of shared memory on one SM; device "
                       "'{}' has {}",
                       min_blocks, min_blocks, shared_bytes, Target::kReservedSharedBytesPerBlock, device.name,
                       device.max_shared_per_sm);
  return "";
}

KernelTuner::KernelTuner(rt::CompileCache& compile_cache, rt::AutotunerOptions options)
    : compile_cache_(compile_cache), autotuner_(compile_cache.dir(), std::move(options)) {}

namespace {

// The keys of chosen_ for a space: a pick (mode off's default apart from the others) and a cached-mode miss.
std::string pick_key(const std::string& space, rt::AutotuneMode mode) {
  return (mode == rt::AutotuneMode::Off ? "off:" : "picked:") + space;
}
std::string cached_default_key(const std::string& space) { return "cached-default:" + space; }

} // namespace

const KernelTuner::Chosen* KernelTuner::remembered(const std::string& space, rt::AutotuneMode mode) const {
  // Mode off keys its default separately; force always re-tunes; a cached miss (the default, for now) is kept
  // under a key of its own that only mode cached reads, so that a later call in mode on still tunes while
  // repeated cached calls (a CUDA-graph capture's) neither generate code nor load a module again.
  if (mode == rt::AutotuneMode::Force)
    return nullptr;
  auto it = chosen_.find(pick_key(space, mode));
  if (it == chosen_.end() && mode == rt::AutotuneMode::Cached)
    it = chosen_.find(cached_default_key(space));
  return it == chosen_.end() ? nullptr : &it->second;
}

TunedLaunch KernelTuner::select(const KernelDef& def, const Config& base_in, const SizeArgs& sizes,
                                const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs,
                                const TuneOptions& options) {
  const rt::AutotuneMode mode = options.mode ? *options.mode : rt::autotune_mode_from_env();
  for (const OutputArg& o : outputs)
    if (o.index >= args.size() || args[o.index].kind != LaunchArg::Kind::Pointer || o.bytes == 0 ||
        o.bytes_before > args[o.index].ptr)
      fail("kernel '{}': output argument {} must name one of the {} launch arguments, a pointer, with a size "
           "in "
           "bytes above 0 (got {} bytes)",
           def.name, o.index, args.size(), o.bytes);

  const rt::DeviceInfo& device = rt::current_device();
  const std::string arch = options.arch.empty() ? device.arch : options.arch;
  // Written in place (one string, no temporaries): this key is all a repeated call builds.
  std::string call = def.name + "|";
  base_in.append_str(call);
  fmt::format_to(std::back_inserter(call), "|{}|{}", arch, device.name);
  for (const auto& [name, value] : sizes)
    fmt::format_to(std::back_inserter(call), "|{}={}", name, value);
  if (!options.codegen.all_on())
    call += "|" + options.codegen.str();
  {
    std::lock_guard lock(mutex_);
    if (auto s = spaces_.find(call); s != spaces_.end())
      if (const Chosen* c = remembered(s->second, mode))
        return TunedLaunch{c->config, c->kernel, def.grid(c->config, sizes), c->result};
  }

  const Config base = complete_base(def, base_in);
  const std::vector<Config> candidates = tuning_candidates(def, base);
  const std::vector<std::string> tuned = tuned_params(def, space_of(def));
  rt::TuneRequest request;
  // Code-generator switches change the code, so a pick made with any of them off is its own result.
  std::string key_text = tuning_key_text(def, sizes, base);
  if (!options.codegen.all_on())
    key_text += " | " + options.codegen.str();
  request.key = rt::TuningKey{def.name, key_text, arch, device.name, ""};
  for (const Config& c : candidates) {
    request.ids.push_back(c.str());
    request.labels.push_back(candidate_label(def, c, tuned));
  }
  request.flops = options.flops;
  request.bytes = options.bytes;
  request.mode = mode;

  // Picks made earlier by this object (remembered() says which it reads in which mode).
  const std::string space = request.key.hash() + ":" + rt::config_space_hash(request.ids);
  {
    std::lock_guard lock(mutex_);
    spaces_[call] = space;
    if (const Chosen* c = remembered(space, mode))
      return TunedLaunch{c->config, c->kernel, def.grid(c->config, sizes), c->result};
  }

  const Target target = Target::parse(arch);
  std::vector<CandidateSlot> slots(candidates.size());
  auto generate = [&](size_t i) {
    CandidateSlot& s = slots[i];
    try {
      s.ir = def.build(candidates[i]);
      s.generated = generate_cuda(*s.ir, target, options.codegen);
    } catch (const TargetLimitError& e) {
      s.beyond_target = e.what();
      s.codegen_error = std::string("code generation failed: ") + e.what();
    } catch (const std::exception& e) {
      s.codegen_error = std::string("code generation failed: ") + e.what();
    }
  };
  auto compile = [&](size_t i) -> rt::CompileOutcome {
    CandidateSlot& s = slots[i];
    if (!s.ir && s.codegen_error.empty())
      generate(i);
    if (!s.codegen_error.empty())
      return {s.codegen_error, -1, -1};
    s.compiled = compile_cache_.get(compile_request(s.generated, arch));
    return {"", s.compiled.usage.registers,
            s.generated.shared_bytes + std::max<int64_t>(0, s.compiled.usage.shared_bytes)};
  };
  auto load = [&](size_t i) {
    CandidateSlot& s = slots[i];
    if (!s.loaded) {
      if (s.compiled.cubin.empty()) {
        rt::CompileOutcome c = compile(i);
        if (!c.error.empty())
          fail("kernel '{}': the chosen config {} no longer compiles: {}", def.name, candidates[i].str(),
               c.error);
      }
      s.loaded = JitKernel::from_compiled(*s.ir, s.generated, s.compiled);
    }
    return s.loaded;
  };

  rt::TuneHooks hooks;
  hooks.prune = [&](size_t i) -> std::string {
    if (def.prune)
      if (std::string why = def.prune(candidates[i], sizes); !why.empty())
        return why;
    generate(i);
    if (!slots[i].beyond_target.empty())
      return slots[i].beyond_target;
    if (!slots[i].codegen_error.empty())
      return ""; // code generation failed: the compile step reports why
    if (!slots[i].generated.why_not_warp_specialized.empty())
      return "WARP_SPECIALIZE=1 does not apply (the same code as WARP_SPECIALIZE=0): " +
             slots[i].generated.why_not_warp_specialized;
    if (!slots[i].generated.why_not_persistent.empty())
      return fmt::format("PERSISTENT={} does not apply (the same code as PERSISTENT=0): {}",
                         candidates[i].get_or("PERSISTENT", 1), slots[i].generated.why_not_persistent);
    if (!slots[i].generated.why_not_pingpong.empty())
      return "PINGPONG=1 does not apply (the same code as PINGPONG=0): " + slots[i].generated.why_not_pingpong;
    if (!slots[i].generated.why_not_product_ahead.empty())
      return "PRODUCT_AHEAD=1 does not apply (the same code as PRODUCT_AHEAD=0): " +
             slots[i].generated.why_not_product_ahead;
    if (!slots[i].generated.why_not_late_product.empty())
      return "LAST_PRODUCT_LATE=1 does not apply (the same code as LAST_PRODUCT_LATE=0): " +
             slots[i].generated.why_not_late_product;
    if (!slots[i].generated.why_not_tile_barriers.empty())
      return "TILE_BARRIERS=1 does not apply (the same code as TILE_BARRIERS=0): " +
             slots[i].generated.why_not_tile_barriers;
    return device_prune_reason(candidates[i],
                               slots[i].generated.shared_bytes + slots[i].generated.static_shared_bytes, device);
  };
  hooks.compile = compile;

  // Outputs go to scratch copies of the caller's buffers (copied, so kernels that read their output see the
  // same data), allocated on the first timed candidate.
  std::vector<rt::DeviceBuffer> scratch;
  std::vector<LaunchArg> timed_args = args;
  hooks.time = [&](size_t i) -> rt::TimeOutcome {
    if (scratch.empty() && !outputs.empty())
      for (const OutputArg& o : outputs) {
        scratch.emplace_back(o.bytes_before + o.bytes);
        KILN_CU_CHECK(cuMemcpyDtoD, "copying an output buffer to the tuner's scratch copy",
                      scratch.back().ptr(), args[o.index].ptr - o.bytes_before, o.bytes_before + o.bytes);
        timed_args[o.index] = LaunchArg::pointer(scratch.back().ptr() + o.bytes_before);
      }
    try {
      std::shared_ptr<JitKernel> k = load(i);
      const Grid grid = def.grid(candidates[i], sizes);
      double ms = rt::time_kernel_ms([&](rt::Stream& stream) { k->launch(grid, timed_args, stream); },
                                     options.timing);
      return {ms, ""};
    } catch (const Error& e) {
      if (!context_usable())
        throw;
      return {0, e.what()};
    }
  };

  rt::TuneResult result = autotuner_.tune(request, hooks);
  Chosen chosen;
  if (result.best) {
    chosen.config = candidates[*result.best];
    chosen.kernel = load(*result.best);
  } else {
    // Mode off, or cached with nothing remembered: the kernel's default, compiled through the same cache. Where
    // the default exceeds this arch (shared memory: a default sized for sm_80/sm_90 on sm_86's 99 KiB), the first
    // candidate of the space that fits it runs instead; when none does, the default's error stands.
    chosen.config = base;
    try {
      Kernel ir = def.build(base);
      GeneratedKernel generated = generate_cuda(ir, target, options.codegen);
      rt::CompiledKernel compiled = compile_cache_.get(compile_request(generated, arch));
      chosen.kernel = JitKernel::from_compiled(ir, std::move(generated), std::move(compiled));
    } catch (const TargetLimitError&) {
      size_t fits = 0;
      while (fits < candidates.size() && (!hooks.prune(fits).empty() || !slots[fits].codegen_error.empty()))
        ++fits;
      if (fits == candidates.size())
        throw;
      chosen.config = candidates[fits];
      chosen.kernel = load(fits);
    }
  }
  chosen.result = std::make_shared<const rt::TuneResult>(std::move(result));
  if (mode == rt::AutotuneMode::Off || chosen.result->best) {
    std::lock_guard lock(mutex_);
    chosen_[pick_key(space, mode)] = chosen;
    ++picks_version_;
  } else if (mode == rt::AutotuneMode::Cached) {
    std::lock_guard lock(mutex_);
    chosen_[cached_default_key(space)] = chosen;
    ++picks_version_;
  }
  return TunedLaunch{chosen.config, chosen.kernel, def.grid(chosen.config, sizes), chosen.result};
}

TunedLaunch KernelTuner::launch(const KernelDef& def, const Config& base, const SizeArgs& sizes,
                                const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs,
                                const TuneOptions& options, const rt::Stream& stream) {
  TunedLaunch t = select(def, base, sizes, args, outputs, options);
  t.kernel->launch(t.grid, args, stream);
  return t;
}

} // namespace kiln
