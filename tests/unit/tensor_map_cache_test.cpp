// The tensor-map cache (runtime/tensor_map_cache.h): keys that tell apart exactly the specs that encode
// differently, hits and misses, the least-recently-used bound, errors passing through uncached, and many
// threads at once. A stand-in encoder replaces the driver, so none of this needs a GPU.
#include "runtime/tensor_map_cache.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using namespace kiln;
using namespace kiln::rt;

namespace {

constexpr uint64_t kBase = 0x7f0000000000;

TensorMapSpec spec_at(uint64_t address) {
  TensorMapSpec s;
  s.element = TensorMapElement::f16;
  s.global_address = address;
  s.global_dims = {1024, 4096};
  s.global_strides_bytes = {2, 2048};
  s.box_dims = {64, 64};
  s.element_strides = {1, 1};
  s.swizzle = TensorMapSwizzle::span128;
  return s;
}

// Stands in for the driver: a map whose first words are the address and box, counting its calls.
struct CountingEncoder {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  CUtensorMap operator()(const TensorMapSpec& s) const {
    ++*calls;
    CUtensorMap map{};
    map.opaque[0] = s.global_address;
    map.opaque[1] = static_cast<uint64_t>(s.box_dims[0]);
    return map;
  }
};

TEST(TensorMapCacheKey, EqualSpecsShareAKey) {
  EXPECT_EQ(tensor_map_cache_key(spec_at(kBase)), tensor_map_cache_key(spec_at(kBase)));
}

TEST(TensorMapCacheKey, SourceDimsDoNotChangeTheKey) {
  TensorMapSpec named = spec_at(kBase);
  named.source_dims = {1, 0};
  EXPECT_EQ(tensor_map_cache_key(named), tensor_map_cache_key(spec_at(kBase)));
}

TEST(TensorMapCacheKey, EveryParameterTheDriverSeesChangesTheKey) {
  const TensorMapKey base_key = tensor_map_cache_key(spec_at(kBase));
  std::vector<std::pair<const char*, std::function<void(TensorMapSpec&)>>> changes = {
      {"element", [](TensorMapSpec& s) { s.element = TensorMapElement::bf16; }},
      {"address", [](TensorMapSpec& s) { s.global_address += 16; }},
      {"dim 0", [](TensorMapSpec& s) { s.global_dims[0] = 1023; }},
      {"dim 1", [](TensorMapSpec& s) { s.global_dims[1] = 4095; }},
      {"rank",
       [](TensorMapSpec& s) {
         s.global_dims.push_back(1);
         s.global_strides_bytes.push_back(2048 * 4096);
         s.box_dims.push_back(1);
         s.element_strides.push_back(1);
       }},
      {"stride", [](TensorMapSpec& s) { s.global_strides_bytes[1] = 4096; }},
      {"box", [](TensorMapSpec& s) { s.box_dims[1] = 128; }},
      {"element stride", [](TensorMapSpec& s) { s.element_strides[1] = 2; }},
      {"interleave", [](TensorMapSpec& s) { s.interleave = TensorMapInterleave::chunk16; }},
      {"swizzle", [](TensorMapSpec& s) { s.swizzle = TensorMapSwizzle::span64; }},
      {"L2 promotion", [](TensorMapSpec& s) { s.l2_promotion = TensorMapL2Promotion::bytes128; }},
      {"out-of-bounds fill", [](TensorMapSpec& s) { s.oob_fill = TensorMapOobFill::nan_request_zero_fma; }},
  };
  std::vector<TensorMapKey> keys = {base_key};
  for (auto& [what, change] : changes) {
    TensorMapSpec s = spec_at(kBase);
    change(s);
    const TensorMapKey key = tensor_map_cache_key(s);
    for (const TensorMapKey& other : keys)
      EXPECT_FALSE(key == other) << "changing the " << what << " must give a key of its own";
    keys.push_back(key);
  }
}

TEST(TensorMapCacheKey, ListsOfOtherLengthsDoNotCollide) {
  // dims [12, 3] against [12, 3, 0]: the lists' lengths are part of the key, not only their padded words.
  TensorMapSpec a = spec_at(kBase), b = spec_at(kBase);
  a.global_dims = {12, 3};
  b.global_dims = {12, 3, 0};
  EXPECT_FALSE(tensor_map_cache_key(a) == tensor_map_cache_key(b));
  EXPECT_NE(TensorMapKeyHash{}(tensor_map_cache_key(spec_at(kBase))),
            TensorMapKeyHash{}(tensor_map_cache_key(spec_at(kBase + 16))));
}

TEST(TensorMapCacheKey, AListLongerThanAMapTakesIsAnError) {
  TensorMapSpec s = spec_at(kBase);
  s.box_dims = {1, 1, 1, 1, 1, 1};
  try {
    (void)tensor_map_cache_key(s);
    FAIL() << "a box of 6 dims must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 5 dims; its box dims list has 6"), std::string::npos)
        << e.what();
  }
}

