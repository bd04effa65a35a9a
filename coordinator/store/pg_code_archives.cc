#include "coordinator/store/pg_code_archives.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

// Reads up to `size` bytes at `offset` of `fd`; fewer only at its end.
absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, size_t size, const std::string& path) {
  std::string data(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, data.data() + done, size - done,
                            static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(absl::StrCat("reading ", path));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

}  // namespace

absl::Status PgCodeArchives::Put(const std::string& sha256, const std::string& path,
                                 int64_t bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", path));
  absl::Status stored = pool_.Run([&](PgDb* db) {
    return db->Transaction([&]() -> absl::Status {
      ASSIGN_OR_RETURN(PgResult listed, db->Query("SELECT 1 FROM code_archives WHERE sha256 = $1",
                                                  {PgParam::Text(sha256)}));
      if (listed.rows() > 0) return absl::OkStatus();
      for (int64_t offset = 0, seq = 0; offset < bytes; offset += kChunkBytes, ++seq) {
        ASSIGN_OR_RETURN(std::string chunk, ReadAt(fd, offset, kChunkBytes, path));
        if (chunk.empty()) return absl::DataLossError(absl::StrCat(path, " ended early"));
        // Another coordinator's upload of the same bytes may commit first.
        RETURN_IF_ERROR(
            db->Query("INSERT INTO code_chunks VALUES ($1, $2, $3) "
                      "ON CONFLICT DO NOTHING",
                      {PgParam::Text(sha256), PgParam::Int(seq), PgParam::Bytes(std::move(chunk))})
                .status());
      }
      return db
          ->Query("INSERT INTO code_archives VALUES ($1, $2) ON CONFLICT DO NOTHING",
                  {PgParam::Text(sha256), PgParam::Int(bytes)})
          .status();
    });
  });
  close(fd);
  return stored;
}

absl::StatusOr<int64_t> PgCodeArchives::Size(const std::string& sha256) {
  int64_t bytes = -1;
  RETURN_IF_ERROR(pool_.Run([&](PgDb* db) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult row, db->Query("SELECT bytes FROM code_archives WHERE sha256 = $1",
                                             {PgParam::Text(sha256)}));
    if (row.rows() > 0) bytes = row.Int(0, 0);
    return absl::OkStatus();
  }));
  if (bytes < 0) return absl::NotFoundError(absl::StrCat("no code archive ", sha256, " is shared"));
  return bytes;
}

absl::StatusOr<std::string> PgCodeArchives::Read(const std::string& sha256, int64_t offset,
                                                 int max_bytes) {
  if (offset < 0 || max_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", offset, " and max_bytes ", max_bytes, " read nothing"));
  }
  const int64_t first = offset / kChunkBytes;
  const int64_t last = (offset + max_bytes - 1) / kChunkBytes;
  std::string data;
  RETURN_IF_ERROR(pool_.Run([&](PgDb* db) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     db->Query("SELECT data FROM code_chunks WHERE sha256 = $1 AND seq "
                               "BETWEEN $2 AND $3 ORDER BY seq",
                               {PgParam::Text(sha256), PgParam::Int(first), PgParam::Int(last)}));
    data.clear();
    for (int r = 0; r < rows.rows(); ++r) data += rows.Bytes(r, 0);
    return absl::OkStatus();
  }));
  const size_t skip = static_cast<size_t>(offset - first * kChunkBytes);
  if (data.size() <= skip) return std::string();
  return data.substr(skip, static_cast<size_t>(max_bytes));
}

absl::StatusOr<std::map<std::string, int64_t>> PgCodeArchives::List() {
  std::map<std::string, int64_t> archives;
  RETURN_IF_ERROR(pool_.Run([&](PgDb* db) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows, db->Query("SELECT sha256, bytes FROM code_archives"));
    archives.clear();
    for (int r = 0; r < rows.rows(); ++r) archives[rows.Text(r, 0)] = rows.Int(r, 1);
    return absl::OkStatus();
  }));
  return archives;
}

absl::Status PgCodeArchives::Remove(const std::string& sha256) {
  return pool_.Run([&](PgDb* db) {
    return db->Transaction([&]() -> absl::Status {
      if (fence_) RETURN_IF_ERROR(fence_(db));
      RETURN_IF_ERROR(
          db->Query("DELETE FROM code_archives WHERE sha256 = $1", {PgParam::Text(sha256)})
              .status());
      return db->Query("DELETE FROM code_chunks WHERE sha256 = $1", {PgParam::Text(sha256)})
          .status();
    });
  });
}

}  // namespace ringmaster
