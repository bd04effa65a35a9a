// A file descriptor owned by one object and closed with it.
#ifndef RINGMASTER_COMMON_UNIQUE_FD_H_
#define RINGMASTER_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace ringmaster {

// Move-only; -1 holds nothing.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() {
    if (fd_ >= 0) close(fd_);
  }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_UNIQUE_FD_H_
