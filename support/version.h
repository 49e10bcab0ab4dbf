// kiln's version, part of every cache key.
#pragma once

namespace kiln {
inline const char* version() { return KILN_VERSION_STRING; }
} // namespace kiln
