// Content hashing for kiln's caches (compile cache keys, dump file names, autotune keys): SHA-256 over
// length-prefixed fields, so that ("ab","c") and ("a","bc") never collide.
#pragma once

#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <memory>
#include <string>

namespace llvm {
class SHA256;
}

namespace kiln {

class HashBuilder {
public:
  HashBuilder();
  ~HashBuilder();
  HashBuilder(const HashBuilder&) = delete;
  HashBuilder& operator=(const HashBuilder&) = delete;

  HashBuilder& add(llvm::StringRef field);  // length-prefixed
  HashBuilder& add(int64_t value);
  std::string hex();  // 64 lowercase hex digits; ends the builder

private:
  std::unique_ptr<llvm::SHA256> sha_;
};

std::string sha256_hex(llvm::StringRef data);
// A fast non-cryptographic checksum (xxHash64), for detecting corrupt cache files.
uint64_t checksum64(llvm::StringRef data);

} // namespace kiln
