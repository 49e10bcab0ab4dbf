// Encoded tensor maps kept by their spec, so that launches that repeat their arguments (the usual case: the
// same buffers, shapes and strides every step) reuse the 128 bytes instead of asking the driver again.
// Thread-safe and bounded: past its capacity the least recently used map is dropped.
//
// A map is a pure function of its spec and holds no reference to the memory it names, so an entry for a
// buffer that was freed and whose address was handed out again is still the right map for a tensor of the
// same shape there. Failures are not cached: a spec the driver refused is refused again on the next call.
#pragma once

#include "runtime/tensor_map.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::rt {

// The key of a spec in the cache: every parameter the driver receives, as fixed-size words (no string is
// formatted: a launch with tensor maps looks each one up, and formatting the key cost more than the rest of
// the lookup), so that two specs share a key exactly when they encode to the same map.
struct TensorMapKey {
  static constexpr size_t kMostDims = 5; // what cuTensorMapEncodeTiled takes
  // element, address, interleave, swizzle, L2 promotion, OOB fill, the four lists' lengths, then the lists
  // (dims, strides in bytes, box, element strides), each padded with zeros to kMostDims.
  std::array<int64_t, 10 + 4 * kMostDims> words{};
  bool operator==(const TensorMapKey&) const = default;
};

struct TensorMapKeyHash {
  size_t operator()(const TensorMapKey& key) const;
};

// The key of `spec`; source_dims, which only names dims in messages, is left out. A list longer than
// TensorMapKey::kMostDims (which no driver can encode) is a kiln::Error.
TensorMapKey tensor_map_cache_key(const TensorMapSpec& spec);

struct TensorMapCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;    // encodes asked of the encoder (those that threw included)
  uint64_t evictions = 0; // maps dropped to stay within the capacity
};

class TensorMapCache {
public:
  using Encoder = std::function<CUtensorMap(const TensorMapSpec&)>;
  static constexpr size_t kDefaultCapacity =
      1024; // 128 KiB of maps, far more than one process's launches name

  // capacity: the most maps kept (at least 1, else kiln::Error). encoder: encode_tensor_map, or a stand-in
  // for tests that run without a GPU.
  explicit TensorMapCache(size_t capacity = kDefaultCapacity, Encoder encoder = encode_tensor_map);

  // The map for `spec`: the cached one, or encoded now and kept. The encoder's kiln::Error passes through.
  CUtensorMap get(const TensorMapSpec& spec);

  size_t size() const;
  size_t capacity() const { return capacity_; }
  TensorMapCacheStats stats() const;
  void clear(); // forgets every map; the statistics stay

private:
  struct Entry {
    TensorMapKey key;
    CUtensorMap map;
  };
  void insert_locked(const TensorMapKey& key, const CUtensorMap& map);

  const size_t capacity_;
  const Encoder encoder_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_; // most recently used first
  std::unordered_map<TensorMapKey, std::list<Entry>::iterator, TensorMapKeyHash> index_;
  TensorMapCacheStats stats_;
};

// The process-wide cache that launches use (thread-safe; created on first use with the default capacity).
TensorMapCache& tensor_map_cache();

} // namespace kiln::rt