TEST(TensorMapCache, RepeatedSpecsAreEncodedOnce) {
  CountingEncoder encoder;
  TensorMapCache cache(8, encoder);
  CUtensorMap first = cache.get(spec_at(kBase));
  CUtensorMap again = cache.get(spec_at(kBase));
  EXPECT_EQ(*encoder.calls, 1);
  EXPECT_EQ(std::memcmp(&first, &again, sizeof(CUtensorMap)), 0);
  EXPECT_EQ(again.opaque[0], kBase);
  cache.get(spec_at(kBase + 1024));
  EXPECT_EQ(*encoder.calls, 2);
  EXPECT_EQ(cache.size(), 2u);
  TensorMapCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.evictions, 0u);
}

TEST(TensorMapCache, DropsTheLeastRecentlyUsedPastItsCapacity) {
  CountingEncoder encoder;
  TensorMapCache cache(2, encoder);
  cache.get(spec_at(kBase));        // [a]
  cache.get(spec_at(kBase + 1024)); // [b a]
  cache.get(spec_at(kBase));        // [a b]: a is used again
  cache.get(spec_at(kBase + 2048)); // [c a]: b, the least recently used, is dropped
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(*encoder.calls, 3);
  cache.get(spec_at(kBase)); // still cached
  EXPECT_EQ(*encoder.calls, 3);
  cache.get(spec_at(kBase + 1024)); // dropped, so encoded again
  EXPECT_EQ(*encoder.calls, 4);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(TensorMapCache, ClearForgetsTheMaps) {
  CountingEncoder encoder;
  TensorMapCache cache(4, encoder);
  cache.get(spec_at(kBase));
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  cache.get(spec_at(kBase));
  EXPECT_EQ(*encoder.calls, 2);
}

TEST(TensorMapCache, EncoderErrorsPassThroughAndAreNotCached) {
  int calls = 0;
  TensorMapCache cache(4, [&](const TensorMapSpec&) -> CUtensorMap {
    ++calls;
    throw Error("the driver refused it");
  });
  EXPECT_THROW(cache.get(spec_at(kBase)), Error);
  EXPECT_THROW(cache.get(spec_at(kBase)), Error);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(TensorMapCache, BadConstructionIsAnError) {
  try {
    TensorMapCache cache(0, CountingEncoder{});
    FAIL() << "a capacity of 0 must be refused";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a tensor-map cache needs a capacity of at least 1 map, got 0");
  }
  try {
    TensorMapCache cache(4, TensorMapCache::Encoder{});
    FAIL() << "an empty encoder must be refused";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a tensor-map cache needs an encoder, got an empty function");
  }
}

TEST(TensorMapCache, ManyThreadsGetTheRightMaps) {
  CountingEncoder encoder;
  TensorMapCache cache(4, encoder); // fewer entries than specs, so evictions race with hits
  constexpr int kThreads = 8, kRounds = 2000, kSpecs = 6;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        uint64_t address = kBase + 1024 * static_cast<uint64_t>((i + t) % kSpecs);
        if (cache.get(spec_at(address)).opaque[0] != address)
          ++wrong;
      }
    });
  for (std::thread& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.size(), 4u);
  TensorMapCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits + stats.misses, static_cast<uint64_t>(kThreads * kRounds));
  EXPECT_EQ(stats.misses, static_cast<uint64_t>(encoder.calls->load()));
}

TEST(TensorMapCache, TheProcessCacheIsOneObject) {
  EXPECT_EQ(&tensor_map_cache(), &tensor_map_cache());
  EXPECT_EQ(tensor_map_cache().capacity(), TensorMapCache::kDefaultCapacity);
}

} // namespace
