#include "trainer/ring_allreduce.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "trainer/catch_status.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

// What a connecting rank sends first: who it is, so that a stray or stale
// connection is refused rather than summed.
struct Hello {
  uint32_t magic;
  uint32_t size;
  uint32_t rank;
};
constexpr uint32_t kMagic = 0x524d5231;  // "RMR1"

struct Range {
  size_t begin;
  size_t end;
  size_t size() const { return end - begin; }
};

// Block b of n floats cut into `blocks`.
Range BlockOf(size_t n, int blocks, int b) {
  const size_t share = (n + blocks - 1) / blocks;
  return {std::min(n, share * b), std::min(n, share * (b + 1))};
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits for `events` on fd until the deadline: true when they came.
absl::StatusOr<bool> PollOne(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, MillisLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return ErrnoError("poll");
  }
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, const std::string& port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  return found;
}

// Connects to host:port and says who this rank is.
absl::StatusOr<int> Dial(const std::string& host, const std::string& port, const Hello& hello,
                         Clock::time_point deadline) {
  ASSIGN_OR_RETURN(addrinfo * peer, Resolve(host, port, AI_NUMERICHOST | AI_NUMERICSERV));
  absl::Cleanup free_peer = [peer] { freeaddrinfo(peer); };
  const int fd = socket(peer->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError("socket");
  const int buffer = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  absl::Cleanup close_fd = [fd] { close(fd); };
  if (connect(fd, peer->ai_addr, peer->ai_addrlen) != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", host, " port ", port, ": ", std::strerror(errno)));
  }
  ASSIGN_OR_RETURN(const bool connected, PollOne(fd, POLLOUT, deadline));
  int error = connected ? 0 : ETIMEDOUT;
  socklen_t length = sizeof(error);
  if (connected) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", host, " port ", port, ": ", std::strerror(error)));
  }
  // A fresh socket's buffer takes 12 bytes whole.
  if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello))) {
    return ErrnoError(absl::StrCat("send to ", host));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::move(close_fd).Cancel();
  return fd;
}

// Accepts the previous rank's connection and checks who it is.
absl::StatusOr<int> AcceptFrom(int listener, const Hello& expected, Clock::time_point deadline) {
  ASSIGN_OR_RETURN(const bool ready, PollOne(listener, POLLIN, deadline));
  if (!ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("ring rank ", expected.rank, " did not connect in time"));
  }
  const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return ErrnoError("accept");
  absl::Cleanup close_fd = [fd] { close(fd); };
  Hello hello{};
  size_t got = 0;
  while (got < sizeof(hello)) {
    const ssize_t k = recv(fd, reinterpret_cast<char*>(&hello) + got, sizeof(hello) - got, 0);
    if (k > 0) {
      got += k;
      continue;
    }
    if (k == 0) return absl::UnavailableError("the ring's previous rank closed at connect");
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return ErrnoError("recv");
    ASSIGN_OR_RETURN(const bool readable, PollOne(fd, POLLIN, deadline));
    if (!readable) return absl::DeadlineExceededError("the ring's previous rank said nothing");
  }
  if (hello.magic != expected.magic || hello.size != expected.size || hello.rank != expected.rank) {
    return absl::FailedPreconditionError(
        absl::StrCat("a connection to the ring claims rank ", hello.rank, " of ", hello.size,
                     "; expected rank ", expected.rank, " of ", expected.size));
  }
  std::move(close_fd).Cancel();
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingAllReduce>> RingAllReduce::Connect(
    gloo::rendezvous::Store& store, const std::string& key, int rank, int size,
    const std::string& address, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  ASSIGN_OR_RETURN(addrinfo * local, Resolve(address, "0", AI_NUMERICSERV));
  absl::Cleanup free_local = [local] { freeaddrinfo(local); };
  const int listener = socket(local->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return ErrnoError("socket");
  absl::Cleanup close_listener = [listener] { close(listener); };
  const int buffer = 4 << 20;
  setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  if (bind(listener, local->ai_addr, local->ai_addrlen) != 0) {
    return ErrnoError(absl::StrCat("bind to ", address));
  }
  if (listen(listener, 4) != 0) return ErrnoError("listen");
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    return ErrnoError("getsockname");
  }
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&bound), length, host, sizeof(host), port,
                  sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return absl::InternalError("getnameinfo of the ring's listening socket");
  }

  const int next = (rank + 1) % size;
  std::vector<char> peer;
  RETURN_IF_ERROR(CatchAsStatus("rendezvous store (ring)", [&] {
    const std::string mine = absl::StrCat(host, " ", port);
    store.set(absl::StrCat(key, "/", rank), std::vector<char>(mine.begin(), mine.end()));
    const std::string theirs = absl::StrCat(key, "/", next);
    store.wait({theirs}, timeout);
    peer = store.get(theirs);
  }));
  const std::vector<std::string> parts = absl::StrSplit(std::string(peer.begin(), peer.end()), ' ');
  if (parts.size() != 2) return absl::InternalError("a malformed ring address in the store");

  const auto u32 = [](int v) { return static_cast<uint32_t>(v); };
  ASSIGN_OR_RETURN(const int out,
                   Dial(parts[0], parts[1], {kMagic, u32(size), u32(rank)}, deadline));
  absl::Cleanup close_out = [out] { close(out); };
  ASSIGN_OR_RETURN(
      const int in,
      AcceptFrom(listener, {kMagic, u32(size), u32((rank + size - 1) % size)}, deadline));
  std::move(close_out).Cancel();
  return std::unique_ptr<RingAllReduce>(new RingAllReduce(rank, size, out, in, timeout));
}

