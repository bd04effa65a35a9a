#include "client/code_package.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ignore_rules.h"
#include "common/code_archive.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

struct Item {
  enum Kind { kDirectory, kFile, kSymlink } kind;
  std::string name;  // relative
  int64_t size = 0;
  bool executable = false;
  std::string target;
};

std::string Mebibytes(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

// Lists what to pack below `dir`/`relative`, sorted, directories before
// what they hold.
absl::Status Walk(const std::string& dir, const std::string& relative, const IgnoreRules& rules,
                  std::vector<Item>* items) {
  std::error_code error;
  const fs::path here = relative.empty() ? fs::path(dir) : fs::path(dir) / relative;
  std::vector<std::string> names;
  for (fs::directory_iterator it(here, error), end; !error && it != end; it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  if (error)
    return absl::FailedPreconditionError(absl::StrCat(here.string(), ": ", error.message()));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string rel = relative.empty() ? name : absl::StrCat(relative, "/", name);
    const fs::path path = fs::path(dir) / rel;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      if (rules.Ignored(rel, true)) continue;
      items->push_back({Item::kDirectory, rel});
      RETURN_IF_ERROR(Walk(dir, rel, rules, items));
    } else if (S_ISREG(st.st_mode)) {
      if (rules.Ignored(rel, false)) continue;
      items->push_back({Item::kFile, rel, st.st_size, (st.st_mode & S_IXUSR) != 0});
    } else if (S_ISLNK(st.st_mode)) {
      if (rules.Ignored(rel, false)) continue;
      std::string target = fs::read_symlink(path, error).string();
      if (error) continue;
      items->push_back({Item::kSymlink, rel, 0, false, std::move(target)});
    }
    // Sockets, pipes and devices stay behind.
  }
  return absl::OkStatus();
}

absl::Status TooLarge(const std::string& dir, const std::vector<Item>& items, int64_t total,
                      int64_t limit_bytes) {
  std::map<std::string, int64_t> by_top;
  for (const Item& item : items) {
    const size_t slash = item.name.find('/');
    const std::string top = slash == std::string::npos ? item.name : item.name.substr(0, slash + 1);
    by_top[top] += item.size;
  }
  std::vector<std::pair<std::string, int64_t>> largest(by_top.begin(), by_top.end());
  std::sort(largest.begin(), largest.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  largest.resize(std::min<size_t>(largest.size(), 3));
  return absl::FailedPreconditionError(absl::StrCat(
      "working directory ", dir, " holds ", Mebibytes(total), " to upload, more than the ",
      Mebibytes(limit_bytes), " limit (--upload-limit-mb); the largest: ",
      absl::StrJoin(largest, ", ",
                    [](std::string* out, const auto& entry) {
                      absl::StrAppend(out, entry.first, " ", Mebibytes(entry.second));
                    }),
      ". Leave them out in ", dir,
      "/.ringmasterignore, or set working_dir to a directory every host mounts and submit "
      "with --no-upload"));
}

}  // namespace

absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, int64_t limit_bytes,
                                              const std::string& archive_path) {
  std::stringstream ignore_text;
  if (std::ifstream in(dir + "/.ringmasterignore"); in) ignore_text << in.rdbuf();
  const IgnoreRules rules(ignore_text.str());
  std::vector<Item> items;
  RETURN_IF_ERROR(Walk(dir, "", rules, &items));

  PackedDirectory packed;
  for (const Item& item : items) {
    packed.file_bytes += item.size;
    if (item.kind == Item::kFile) ++packed.files;
  }
  if (packed.file_bytes > limit_bytes) {
    return TooLarge(dir, items, packed.file_bytes, limit_bytes);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ArchiveWriter> writer, ArchiveWriter::Create(archive_path));
  for (const Item& item : items) {
    switch (item.kind) {
      case Item::kDirectory:
        RETURN_IF_ERROR(writer->AddDirectory(item.name));
        break;
      case Item::kFile:
        RETURN_IF_ERROR(writer->AddFile(item.name, absl::StrCat(dir, "/", item.name), item.size,
                                        item.executable));
        break;
      case Item::kSymlink:
        RETURN_IF_ERROR(writer->AddSymlink(item.name, item.target));
        break;
    }
  }
  RETURN_IF_ERROR(writer->Finish());
  ASSIGN_OR_RETURN(packed.sha256, Sha256OfFile(archive_path));
  std::error_code error;
  packed.archive_bytes = static_cast<int64_t>(fs::file_size(archive_path, error));
  return packed;
}

}  // namespace ringmaster
