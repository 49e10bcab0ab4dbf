// KILN_DUMP_DIR: every artifact of a compiled kernel (IR, lowered IR, CUDA, PTX, cubin, NVRTC log, resource
// usage) written as <dir>/<kernel>-<hash8>.<ext>, so that a user can read why a kernel is what it is.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// KILN_DUMP_DIR, or "" when unset (dumping off).
std::string dump_dir_from_env();

// "<kernel>-<hash8>": hash8 is the first 8 hex digits of the SHA-256 of the "cu" artifact when there is one
// (so that the code generator's dumps of ir/lowered/cu and the runtime's of ptx/cubin/log share a stem),
// else of all artifacts. Characters unsafe in file names are replaced by '_'.
std::string dump_stem(std::string_view kernel_name, const std::map<std::string, std::string>& artifacts);

// Writes each artifact (key = extension: "ir", "lowered", "cu", "ptx", "cubin", "log", "usage.json") to dir,
// creating it, as one set of outputs (support/output_set.h: all or none). Returns the paths written. Throws
// kiln::Error when dir cannot be written.
std::vector<std::string> dump_artifacts_to(const std::string& dir, std::string_view kernel_name,
                                           const std::map<std::string, std::string>& artifacts);

// dump_artifacts_to(dump_dir_from_env(), ...); does nothing and returns {} when KILN_DUMP_DIR is unset.
std::vector<std::string> dump_artifacts(std::string_view kernel_name,
                                        const std::map<std::string, std::string>& artifacts);

} // namespace kiln::rt
