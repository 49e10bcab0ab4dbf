// Writing a file so that readers see the old contents or the new, never a mix: a unique temporary file in
// the same directory, then a rename (which replaces atomically on POSIX file systems). These are the
// primitives; a set of user outputs written together is support/output_set.h.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Writes `bytes` to a new file named after `temp_model`, whose '%' characters are replaced by random ones
// (llvm::sys::fs::createUniqueFile), with mode 0666 less the umask. Returns "" and sets *temp_path on
// success; else what went wrong, and no file is left behind.
std::string write_unique_temporary(const std::string& temp_model, std::string_view bytes,
                                   std::string* temp_path);

// Writes `bytes` to `path`, creating `dir` first, through write_unique_temporary(temp_model) and a rename.
// Returns "" on success, else what went wrong; the temporary file never outlives a failure.
std::string write_file_atomically(const std::string& dir, const std::string& path, std::string_view bytes,
                                  const std::string& temp_model);

} // namespace kiln
