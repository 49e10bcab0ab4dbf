// The fuzz targets' view of their input bytes: small integers, choices, strings and the rest, read from the
// front. Every read succeeds: once the bytes run out, integers read as their lowest value, strings as empty,
// so that every input (the empty one included) is a valid program for a target to run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::fuzz {

class FuzzInput {
public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - at_; }

  // An integer from lo to hi (inclusive), from as many bytes as the range needs.
  template <typename T> T integer(T lo, T hi) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    const uint64_t range = static_cast<uint64_t>(static_cast<U>(hi) - static_cast<U>(lo));
    uint64_t v = 0;
    for (uint64_t seen = 0; seen < range && at_ < size_; seen = (seen << 8) | 0xff)
      v = (v << 8) | data_[at_++];
    if (range != UINT64_MAX)
      v %= range + 1;
    return static_cast<T>(static_cast<U>(lo) + static_cast<U>(v));
  }
  // Every value of T.
  template <typename T> T any() {
    return integer<T>(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  bool boolean() { return integer<int>(0, 1) == 1; }
  // One of the enumerators from 0 to E::kLast.
  template <typename E> E choice() {
    return static_cast<E>(integer<int>(0, static_cast<int>(E::kLast)));
  }
  template <typename T> T pick(std::initializer_list<T> values) {
    return values.begin()[integer<size_t>(0, values.size() - 1)];
  }
  // Up to max_length bytes, its length read first.
  std::string string(size_t max_length) {
    const size_t wanted = integer<size_t>(0, max_length); // read before remaining() is asked
    const size_t length = std::min(wanted, remaining());
    std::string s(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return s;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_ + at_), remaining());
    at_ = size_;
    return s;
  }

private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

} // namespace kiln::fuzz
