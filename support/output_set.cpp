#include "support/output_set.h"

#include "support/atomic_file.h"
#include "support/directory_lock.h"
#include "support/error.h"
#include "support/regular_file.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

namespace {

constexpr int kMaxLinks = 40; // as the kernel's own limit on a path's symbolic links

std::string directory_of(const std::string& path) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

std::string temporary_model(const std::string& target, const char* marker) {
  llvm::SmallString<256> model(directory_of(target));
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(target).str() + marker + "%%%%%%%%");
  return model.str().str();
}

// "'link.npy' (a link to 'data/o.npy')" when the path is a link, else "'o.npy'".
std::string describe(const OutputPath& output, const std::string& target) {
  if (target == output.path)
    return fmt::format("'{}'", output.path);
  return fmt::format("'{}' (a link to '{}')", output.path, target);
}

// What names a file, however it is spelled: the real path of its directory plus its name.
std::string file_identity(const std::string& path) {
  llvm::SmallString<256> dir;
  if (llvm::sys::fs::real_path(directory_of(path), dir))
    return path;
  llvm::sys::path::append(dir, llvm::sys::path::filename(path));
  return dir.str().str();
}

bool same_file(const std::string& a, const std::string& b) {
  return file_identity(a) == file_identity(b) || llvm::sys::fs::equivalent(a, b); // hard links too
}

// Fails unless `target` is absent or a regular file, in a writable directory.
void check_writable_target(const OutputPath& output, const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      fail("{} {} is a directory; expected the path of a file to write", output.flag,
           describe(output, target));
    if (!S_ISREG(st.st_mode))
      fail("{} {} is {}; kiln writes outputs only as regular files", output.flag, describe(output, target),
           file_kind_name(st.st_mode));
  }
  const std::string dir = directory_of(target);
  if (::stat(dir.c_str(), &st) != 0)
    fail("{} {}: its directory '{}' does not exist", output.flag, describe(output, target), dir);
  if (!S_ISDIR(st.st_mode))
    fail("{} {}: '{}' is {}, not a directory", output.flag, describe(output, target), dir,
         file_kind_name(st.st_mode));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail("{} {}: cannot write in its directory '{}': {}", output.flag, describe(output, target), dir,
         std::strerror(errno));
}

// A hard link to (or, where links are not possible, a copy of) the regular file `target`, so that it can be
// put back. "" when there is no regular file to keep.
std::string keep_old_file(const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return "";
  for (int attempt = 0; attempt < 8; ++attempt) {
    llvm::SmallString<256> backup;
    llvm::sys::fs::createUniquePath(temporary_model(target, ".old-"), backup, /*MakeAbsolute=*/false);
    if (::link(target.c_str(), backup.c_str()) == 0)
      return backup.str().str();
    if (errno != EEXIST)
      break;
  }
  std::string backup;
  const std::string bytes = read_regular_file(target, UINT64_MAX, Symlinks::Refuse, "an output it replaces");
  if (std::string problem = write_unique_temporary(temporary_model(target, ".old-"), bytes, &backup);
      !problem.empty())
    fail("cannot keep a copy of '{}' before replacing it: {}", target, problem);
  return backup;
}

} // namespace

std::string output_target(const OutputPath& output) {
  std::string path = output.path;
  for (int hops = 0; hops <= kMaxLinks; ++hops) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return path;
    std::string buffer(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
    const ssize_t n = ::readlink(path.c_str(), buffer.data(), buffer.size());
    if (n < 0 || static_cast<size_t>(n) >= buffer.size())
      fail("{} '{}': cannot read the symbolic link '{}': {}", output.flag, output.path, path,
           n < 0 ? std::strerror(errno) : "it changed while kiln read it");
    buffer.resize(static_cast<size_t>(n));
    if (llvm::sys::path::is_absolute(buffer)) {
      path = buffer;
    } else {
      llvm::SmallString<256> next(directory_of(path));
      llvm::sys::path::append(next, buffer);
      path = next.str().str();
    }
  }
  fail("{} '{}' is a symbolic link that does not end in a file: more than {} links (a loop?)", output.flag,
       output.path, kMaxLinks);
}

