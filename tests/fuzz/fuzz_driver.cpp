// The main() of every fuzz target: runs the target's LLVMFuzzerTestOneInput on each file of its corpus, then on
// mutations of them (bit flips, byte changes, insertions, deletions, copies, splices), deterministically from a
// fixed seed, until a time or run budget is spent. Targets keep libFuzzer's entry point, so that they can be
// linked with libFuzzer instead once a clang that compiles kiln is at hand (docs/testing.md says why not yet).
//
//   kiln_fuzz_<target> [--seconds S] [--runs N] [--seed N] [--timeout S] [--crash-dir D] PATH...
//
// PATH: corpus folders or single inputs. A crash, a sanitizer report, an uncaught exception or an input that
// runs longer than --timeout seconds writes that input to <crash-dir>/crash-<run> (or timeout-<run>) and
// names it on stderr; the process then dies as the fault would have it. Replay one input: pass its path alone.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// The sanitizers' hook, run before a report ends the process; absent from a build without sanitizers.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

// A sanitizer report ends in abort(), which the fault handlers below catch to save the input (UBSan's runtime
// does not run ASan's death callback); UBSan prints the stack of what it reports.
extern "C" const char* __asan_default_options() { return "abort_on_error=1"; }
extern "C" const char* __ubsan_default_options() { return "abort_on_error=1:print_stacktrace=1"; }

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr size_t kMaxInputBytes = 4096;

struct Options {
  double seconds = 10;
  uint64_t runs = UINT64_MAX;
  uint64_t seed = 1;
  unsigned timeout = 10;
  std::string crash_dir = ".";
  std::vector<std::string> paths;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "fuzz driver: %s\nusage: fuzz_target [--seconds S] [--runs N] [--seed N] [--timeout S] "
                       "[--crash-dir D] PATH...\n", why);
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--seconds")
      o.seconds = std::stod(value());
    else if (arg == "--runs")
      o.runs = std::stoull(value());
    else if (arg == "--seed")
      o.seed = std::stoull(value());
    else if (arg == "--timeout")
      o.timeout = static_cast<unsigned>(std::stoul(value()));
    else if (arg == "--crash-dir")
      o.crash_dir = value();
    else if (arg.rfind("--", 0) == 0)
      usage(("unknown option " + arg).c_str());
    else
      o.paths.push_back(arg);
  }
  if (o.paths.empty())
    usage("no corpus folder or input given");
  return o;
}

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Every file under the paths, in a fixed order, so that a seed means the same runs on every machine.
std::vector<Bytes> load_corpus(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      usage(("no such file or folder: " + p).c_str());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> corpus;
  for (const fs::path& f : files)
    corpus.push_back(read_file(f));
  return corpus;
}

// ---- what a fault leaves behind: the input being run, written with async-signal-safe calls ----

const Bytes* g_current = nullptr;
uint64_t g_run = 0;
char g_crash_dir[4096];

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n <= 0)
      return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}
void say(const char* text) { write_all(2, text, std::strlen(text)); }

// Appends the decimal digits of v to buf (no snprintf: this runs in signal handlers).
void append_number(char* buf, size_t cap, uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  size_t len = std::strlen(buf);
  while (n > 0 && len + 1 < cap)
    buf[len++] = digits[--n];
  buf[len] = '\0';
}

void save_current_input(const char* kind) {
  if (!g_current)
    return;
  const Bytes* input = g_current;
  g_current = nullptr; // once, even if saving it faults
  char path[sizeof(g_crash_dir) + 64];
  path[0] = '\0';
  std::strncat(path, g_crash_dir, sizeof(path) - 1);
  std::strncat(path, "/", sizeof(path) - std::strlen(path) - 1);
  std::strncat(path, kind, sizeof(path) - std::strlen(path) - 1);
  std::strncat(path, "-", sizeof(path) - std::strlen(path) - 1);
  append_number(path, sizeof(path), g_run);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    write_all(fd, input->data(), input->size());
    ::close(fd);
  }
  say("\nfuzz driver: the input of this run is saved as ");
  say(path);
  say(" (replay: pass that path alone)\n");
}

