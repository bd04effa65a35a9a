// A rank's log: the worker reads the rank's stdout and stderr from a pipe
// and appends them to a file as records, one per line or piece of a line:
//
//   2026-11-23T10:00:00.123456789Z F the line's text
//
// The timestamp is when the worker read the text (UTC, always 30 bytes);
// F ends a line of the rank's output, P is a piece that the next record
// continues (output with no newline yet, or the first part of a line
// longer than kMaxRecordText). This is the container runtimes' log format
// (CRI) without its stream name.
#ifndef RINGMASTER_WORKER_RANK_LOG_H_
#define RINGMASTER_WORKER_RANK_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace ringmaster {

inline constexpr size_t kMaxRecordText = 16 * 1024;
inline constexpr size_t kTimestampBytes = 30;     // 2026-11-23T10:00:00.123456789Z
inline constexpr size_t kRecordPrefixBytes = 33;  // timestamp, space, tag, space

// Appends `text` (no newline in it) as one or more records.
void AppendRecords(absl::Time time, absl::string_view text, bool ends_line, std::string* out);

// Renders the whole records at the front of `records` as the rank wrote
// them, each line begun with its first piece's timestamp when `timestamps`.
// `mid_line` says whether the output so far ends inside a line, and is
// updated. Returns the bytes of `records` used (up to its last newline). A
// line that is not a record (a file of an older format) passes as it is.
size_t RenderRecords(absl::string_view records, bool timestamps, bool* mid_line, std::string* out);

// The offset in the log at `fd` (whose whole records end at `size`) where
// its last `lines` lines begin: 0 when it has no more than that.
absl::StatusOr<int64_t> TailOffset(int fd, int64_t size, int lines);

// Copies what a process writes to a pipe into a log file as records, on a
// thread of its own, until every writer has closed the pipe. Writes the
// records of each read with one write(2), so a reader never sees half a
// record except at the end of the file while it is written.
class LogPump {
 public:
  using Clock = std::function<absl::Time()>;

  // Takes `read_fd`; appends to `path` (created 0640).
  static absl::StatusOr<std::unique_ptr<LogPump>> Start(int read_fd, const std::string& path,
                                                        Clock now = absl::Now);
  ~LogPump();  // Finish(zero)

  // Waits up to `timeout` for the pipe to close (what is in it is
  // written), then stops: a process that escaped its group may still hold
  // the pipe.
  void Finish(absl::Duration timeout);

 private:
  LogPump(int read_fd, int log_fd, int stop_fd, Clock now);
  void Run();
  // Writes the records of one read at once: a last piece with no newline
  // yet is a P record that a later one continues.
  void Write(absl::string_view data);

  const int read_fd_;
  const int log_fd_;
  const int stop_fd_;  // an eventfd: Finish's give-up
  const Clock now_;
  bool write_failed_ = false;  // used by the pump's thread only
  Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the pipe reached its end
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_LOG_H_
