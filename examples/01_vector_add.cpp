// Tutorial 01: vector add. A kernel is written for ONE program (one CTA) over a tile of BLOCK elements; the
// grid says how many programs run. Runs on the GPU where one is usable, in the interpreter otherwise, and
// checks every element (x + y in f32 is exact, so the check is equality). docs/tutorials/01_vector_add.md.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <random>

using namespace kiln;

// out[i] = x[i] + y[i] for i < n. Each program handles BLOCK consecutive elements; the last one is partial,
// so every access is masked by `offs < n` (masked loads read 0, masked stores write nothing).
Kernel build_add(const Config& config) {
  const int64_t BLOCK = config.get("BLOCK");
  KernelBuilder kb("add", config);
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), out = kb.arg_ptr("out", f32);
  Value n = kb.arg("n", i32);
  Value offs = program_id(0) * BLOCK + arange(0, BLOCK); // (BLOCK,) i32
  Value mask = offs < n;                                 // (BLOCK,) i1
  store(out + offs, load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return kb.finish();
}

int main() {
  const int64_t n = 98432, BLOCK = 1024; // not a multiple of BLOCK: the last program is masked
  Kernel k = build_add(Config().set("BLOCK", BLOCK));
  const Grid grid{(n + BLOCK - 1) / BLOCK, 1, 1};
  std::printf("kiln %s: kernel '%s', %lld programs of %lld elements\n\n%s\n", version(), k.name.c_str(),
              static_cast<long long>(grid[0]), static_cast<long long>(BLOCK), print_kernel(k).c_str());

  HostBuffer x(f32, n, "x"), y(f32, n, "y"), out(f32, n, "out");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (int64_t i = 0; i < n; ++i) {
    x.set(i, dist(rng));
    y.set(i, dist(rng));
    out.set(i, std::nan("")); // poisoned: an element the kernel misses stays NaN and fails the check
  }

  std::string why;
  if (gpu_available(&why)) {
    // The caller owns device memory; kiln only needs its addresses. (DeviceBuffer is kiln's RAII owner.)
    DeviceBuffer dx = DeviceBuffer::from_host(x.bytes), dy = DeviceBuffer::from_host(y.bytes);
    DeviceBuffer dout = DeviceBuffer::from_host(out.bytes);
    std::shared_ptr<JitKernel> add = JitKernel::compile(k); // generate CUDA, NVRTC (cached), load
    Stream stream = Stream::create();
    add->launch(grid,
                {LaunchArg::pointer(dx.ptr()), LaunchArg::pointer(dy.ptr()), LaunchArg::pointer(dout.ptr()),
                 LaunchArg::of_int(n)},
                stream);
    stream.synchronize();
    dout.copy_to_host(out.bytes.data(), out.bytes.size());
    std::printf("ran on the GPU: %s\n", current_device().name.c_str());
  } else {
    interpret(k, grid, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_int(n)});
    std::printf("ran in the interpreter (no GPU: %s)\n", why.substr(0, why.find(';')).c_str());
  }

  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += out.get(i) == static_cast<double>(static_cast<float>(x.get(i) + y.get(i))) ? 0 : 1;
  std::printf("out[0..2] = %.4f %.4f %.4f; %lld of %lld elements wrong\n", out.get(0), out.get(1), out.get(2),
              static_cast<long long>(wrong), static_cast<long long>(n));
  return wrong == 0 ? 0 : 1;
}