void on_sanitizer_report() { save_current_input("crash"); }

void on_fatal_signal(int sig) {
  save_current_input("crash");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void on_timeout(int) {
  say("\nfuzz driver: an input ran longer than --timeout seconds\n");
  save_current_input("timeout");
  ::_exit(3);
}

void install_fault_handlers(const Options& o) {
  g_crash_dir[0] = '\0';
  std::strncat(g_crash_dir, o.crash_dir.c_str(), sizeof(g_crash_dir) - 1);
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(on_sanitizer_report);
  for (int sig : {SIGABRT, SIGSEGV, SIGFPE, SIGBUS, SIGILL})
    std::signal(sig, on_fatal_signal);
  std::signal(SIGALRM, on_timeout);
}

void run_one(const Bytes& input, unsigned timeout) {
  ++g_run;
  g_current = &input;
  ::alarm(timeout);
  LLVMFuzzerTestOneInput(input.data(), input.size());
  ::alarm(0);
  g_current = nullptr;
}

// ---- mutations ----

class Mutator {
public:
  Mutator(uint64_t seed, const std::vector<Bytes>& corpus) : rng_(seed), corpus_(corpus) {}

  Bytes next() {
    Bytes b = corpus_.empty() ? Bytes() : corpus_[below(corpus_.size())];
    for (size_t n = 1 + below(4); n > 0; --n)
      mutate(b);
    if (b.size() > kMaxInputBytes)
      b.resize(kMaxInputBytes);
    return b;
  }

private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  uint8_t byte() { return static_cast<uint8_t>(below(256)); }

  void mutate(Bytes& b) {
    const size_t at = below(b.size() + 1);
    switch (below(8)) {
    case 0: // flip a bit
      if (!b.empty())
        b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
      break;
    case 1: // a random byte
      if (!b.empty())
        b[below(b.size())] = byte();
      break;
    case 2: // a boundary value
      if (!b.empty())
        b[below(b.size())] = std::vector<uint8_t>{0, 1, 0x7f, 0x80, 0xff, '0', '9', ',', '=', '\n'}[below(10)];
      break;
    case 3: // insert random bytes
      for (size_t n = 1 + below(8); n > 0; --n)
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), byte());
      break;
    case 4: // erase a range
      if (at < b.size())
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(at + 1 + below(std::min<size_t>(16, b.size() - at))));
      break;
    case 5: // copy a range of itself elsewhere
      if (!b.empty()) {
        const size_t from = below(b.size()), len = 1 + below(std::min<size_t>(16, b.size() - from));
        const Bytes piece(b.begin() + static_cast<std::ptrdiff_t>(from),
                          b.begin() + static_cast<std::ptrdiff_t>(from + len));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(below(b.size() + 1)), piece.begin(), piece.end());
      }
      break;
    case 6: // splice: this input's head, another's tail
      if (!corpus_.empty()) {
        const Bytes& other = corpus_[below(corpus_.size())];
        b.resize(at);
        const size_t from = below(other.size() + 1);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
      }
      break;
    default: // truncate
      b.resize(at);
      break;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Bytes>& corpus_;
};

} // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  install_fault_handlers(o);
  const std::vector<Bytes> corpus = load_corpus(o.paths);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  for (const Bytes& input : corpus)
    run_one(input, o.timeout);
  const uint64_t replayed = g_run;

  Mutator mutator(o.seed, corpus);
  uint64_t mutated = 0;
  while (mutated < o.runs && elapsed() < o.seconds) {
    run_one(mutator.next(), o.timeout);
    ++mutated;
  }
  std::printf("fuzz driver: %s: %llu corpus inputs and %llu mutated inputs (seed %llu) ran in %.1f s, none failed\n",
              fs::path(argv[0]).filename().c_str(), static_cast<unsigned long long>(replayed),
              static_cast<unsigned long long>(mutated), static_cast<unsigned long long>(o.seed), elapsed());
  return 0;
}
