// Opening a shared library with dlopen and taking its functions with dlsym: what the CUDA driver's loader
// (runtime/cuda_driver.cpp) and NVRTC's (runtime/nvrtc.cpp) share. Each loads once, keeping either the API
// or why there is none (LibraryLoad), and says whether it is there without ever throwing (available).
#pragma once

#include <dlfcn.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

// The first of the candidates that dlopen opens (RTLD_NOW | RTLD_LOCAL), and why each one before it did not.
struct OpenedLibrary {
  struct Failure {
    std::string candidate;
    std::string reason; // dlerror()'s text (empty where it gave none)
  };
  void* handle = nullptr;        // null when none opened
  std::string path;              // the candidate that opened
  std::vector<Failure> failures; // the candidates tried before it, or all of them
};
OpenedLibrary open_first(const std::vector<std::string>& candidates);

// Takes a library's functions into an API struct's slots, keeping the names of the required ones it lacks.
class SymbolResolver {
public:
  explicit SymbolResolver(void* library) : library_(library) {}

  template <typename Fn> void required(const char* symbol, Fn& slot) {
    void* address = dlsym(library_, symbol);
    if (!address)
      missing_.push_back(symbol);
    slot = reinterpret_cast<Fn>(address);
  }
  // For functions kiln can do without (on an older library): the slot stays null and its caller says so.
  template <typename Fn> void optional(const char* symbol, Fn& slot) {
    slot = reinterpret_cast<Fn>(dlsym(library_, symbol));
  }
  bool complete() const { return missing_.empty(); }
  std::string missing() const; // "cuInit, cuLaunchKernel"

private:
  void* library_;
  std::vector<std::string> missing_;
};

// The outcome of a library's one load: the API, or the reason there is none.
template <typename Api> struct LibraryLoad {
  std::unique_ptr<Api> api;
  std::string error;
};

// Whether `load()` (the loader's one attempt, a reference to a static) found the library, and why not in `why`;
// never throws (an allocation failure while loading reads as "not there").
template <typename Api> bool available(const LibraryLoad<Api>& (*load)(), std::string* why) {
  try {
    const LibraryLoad<Api>& l = load();
    if (!l.api && why)
      *why = l.error;
    return l.api != nullptr;
  } catch (const std::exception& e) {
    if (why)
      *why = e.what();
    return false;
  }
}

} // namespace kiln::rt
