// The tensor-map cache: a least-recently-used map from spec keys to encoded maps, under one mutex.
#include "runtime/tensor_map_cache.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace kiln::rt {

std::string tensor_map_cache_key(const TensorMapSpec& spec) {
  // Enums are written by number and vectors in full, separated so that no two specs print alike.
  return fmt::format(
      "e{}|a{:x}|d{}|s{}|b{}|es{}|i{}|sw{}|l2{}|oob{}", static_cast<int>(spec.element), spec.global_address,
      fmt::join(spec.global_dims, ","), fmt::join(spec.global_strides_bytes, ","),
      fmt::join(spec.box_dims, ","), fmt::join(spec.element_strides, ","), static_cast<int>(spec.interleave),
      static_cast<int>(spec.swizzle), static_cast<int>(spec.l2_promotion), static_cast<int>(spec.oob_fill));
}

TensorMapCache::TensorMapCache(size_t capacity, Encoder encoder)
    : capacity_(capacity), encoder_(std::move(encoder)) {
  if (capacity_ == 0)
    fail("a tensor-map cache needs a capacity of at least 1 map, got 0");
  if (!encoder_)
    fail("a tensor-map cache needs an encoder, got an empty function");
}

CUtensorMap TensorMapCache::get(const TensorMapSpec& spec) {
  std::string key = tensor_map_cache_key(spec);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second); // now the most recently used
      ++stats_.hits;
      return it->second->map;
    }
    ++stats_.misses;
  }
  // Encoded without the lock, so that one thread's driver call does not hold up the others' hits. Two threads
  // missing on one spec both encode it; the maps are identical, and the second insertion just refreshes it.
  CUtensorMap map = encoder_(spec);
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(std::move(key), map);
  return map;
}

void TensorMapCache::insert_locked(std::string key, const CUtensorMap& map) {
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->map = map;
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  entries_.push_front(Entry{key, map});
  index_.emplace(std::move(key), entries_.begin());
  while (entries_.size() > capacity_) {
    index_.erase(entries_.back().key);
    entries_.pop_back();
    ++stats_.evictions;
  }
}

size_t TensorMapCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

TensorMapCacheStats TensorMapCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void TensorMapCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  index_.clear();
}

TensorMapCache& tensor_map_cache() {
  static TensorMapCache cache; // C++ guarantees one thread-safe initialization
  return cache;
}

} // namespace kiln::rt
