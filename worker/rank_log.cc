#include "worker/rank_log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster {
namespace {

constexpr size_t kReadBytes = 64 * 1024;

// "2026-11-23T10:00:00.123456789Z F " or "… P ".
bool IsRecord(absl::string_view line) {
  return line.size() >= kRecordPrefixBytes && line[10] == 'T' && line[29] == 'Z' &&
         line[30] == ' ' && (line[31] == 'F' || line[31] == 'P') && line[32] == ' ';
}

// A line that is not a record counts as a whole line.
bool EndsLine(absl::string_view line) { return !IsRecord(line) || line[31] == 'F'; }

}  // namespace

void AppendRecords(absl::Time time, absl::string_view text, bool ends_line, std::string* out) {
  const std::string stamp = absl::FormatTime("%Y-%m-%dT%H:%M:%E9SZ", time, absl::UTCTimeZone());
  do {
    const absl::string_view piece = text.substr(0, kMaxRecordText);
    text.remove_prefix(piece.size());
    const bool last = text.empty();
    absl::StrAppend(out, stamp, last && ends_line ? " F " : " P ", piece, "\n");
  } while (!text.empty());
}

size_t RenderRecords(absl::string_view records, bool timestamps, bool* mid_line, std::string* out) {
  size_t used = 0;
  for (size_t end; (end = records.find('\n', used)) != absl::string_view::npos; used = end + 1) {
    const absl::string_view line = records.substr(used, end - used);
    if (!IsRecord(line)) {
      absl::StrAppend(out, *mid_line ? "\n" : "", line, "\n");
      *mid_line = false;
      continue;
    }
    if (timestamps && !*mid_line) absl::StrAppend(out, line.substr(0, kTimestampBytes), " ");
    absl::StrAppend(out, line.substr(kRecordPrefixBytes));
    *mid_line = !EndsLine(line);
    if (!*mid_line) out->push_back('\n');
  }
  return used;
}

absl::StatusOr<int64_t> TailOffset(int fd, int64_t size, int lines) {
  constexpr int64_t kBlock = 64 * 1024;
  std::string buffer;  // the file's bytes from `start` on, up to what is looked at
  int64_t start = size;
  // Brings in the block before `start`; false at the file's beginning.
  auto extend = [&]() -> absl::StatusOr<bool> {
    if (start == 0) return false;
    const int64_t from = std::max<int64_t>(0, start - kBlock);
    std::string block(start - from, '\0');
    for (size_t got = 0; got < block.size();) {
      const ssize_t n = pread(fd, block.data() + got, block.size() - got, from + got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return absl::InternalError(absl::StrCat("read: ", strerror(errno)));
      got += n;
    }
    buffer.insert(0, block);
    start = from;
    return true;
  };
  // The end of the whole records (a record being written has no newline).
  size_t end;
  while ((end = buffer.rfind('\n')) == std::string::npos) {
    absl::StatusOr<bool> more = extend();
    if (!more.ok()) return more.status();
    if (!*more) return 0;
  }
  buffer.resize(end + 1);
  // Records from the last back: the lines begin after the F record that
  // ends the line before them. A last line still in pieces is one of them.
  int whole_lines = -1;  // lines ended by F records that belong to the tail
  int ended = 0;         // F records passed
  // The newline before the buffer's last record: npos when none is loaded.
  auto newline_before_last = [&buffer] {
    return buffer.size() < 2 ? std::string::npos : buffer.rfind('\n', buffer.size() - 2);
  };
  while (!buffer.empty()) {
    size_t before;
    while ((before = newline_before_last()) == std::string::npos && start > 0) {
      absl::StatusOr<bool> more = extend();
      if (!more.ok()) return more.status();
    }
    const size_t begin = before == std::string::npos ? 0 : before + 1;
    const bool ends_line =
        EndsLine(absl::string_view(buffer).substr(begin, buffer.size() - 1 - begin));
    if (whole_lines < 0) whole_lines = ends_line ? lines : lines - 1;
    if (ends_line && ended++ == whole_lines) return start + static_cast<int64_t>(buffer.size());
    buffer.resize(begin);
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<LogPump>> LogPump::Start(int read_fd, const std::string& path,
                                                        Clock now) {
  // Never through a link, nor into anything but a regular file.
  const int log_fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
  struct stat st;
  const bool opened = log_fd >= 0 && fstat(log_fd, &st) == 0;
  if (!opened || !S_ISREG(st.st_mode)) {
    const std::string why = opened ? "not a regular file" : strerror(errno);
    if (log_fd >= 0) close(log_fd);
    close(read_fd);
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", why));
  }
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0 || fcntl(read_fd, F_SETFL, O_NONBLOCK) != 0) {
    const int saved = errno;
    if (stop_fd >= 0) close(stop_fd);
    close(log_fd);
    close(read_fd);
    return absl::InternalError(absl::StrCat("log pipe of ", path, ": ", strerror(saved)));
  }
  return std::unique_ptr<LogPump>(new LogPump(read_fd, log_fd, stop_fd, std::move(now)));
}

LogPump::LogPump(int read_fd, int log_fd, int stop_fd, Clock now)
    : read_fd_(read_fd), log_fd_(log_fd), stop_fd_(stop_fd), now_(std::move(now)) {
  thread_ = std::thread([this] { Run(); });
}

LogPump::~LogPump() {
  Finish(absl::ZeroDuration());
  close(read_fd_);
  close(log_fd_);
  close(stop_fd_);
}

void LogPump::Finish(absl::Duration timeout) {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&closed_), timeout);
  }
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  thread_.join();
}

void LogPump::Run() {
  std::string data(kReadBytes, '\0');
  pollfd fds[2] = {{read_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const bool stopping = (fds[1].revents & POLLIN) != 0;
    // Reads what the pipe holds; when stopping, up to what it holds now.
    ssize_t n;
    while ((n = read(read_fd_, data.data(), data.size())) > 0) {
      Write(absl::string_view(data.data(), n));
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      MutexLock lock(&mu_);
      closed_ = true;
      return;
    }
    if (stopping) return;
  }
}

void LogPump::Write(absl::string_view data) {
  const absl::Time time = now_();
  std::string records;
  while (!data.empty()) {
    const size_t end = data.find('\n');
    const bool ends_line = end != absl::string_view::npos;
    AppendRecords(time, data.substr(0, end), ends_line, &records);
    data.remove_prefix(ends_line ? end + 1 : data.size());
  }
  absl::string_view rest = records;
  while (!rest.empty()) {
    const ssize_t n = write(log_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!write_failed_) spdlog::error("cannot write a rank's log: {}", strerror(errno));
      write_failed_ = true;  // the output is dropped; the rank goes on
      return;
    }
    rest.remove_prefix(n);
  }
}

}  // namespace ringmaster
