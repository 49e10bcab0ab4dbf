// Writing a file so that readers see the old contents or the new, never a mix: a unique temporary
// file in the same directory, then a rename (which replaces atomically on POSIX file systems).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Writes `bytes` to `path`, creating `dir` first. `temp_model` names the temporary file, with '%'
// characters replaced by random ones (llvm::sys::fs::createUniqueFile). Returns "" on success, else
// what went wrong; the temporary file never outlives a failure.
std::string write_file_atomically(const std::string& dir, const std::string& path, std::string_view bytes,
                                  const std::string& temp_model);

} // namespace kiln
