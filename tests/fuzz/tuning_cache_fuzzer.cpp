// Fuzzes the autotune result reader (runtime/tuning_cache.h): parse_tuning_record on arbitrary text for a
// fixed key, and on records serialized from fuzzed result tables, which must read back unchanged whenever
// their best config is one of their timed rows. A bad file must be rejected (nullopt with a reason); any
// exception, a crash or a sanitizer report is a bug.
#include "runtime/tuning_cache.h"

#include "tests/fuzz/fuzz_input.h"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

using kiln::rt::CandidateResult;
using kiln::rt::CandidateStatus;
using kiln::rt::TuningRecord;

enum class Mode : uint8_t { RawText, RoundTrip, kLast = RoundTrip };

// The key the checked-in corpus was written for (tests/fuzz/corpus/tuning_cache/).
const kiln::rt::TuningKey& corpus_key() {
  static const kiln::rt::TuningKey key{"fa2_fwd", "N_Q=1024 N_K=1024 | CAUSAL=0 DTYPE=0", "sm_90a", "NVIDIA H100",
                                       "5f2a"};
  return key;
}

// Config ids, reasons and names are ASCII (llvm::json replaces invalid UTF-8, so other bytes do not round-trip;
// kiln never writes them).
std::string ascii(kiln::fuzz::FuzzInput& in, size_t max_length) {
  std::string s = in.string(max_length);
  for (char& c : s)
    c = static_cast<char>(c & 0x7f);
  return s;
}

// A finite double (JSON holds no others; the format writes a time that is not finite as null).
double finite(kiln::fuzz::FuzzInput& in) {
  const double v = std::bit_cast<double>(in.any<uint64_t>());
  return std::isfinite(v) ? v : 0.0;
}

TuningRecord fuzzed_record(kiln::fuzz::FuzzInput& in) {
  TuningRecord record;
  const size_t rows = in.integer<size_t>(0, 8);
  for (size_t i = 0; i < rows; ++i) {
    CandidateResult r;
    r.id = ascii(in, 32);
    r.status = in.pick({CandidateStatus::Ok, CandidateStatus::Pruned, CandidateStatus::CompileFailed,
                                    CandidateStatus::LaunchFailed, CandidateStatus::NotRun});
    r.reason = ascii(in, 32);
    r.ms = in.boolean() ? finite(in) : INFINITY;
    r.tflops = finite(in);
    r.registers = in.any<int>();
    r.shared_bytes = in.any<int64_t>();
    r.gbps = finite(in);
    record.table.push_back(r);
  }
  record.best_id = in.boolean() && rows > 0 ? record.table[in.integer<size_t>(0, rows - 1)].id
                                                : ascii(in, 32);
  record.best_ms = finite(in);
  return record;
}

bool same_time(double a, double b) { return a == b || (std::isinf(a) && std::isinf(b)); }

bool same_record(const TuningRecord& a, const TuningRecord& b) {
  if (a.best_id != b.best_id || a.best_ms != b.best_ms || a.table.size() != b.table.size())
    return false;
  for (size_t i = 0; i < a.table.size(); ++i) {
    const CandidateResult &x = a.table[i], &y = b.table[i];
    if (x.id != y.id || x.status != y.status || x.reason != y.reason || !same_time(x.ms, y.ms) ||
        x.tflops != y.tflops || x.registers != y.registers || x.shared_bytes != y.shared_bytes || x.gbps != y.gbps)
      return false;
  }
  return true;
}

bool best_is_timed(const TuningRecord& r) {
  for (const CandidateResult& row : r.table)
    if (row.id == r.best_id && row.status == CandidateStatus::Ok)
      return true;
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::FuzzInput in(data, size);
  std::string problem;
  switch (in.choice<Mode>()) {
  case Mode::RawText: {
    const auto record = kiln::rt::parse_tuning_record(in.rest(), corpus_key(), &problem);
    if (!record && problem.empty())
      std::abort();
    break;
  }
  case Mode::RoundTrip: {
    const TuningRecord record = fuzzed_record(in);
    const auto back =
        kiln::rt::parse_tuning_record(kiln::rt::serialize_tuning_record(corpus_key(), record), corpus_key(), &problem);
    if (best_is_timed(record) ? !back || !same_record(*back, record) : back.has_value())
      std::abort();
    break;
  }
  }
  return 0;
}
