// The tensor-map cache: a least-recently-used map from spec keys to encoded maps, under one mutex.
#include "runtime/tensor_map_cache.h"

#include "support/error.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace kiln::rt {

TensorMapKey tensor_map_cache_key(const TensorMapSpec& spec) {
  TensorMapKey key;
  auto& w = key.words;
  w[0] = static_cast<int64_t>(spec.element);
  w[1] = static_cast<int64_t>(spec.global_address);
  w[2] = static_cast<int64_t>(spec.interleave);
  w[3] = static_cast<int64_t>(spec.swizzle);
  w[4] = static_cast<int64_t>(spec.l2_promotion);
  w[5] = static_cast<int64_t>(spec.oob_fill);
  const std::pair<const char*, const std::vector<int64_t>*> lists[] = {
      {"dims", &spec.global_dims},
      {"strides", &spec.global_strides_bytes},
      {"box dims", &spec.box_dims},
      {"element strides", &spec.element_strides}};
  for (size_t l = 0; l < std::size(lists); ++l) {
    const auto& [name, values] = lists[l];
    if (values->size() > TensorMapKey::kMostDims)
      fail("a tensor map takes at most {} dims; its {} list has {}", TensorMapKey::kMostDims, name,
           values->size());
    w[6 + l] = static_cast<int64_t>(values->size());
    std::copy(values->begin(), values->end(),
              w.begin() + static_cast<std::ptrdiff_t>(10 + l * TensorMapKey::kMostDims));
  }
  return key;
}

size_t TensorMapKeyHash::operator()(const TensorMapKey& key) const {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a over the words, each mixed in whole
  for (int64_t word : key.words) {
    h ^= static_cast<uint64_t>(word);
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

TensorMapCache::TensorMapCache(size_t capacity, Encoder encoder)
    : capacity_(capacity), encoder_(std::move(encoder)) {
  if (capacity_ == 0)
    fail("a tensor-map cache needs a capacity of at least 1 map, got 0");
  if (!encoder_)
    fail("a tensor-map cache needs an encoder, got an empty function");
}

CUtensorMap TensorMapCache::get(const TensorMapSpec& spec) {
  const TensorMapKey key = tensor_map_cache_key(spec);
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
  insert_locked(key, map);
  return map;
}

void TensorMapCache::insert_locked(const TensorMapKey& key, const CUtensorMap& map) {
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->map = map;
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  entries_.push_front(Entry{key, map});
  index_.emplace(key, entries_.begin());
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
