// The worker's archive unpacker on any tar bytes (gzip-compressed here, so
// that the fuzzer works on tar's structure): an error leaves no directory;
// nothing is ever created beside the target directory; what is unpacked is
// only directories, files and links, within the limits.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/code_archive.h"
#include "tests/fuzz/require.h"

namespace fs = std::filesystem;

namespace {

const std::string& Box() {
  static const std::string* box = [] {
    std::string pattern = (fs::temp_directory_path() / "code_archive_fuzz.XXXXXX").string();
    ringmaster::Require(mkdtemp(pattern.data()) != nullptr, "a scratch directory");
    return new std::string(pattern);
  }();
  return *box;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string box = Box();
  const std::string archive = box + "/archive.tar.gz";
  const std::string out = box + "/out";
  gzFile gz = gzopen(archive.c_str(), "wb1");
  if (size > 0) gzwrite(gz, data, static_cast<unsigned>(size));
  gzclose(gz);

  const ringmaster::UnpackLimits limits{1 << 16, 64};
  const absl::Status status = ringmaster::UnpackArchive(archive, out, limits);
  if (!status.ok()) ringmaster::Require(!fs::exists(out), "an error leaves nothing");
  int64_t entries = 0, file_bytes = 0;
  for (const auto& entry : fs::directory_iterator(box)) {
    const std::string name = entry.path().filename().string();
    ringmaster::Require(name == "archive.tar.gz" || name == "out", "nothing lands beside out");
  }
  if (status.ok()) {
    for (const auto& entry : fs::recursive_directory_iterator(out)) {
      const fs::file_status st = entry.symlink_status();
      ringmaster::Require(fs::is_directory(st) || fs::is_regular_file(st) || fs::is_symlink(st),
                          "only directories, files and links");
      if (fs::is_regular_file(st)) file_bytes += static_cast<int64_t>(entry.file_size());
      ++entries;
    }
    ringmaster::Require(entries <= limits.max_entries, "at most max_entries");
    ringmaster::Require(file_bytes <= limits.max_file_bytes, "at most max_file_bytes");
  }
  fs::remove_all(out);
  fs::remove(archive);
  return 0;
}