RingAllReduce::~RingAllReduce() {
  close(next_);
  close(prev_);
}

absl::Status RingAllReduce::AllReduceSum(float* data, size_t n) {
  if (!broken_.ok()) return broken_;
  if (size_ == 1 || n == 0) return absl::OkStatus();
  absl::Status status = Run(data, n);
  if (!status.ok()) broken_ = status;
  return status;
}

// Both streams are the blocks of 2(P-1) steps, in order. Step t receives
// block r-t-1 (mod P) and sends block r-t: its own at step 0, then each
// block it received the step before. Steps 0..P-2 reduce-scatter (a
// received block is added to this rank's, and after them this rank holds
// the full sum of block r+1); steps P-1..2P-3 all-gather (the summed blocks
// go once round the ring, landing in place). So the outgoing stream is
// block r followed by the incoming stream (but its last step), and every
// incoming byte can go out as soon as it is summed.
// poll() reports the incoming connection readable only once this much of
// the current block has arrived, or the rest of it: fewer wake-ups, recv
// calls and window-update ACKs per byte, which cost more CPU than summing
// a piece that no longer fits in cache (4 MiB trains faster than 256 KiB,
// and than 4 MiB taken 256 KiB per recv). Never more than the rest of the
// block: the upstream rank may be waiting for this one to pass on the
// block before its next one can be summed. The kernel holds it to half the
// receive buffer (8 MiB where net.core.rmem_max allows the 4 MiB asked).
constexpr size_t kLowWater = 4 << 20;

class RingAllReduce::Pass {
 public:
  Pass(RingAllReduce& ring, float* data, size_t n)
      : ring_(ring), data_(data), n_(n), steps_(2 * (ring.size_ - 1)) {
    ring_.scratch_.resize(BlockOf(n, ring.size_, 0).size());
    for (int t = 0; t < steps_; ++t) {
      out_total_ += Bytes(OutBlock(t));
    }
  }

  // The incoming connection's SO_RCVLOWAT for the current block.
  absl::Status SetLowWater() {
    const size_t left = in_.step < steps_ ? Bytes(InBlock(in_.step)) - in_.offset : 0;
    const int value = static_cast<int>(std::clamp<size_t>(left, 1, kLowWater));
    if (value == ring_.low_water_) return absl::OkStatus();
    if (setsockopt(ring_.prev_, SOL_SOCKET, SO_RCVLOWAT, &value, sizeof(value)) != 0) {
      return ErrnoError("ring all-reduce: SO_RCVLOWAT");
    }
    ring_.low_water_ = value;
    return absl::OkStatus();
  }

  // Steps past finished ones, and the empty blocks of a short buffer; true
  // when both streams are through.
  bool Done() {
    while (out_.step < steps_ && out_.offset == Bytes(OutBlock(out_.step))) {
      ++out_.step;
      out_.offset = 0;
    }
    while (in_.step < steps_ && in_.offset == Bytes(InBlock(in_.step))) {
      ++in_.step;
      in_.done += in_.offset;
      in_.offset = in_.summed = 0;
    }
    return in_.step == steps_ && out_.step == steps_;
  }

  // Sends what may go out until the socket takes no more; true if any did.
  absl::StatusOr<bool> Send() {
    bool moved = false;
    while (out_.sent < CanSend()) {
      Done();
      const Range block = OutBlock(out_.step);
      const size_t len = std::min(Bytes(block) - out_.offset, CanSend() - out_.sent);
      const ssize_t k =
          send(ring_.next_, At(block) + out_.offset, len, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return absl::UnavailableError(absl::StrCat("ring all-reduce: sending to peer rank ",
                                                   ring_.next_rank(), ": ", std::strerror(errno)));
      }
      moved = true;
      out_.sent += k;
      out_.offset += k;
    }
    return moved;
  }

