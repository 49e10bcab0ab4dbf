#pragma once
// parallel_chunks(n, f): f(begin, end) over [0, n) cut into one contiguous chunk per hardware thread (at most
// max_threads when that is > 0), the chunks run at once and all joined before it returns; the first chunk's
// exception, if any, is rethrown after every chunk has finished. For host-side loops whose items are independent
// and write disjoint outputs: the double-precision references, whose cost dominated the GPU suites' time.
// A chunk's items run in order, so a loop whose items each sum in a fixed order gives the same bits on any
// number of threads.

#include <algorithm>
#include <cstdint>
#include <exception>
#include <future>
#include <thread>
#include <vector>

namespace kiln {

template <class F> void parallel_chunks(int64_t n, const F& f, int64_t max_threads = 0) {
  if (n <= 0)
    return;
  int64_t threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (max_threads > 0)
    threads = std::min(threads, max_threads);
  const int64_t chunks = std::min(n, threads);
  if (chunks == 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::future<void>> tasks;
  tasks.reserve(static_cast<size_t>(chunks));
  for (int64_t c = 0; c < chunks; ++c)
    tasks.push_back(std::async(std::launch::async, [&f, n, c, chunks] { f(n * c / chunks, n * (c + 1) / chunks); }));
  std::exception_ptr first;
  for (auto& t : tasks) {
    try {
      t.get();
    } catch (...) {
      if (!first)
        first = std::current_exception();
    }
  }
  if (first)
    std::rethrow_exception(first);
}

} // namespace kiln
