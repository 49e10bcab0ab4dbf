#include "support/error.h"

#include <cstring>

namespace kiln {

std::string SourceLoc::str() const {
  const char* slash = std::strrchr(file, '/');
  return fmt::format("{}:{}", slash ? slash + 1 : file, line);
}

} // namespace kiln
