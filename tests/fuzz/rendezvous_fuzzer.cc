// The rendezvous store's request handling on any sequence of requests, as
// ranks send them (Set, Get, Add, Wait, with keys and values of any bytes
// and sizes against small limits, scopes opened and dropped, time passing):
// no crash, every refusal a status with a message, a value read back as
// set, a sum that adds up, and every waiter answered once.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "common/fake_clock.h"
#include "common/job_id.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "tests/fuzz/require.h"

namespace {

// Reads the fuzz input as a stream of small fields.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string Bytes() {
    const size_t n = std::min<size_t>(Byte() * (Byte() % 4 + 1), size_ - pos_);
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::FakeClock clock;
  ringmaster::RendezvousLimits limits;
  limits.max_value_bytes = 300;
  limits.max_scope_bytes = 2000;
  ringmaster::RendezvousStore store(&clock, limits);
  int waits = 0;
  int answered = 0;
  std::map<std::string, std::string> set;  // of scope 0, as last set
  Input in(data, size);
  while (!in.done()) {
    const ringmaster::ScopeId scope{in.Byte() % 2 ? "job-1" : "job-2", 0};
    const std::string key = in.Bytes();
    switch (in.Byte() % 7) {
      case 0:
        store.OpenScope(scope);
        break;
      case 1:
        store.DropScope(scope);
        break;
      case 2: {
        const std::string value = in.Bytes();
        const absl::Status s = store.Set(scope, key, value);
        ringmaster::Require(s.ok() || !s.message().empty(), "a refused Set says why");
        if (s.ok() && scope.job_id == "job-1") set[key] = value;
        break;
      }
      case 3: {
        absl::StatusOr<std::string> value = store.Get(scope, key);
        ringmaster::Require(
            !value.ok() || scope.job_id != "job-1" || !set.count(key) || *value == set[key],
            "a value reads back as last set");
        break;
      }
      case 4: {
        absl::StatusOr<int64_t> sum = store.Add(scope, key, static_cast<int8_t>(in.Byte()));
        ringmaster::Require(sum.ok() || !sum.status().message().empty(), "a refused Add says why");
        if (sum.ok() && scope.job_id == "job-1") set[key] = std::to_string(*sum);
        break;
      }
      case 5:
        ++waits;
        store.Wait(scope, {key, in.Bytes()}, clock.Now() + absl::Seconds(in.Byte() % 4),
                   [&answered](absl::Status) { ++answered; });
        break;
      case 6:
        clock.Advance(absl::Seconds(1));
        store.ExpireWaiters();
        ringmaster::ValidateJobId(key).IgnoreError();  // any bytes as a job id
        break;
    }
    if (in.Byte() % 5 == 0) set.clear();  // a drop may have emptied it: stop tracking
  }
  store.Close();  // answers every waiter left
  ringmaster::Require(answered == waits, "every waiter is answered once");
  return 0;
}