  // Takes what has arrived of the current step (one recv) and sums it or
  // lands it in place; true if anything came.
  absl::StatusOr<bool> Receive() {
    if (in_.step == steps_) return false;
    const Range block = InBlock(in_.step);
    const bool summing = in_.step < ring_.size_ - 1;
    char* landing = summing ? reinterpret_cast<char*>(ring_.scratch_.data()) + in_.offset
                            : At(block) + in_.offset;
    const ssize_t k = recv(ring_.prev_, landing, Bytes(block) - in_.offset, MSG_DONTWAIT);
    if (k == 0) {
      return absl::UnavailableError(
          absl::StrCat("ring all-reduce: peer rank ", ring_.prev_rank(), " closed its connection"));
    }
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
      return absl::UnavailableError(absl::StrCat("ring all-reduce: receiving from peer rank ",
                                                 ring_.prev_rank(), ": ", std::strerror(errno)));
    }
    in_.offset += k;
    if (summing) {
      const size_t whole = in_.offset / sizeof(float);
      float* mine = data_ + block.begin;
      const float* incoming = ring_.scratch_.data();
      for (size_t i = in_.summed; i < whole; ++i) mine[i] += incoming[i];
      in_.summed = whole;
      in_.final = in_.done + in_.summed * sizeof(float);
    } else {
      in_.final = in_.done + in_.offset;
    }
    return true;
  }

  // Waits until a socket can move what is left, or the deadline.
  absl::Status Wait(Clock::time_point deadline) {
    RETURN_IF_ERROR(SetLowWater());
    pollfd fds[2] = {{ring_.next_, static_cast<short>(out_.sent < CanSend() ? POLLOUT : 0), 0},
                     {ring_.prev_, static_cast<short>(in_.step < steps_ ? POLLIN : 0), 0}};
    const int rc = poll(fds, 2, MillisLeft(deadline));
    if (rc < 0 && errno != EINTR) return ErrnoError("ring all-reduce: poll");
    if (rc == 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ring all-reduce: nothing moved between rank ", ring_.prev_rank(), ", this rank (",
          ring_.rank_, ") and rank ", ring_.next_rank(), " for ", ring_.timeout_.count(), " ms"));
    }
    if (fds[0].revents & (POLLERR | POLLHUP)) {
      return absl::UnavailableError(
          absl::StrCat("ring all-reduce: the connection to rank ", ring_.next_rank(), " failed"));
    }
    return absl::OkStatus();
  }

 private:
  static size_t Bytes(Range block) { return block.size() * sizeof(float); }
  Range InBlock(int t) const { return Block(ring_.rank_ - t - 1); }
  Range OutBlock(int t) const { return Block(ring_.rank_ - t); }
  Range Block(int b) const {
    const int p = ring_.size_;
    return BlockOf(n_, p, (b % p + p) % p);
  }
  char* At(Range block) const { return reinterpret_cast<char*>(data_ + block.begin); }
  // Bytes of the outgoing stream that are final: this rank's own block,
  // then what has been summed or landed of the incoming one.
  size_t CanSend() const { return std::min(out_total_, Bytes(OutBlock(0)) + in_.final); }

  RingAllReduce& ring_;
  float* const data_;
  const size_t n_;
  const int steps_;
  size_t out_total_ = 0;  // bytes of the outgoing stream
  struct {
    int step = 0;
    size_t offset = 0;  // bytes of this step sent
    size_t sent = 0;    // bytes of the stream sent
  } out_;
  struct {
    int step = 0;
    size_t offset = 0;  // bytes of this step received
    size_t summed = 0;  // floats of this step summed
    size_t done = 0;    // bytes of the finished steps
    size_t final = 0;   // bytes of the stream summed or landed: free to go on
  } in_;
};

absl::Status RingAllReduce::Run(float* data, size_t n) {
  Pass pass(*this, data, n);
  Clock::time_point deadline = Clock::now() + timeout_;
  while (!pass.Done()) {
    ASSIGN_OR_RETURN(const bool sent, pass.Send());
    ASSIGN_OR_RETURN(const bool received, pass.Receive());
    if (sent || received) {
      deadline = Clock::now() + timeout_;
    } else {
      RETURN_IF_ERROR(pass.Wait(deadline));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