void check_output_paths(const std::vector<OutputPath>& outputs, const std::vector<OutputPath>& inputs) {
  std::vector<std::pair<const OutputPath*, std::string>> targets;
  for (const OutputPath& output : outputs) {
    if (output.path.empty())
      continue;
    if (llvm::sys::path::is_separator(output.path.back()))
      fail("{} '{}' names a directory; expected the path of a file to write", output.flag, output.path);
    const std::string target = output_target(output);
    check_writable_target(output, target);
    for (const auto& [earlier, earlier_target] : targets)
      if (same_file(target, earlier_target))
        fail("{} and {} name the same file '{}'", earlier->flag, output.flag, output.path);
    for (const OutputPath& input : inputs)
      if (!input.path.empty() && same_file(target, input.path))
        fail("refusing to overwrite the input '{}' ({}) with an output; choose another {} path", input.path,
             input.flag, output.flag);
    targets.emplace_back(&output, target);
  }
}

OutputSet::~OutputSet() {
  for (const Staged& s : staged_)
    llvm::sys::fs::remove(s.temp);
}

void OutputSet::stage(const OutputPath& output, std::string_view bytes) {
  Staged s{output, output_target(output), ""};
  if (std::string problem = write_unique_temporary(temporary_model(s.target, ".tmp-"), bytes, &s.temp);
      !problem.empty())
    fail("cannot write {} {}: {}", output.flag, describe(output, s.target), problem);
  staged_.push_back(s);
  llvm::sys::fs::file_status old;
  if (!llvm::sys::fs::status(s.target, old) && old.type() == llvm::sys::fs::file_type::regular_file)
    llvm::sys::fs::setPermissions(s.temp, old.permissions()); // a replaced file keeps its mode
}

std::vector<std::string> OutputSet::commit() {
  std::vector<std::string> dirs;
  for (const Staged& s : staged_)
    dirs.push_back(directory_of(s.target));
  const DirectoryLocks lock(dirs);

  std::vector<std::string> backups; // one per staged output, "" where no file is replaced
  auto remove_backups = [&] {
    for (const std::string& b : backups)
      if (!b.empty())
        llvm::sys::fs::remove(b);
  };
  try {
    for (const Staged& s : staged_)
      backups.push_back(keep_old_file(s.target));
  } catch (const Error&) {
    remove_backups();
    throw;
  }

  for (size_t i = 0; i < staged_.size(); ++i) {
    const Staged failed = staged_[i]; // a copy: staged_ is cleared below
    const std::error_code ec = llvm::sys::fs::rename(failed.temp, failed.target);
    if (!ec)
      continue;
    std::string undo; // what could not be put back
    for (size_t j = i; j-- > 0;) {
      const Staged& done = staged_[j];
      const std::error_code back = backups[j].empty() ? llvm::sys::fs::remove(done.target)
                                                      : llvm::sys::fs::rename(backups[j], done.target);
      if (back)
        undo +=
            fmt::format("; '{}' could not be restored ({}){}", done.target, back.message(),
                        backups[j].empty() ? "" : fmt::format(", its old contents are in '{}'", backups[j]));
      backups[j].clear(); // put back, or kept where the message says
    }
    for (size_t k = i; k < staged_.size(); ++k) // the temporaries not renamed: the set is over
      llvm::sys::fs::remove(staged_[k].temp);
    staged_.clear();
    remove_backups();
    fail("cannot write {} {}: {}; {}{}", failed.output.flag, describe(failed.output, failed.target),
         ec.message(), i == 0 ? "no file was changed" : "the outputs written before it were restored", undo);
  }
  remove_backups();
  std::vector<std::string> written;
  for (const Staged& s : staged_)
    written.push_back(s.output.path);
  staged_.clear();
  return written;
}

void write_output_file(const OutputPath& output, std::string_view bytes) {
  OutputSet set;
  set.stage(output, bytes);
  set.commit();
}

} // namespace kiln
