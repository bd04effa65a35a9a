// The code archives jobs are submitted with (proto CodePackage), in
// <state_dir>/code/<sha256>.tar.gz: uploaded by `submit` once per content,
// read by the workers that run the job. An archive is removed once no
// active job uses it and nobody has used it (stat, upload, submit, read)
// for an hour, so the store holds what live jobs need and little more.
//
// Coordinators that share a PostgreSQL store share their archives too
// (SharedCodeArchives): an upload is stored there before it is
// acknowledged, and an archive another coordinator took is read from
// there, so a job's code outlives the machine it was uploaded to.
#ifndef RINGMASTER_COORDINATOR_CODE_CODE_STORE_H_
#define RINGMASTER_COORDINATOR_CODE_CODE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/mutex.h"
#include "common/sha256.h"

namespace ringmaster {

inline constexpr int64_t kDefaultMaxUploadBytes = 200LL << 20;

// The archives' copy that every coordinator sharing a store reads
// (coordinator/pg_code_archives.h). Thread-safe.
class SharedCodeArchives {
 public:
  virtual ~SharedCodeArchives() = default;
  // Stores the archive in the file at `path` (`bytes` long, its hash
  // checked); OK when it is stored already.
  virtual absl::Status Put(const std::string& sha256, const std::string& path, int64_t bytes) = 0;
  // The archive's size; NOT_FOUND when it is not stored.
  virtual absl::StatusOr<int64_t> Size(const std::string& sha256) = 0;
  // Up to `max_bytes` of the archive from `offset` (fewer at its end).
  virtual absl::StatusOr<std::string> Read(const std::string& sha256, int64_t offset,
                                           int max_bytes) = 0;
  // Every archive stored, with its size.
  virtual absl::StatusOr<std::map<std::string, int64_t>> List() = 0;
  virtual absl::Status Remove(const std::string& sha256) = 0;
};

struct CodeStoreOptions {
  std::string dir;
  SharedCodeArchives* shared = nullptr;  // none: this coordinator's files alone
  int64_t max_archive_bytes = kDefaultMaxUploadBytes;
  int max_concurrent_uploads = 8;
  int max_uploads_per_caller = 4;
  absl::Duration keep_unused = absl::Hours(1);
};

// Thread-safe: one mutex over the index of archives and the count of
// uploads; file I/O happens outside it.
class CodeStore {
 public:
  CodeStore(CodeStoreOptions options, const Clock* clock);
  // Creates the directory, drops uploads a crash left unfinished and indexes
  // what is stored, here and shared; an archive stored here alone is shared.
  absl::Status Init();

  // The stored archive's size, marking it used; nullopt when not stored.
  // An error only when the shared copy cannot be asked.
  absl::StatusOr<std::optional<int64_t>> Use(const std::string& sha256);

  // One upload in progress; not thread-safe. Destroying it uncommitted
  // leaves nothing.
  class Upload {
   public:
    ~Upload();
    // INVALID_ARGUMENT when the bytes go past the size declared.
    absl::Status Append(absl::string_view data);
    // Checks the size and the hash and stores the archive (shared first).
    // Returns false, or true when an upload of the same archive got there
    // first.
    absl::StatusOr<bool> Commit();

   private:
    friend class CodeStore;
    Upload(CodeStore* store, std::string sha256, int64_t bytes, std::string temp_path, int fd,
           std::string caller);

    CodeStore* const store_;
    const std::string caller_;
    const std::string sha256_;
    const int64_t bytes_;
    const std::string temp_path_;
    int fd_;
    int64_t written_ = 0;
    Sha256 hash_;
  };
  // INVALID_ARGUMENT for a malformed hash or a size beyond the limit,
  // RESOURCE_EXHAUSTED with too many uploads at once, in all or of
  // `caller`'s.
  absl::StatusOr<std::unique_ptr<Upload>> BeginUpload(const std::string& sha256, int64_t bytes,
                                                      const std::string& caller = "");

  // Up to `max_bytes` of the archive from `offset` (empty at its end), and
  // its size in `*archive_bytes`. NOT_FOUND when it is not stored.
  absl::StatusOr<std::string> Read(const std::string& sha256, int64_t offset, int max_bytes,
                                   int64_t* archive_bytes);

  // Removes the archives outside `in_use` unused for keep_unused (shared
  // ones too). Returns how many went.
  int Prune(const std::set<std::string>& in_use);

 private:
  struct Archive {
    int64_t bytes = 0;
    absl::Time last_used;
    bool here = true;  // in this coordinator's directory; else shared only
  };
  // The archive's entry, marked used, found here or shared; nullopt when
  // stored nowhere.
  absl::StatusOr<std::optional<Archive>> Touch(const std::string& sha256);
  // Adds the shared archives to `found`, and shares those it holds alone.
  absl::Status IndexShared(std::map<std::string, Archive>* found);
  std::string PathOf(const std::string& sha256) const;
  void UploadEnded(const std::string& caller);

  const CodeStoreOptions options_;
  const Clock* const clock_;
  Mutex mu_;
  std::map<std::string, Archive> archives_ ABSL_GUARDED_BY(mu_);
  int uploads_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> uploads_by_caller_ ABSL_GUARDED_BY(mu_);
  int64_t next_upload_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CODE_CODE_STORE_H_
