#include "support/hash.h"

#include <llvm/Support/SHA256.h>
#include <llvm/Support/xxhash.h>

#include <array>

namespace kiln {

HashBuilder::HashBuilder() : sha_(std::make_unique<llvm::SHA256>()) {}
HashBuilder::~HashBuilder() = default;

HashBuilder& HashBuilder::add(int64_t value) {
  std::array<uint8_t, 8> bytes;
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  sha_->update(llvm::ArrayRef<uint8_t>(bytes.data(), bytes.size()));
  return *this;
}

HashBuilder& HashBuilder::add(llvm::StringRef field) {
  add(static_cast<int64_t>(field.size()));
  sha_->update(field);
  return *this;
}

std::string HashBuilder::hex() {
  llvm::StringRef digest = sha_->final();
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(digest.size() * 2);
  for (unsigned char c : digest) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string sha256_hex(llvm::StringRef data) {
  HashBuilder h;
  return h.add(data).hex();
}

uint64_t checksum64(llvm::StringRef data) { return llvm::xxHash64(data); }

} // namespace kiln
