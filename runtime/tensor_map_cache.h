// Encoded tensor maps kept by their spec, so that launches that repeat their arguments (the usual case: the
// same buffers, shapes and strides every step) reuse the 128 bytes instead of asking the driver again.
// Thread-safe and bounded: past its capacity the least recently used map is dropped.
//
// A map is a pure function of its spec and holds no reference to the memory it names, so an entry for a
// buffer that was freed and whose address was handed out again is still the right map for a tensor of the
// same shape there. Failures are not cached: a spec the driver refused is refused again on the next call.
#pragma once

#include "runtime/tensor_map.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::rt {

// The key of `spec` in the cache: every parameter the driver receives, so that two specs share a key exactly
// when they encode to the same map. source_dims, which only names dims in messages, is left out.
std::string tensor_map_cache_key(const TensorMapSpec& spec);

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
    std::string key;
    CUtensorMap map;
  };
  void insert_locked(std::string key, const CUtensorMap& map);

  const size_t capacity_;
  const Encoder encoder_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_; // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  TensorMapCacheStats stats_;
};

// The process-wide cache that launches use (thread-safe; created on first use with the default capacity).
TensorMapCache& tensor_map_cache();

} // namespace kiln::rt
