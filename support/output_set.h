// Writing a command's output files as a set, all or nothing. Paths are checked before any work
// (check_output_paths); after the work, every output is written to a unique temporary file beside its target
// (stage), then the set is committed: each target replaced by a rename, under an advisory lock on the
// targets' directories (support/directory_lock.h), and undone if one replacement fails. So a failed command
// changes no file, and concurrent kiln processes writing the same outputs leave one process's whole set.
//
// An output path that is a symbolic link is written through: the file it points to is replaced (the
// temporary is made beside that file) and the link stays, as cp and gcc do. docs/guarantees.md, "Files".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// One file a command writes or reads, as the user named it.
struct OutputPath {
  std::string flag; // "--out", "-o", "KILN_DUMP_DIR": how the user gave the path
  std::string path; // as given; "" when the file was not asked for
};

// Before any work, checks every output that was asked for (an empty path is skipped): it must not end in
// '/' or be (after following symbolic links) an existing directory, FIFO, device or socket; the directory it
// goes into must exist and be writable; no two outputs may name the same file, and no output may name one of
// `inputs`, which the command reads. Each failure is a kiln::Error naming the flag and the path.
void check_output_paths(const std::vector<OutputPath>& outputs, const std::vector<OutputPath>& inputs = {});

// The file that writing `path` replaces: `path` with symbolic links in its last component followed (a
// dangling link gives the file it would create). A kiln::Error naming `flag` for a link loop.
std::string output_target(const OutputPath& output);

class OutputSet {
public:
  OutputSet() = default;
  ~OutputSet(); // removes the temporaries of a set that was not committed
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // Writes `bytes` to a unique temporary file in the directory of output_target(output); no visible file
  // changes. A file that is replaced keeps its permissions. A kiln::Error naming the output when it cannot.
  void stage(const OutputPath& output, std::string_view bytes);

  // Replaces every staged target by its temporary, holding the lock on their directories. When one
  // replacement fails, those made before it are undone (the old file put back, or the new one removed where
  // there was none) and a kiln::Error names the output that failed. Returns the user's paths, in order.
  std::vector<std::string> commit();

private:
  struct Staged {
    OutputPath output;
    std::string target, temp;
  };
  std::vector<Staged> staged_;
};

// One output, staged and committed.
void write_output_file(const OutputPath& output, std::string_view bytes);

} // namespace kiln
