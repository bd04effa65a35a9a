// The coordinator's queues (--queues FILE): who may submit where, how much
// each queue is guaranteed and may borrow, its share of idle capacity, and
// the priority classes jobs name. See docs/scheduling.md.
#ifndef RINGMASTER_DOMAIN_QUEUE_CONFIG_H_
#define RINGMASTER_DOMAIN_QUEUE_CONFIG_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace ringmaster {

// An amount of the cluster: slots (every slot, GPU slots included) and
// GPUs (GPU slots only).
struct SlotAmount {
  static constexpr int64_t kUnlimited = std::numeric_limits<int32_t>::max();
  int64_t slots = 0;
  int64_t gpus = 0;

  static SlotAmount Unlimited() { return {kUnlimited, kUnlimited}; }
  bool unlimited() const { return slots >= kUnlimited && gpus >= kUnlimited; }
  // Whether every part of `this` is at most `other`'s.
  bool Within(const SlotAmount& other) const { return slots <= other.slots && gpus <= other.gpus; }
  SlotAmount operator+(const SlotAmount& o) const { return {slots + o.slots, gpus + o.gpus}; }
  SlotAmount operator-(const SlotAmount& o) const { return {slots - o.slots, gpus - o.gpus}; }
  bool operator==(const SlotAmount& o) const { return slots == o.slots && gpus == o.gpus; }
};

struct QueueSpec {
  std::string name;
  double weight = 1;  // share of idle capacity against the other queues
  // Guaranteed: the queue may take it back from borrowers by preemption.
  SlotAmount quota;
  // The most it may use, borrowing idle capacity beyond its quota.
  SlotAmount limit;
  std::vector<std::string> users;     // who may submit to it; empty: anyone
  int max_running_jobs_per_user = 0;  // 0: no limit
  // A user's jobs waiting in it at most; 0: the coordinator's
  // --max-pending-jobs-per-user alone.
  int max_pending_jobs_per_user = 0;
  // What its users may ask (the admin may ask anything). The priority
  // classes they may name: those listed, at most max_priority when it is
  // set; with none listed, every class up to max_priority, which is then
  // "normal"'s priority unless set. An integer priority is the admin's.
  std::vector<std::string> priority_classes;
  std::optional<int> max_priority;
  bool allow_unpreemptible = false;  // whether its users may ask preemptible: false
};

struct QueueConfig {
  std::vector<QueueSpec> queues;
  std::map<std::string, int> priority_classes;  // name -> priority
  std::string default_queue;

  const QueueSpec* Find(const std::string& name) const;
};

// Without --queues: one queue, "default", with no quota and no limit, and
// the classes low 0, normal 100, high 1000.
QueueConfig DefaultQueueConfig();

// The file's text. INVALID_ARGUMENT "line L: <what>: <why>" for the first
// thing wrong: syntax, an unknown key, a bad value, two queues of one name,
// a quota over its limit, a default_queue that is not listed, classes
// without "normal" (the class of jobs that name none).
absl::StatusOr<QueueConfig> ParseQueueConfig(const std::string& text);
// The file at `path`, as ParseQueueConfig, its errors prefixed with it.
absl::StatusOr<QueueConfig> LoadQueueConfig(const std::string& path);

// The --queues file as a coordinator follows it: read again when asked
// (SIGHUP), or when its bytes changed since the last reading (an edit, or
// a Kubernetes ConfigMap's new version swapped in under the same path) and
// are the same at the next look, so that a file caught half written is
// not taken. One thread asks.
class QueuesFile {
 public:
  explicit QueuesFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // The file's queues, or why they cannot be taken (as LoadQueueConfig),
  // when `always`, or when its bytes differ from the last taken and are
  // those of the look before; nullopt otherwise. A file that cannot be
  // read is a change too.
  std::optional<absl::StatusOr<QueueConfig>> Read(bool always);

 private:
  const std::string path_;
  bool read_ = false;
  std::optional<std::string> last_;  // the bytes last taken; nullopt: unreadable
  std::optional<std::string> seen_;  // the bytes of the look before
};

// The highest integer priority (the lowest is 0: a negative priority
// comes only from a class).
inline constexpr int kMaxPriority = 1000000000;

// What a job's spec asks in queue terms, checked against `config` for the
// submitting `user`. The queue (the default queue when the spec names
// none) and the priority as a number. INVALID_ARGUMENT for an unknown
// queue or class, or an integer priority out of [0, kMaxPriority];
// PERMISSION_DENIED, its message beginning with the spec's field
// ("queue: ", "priority: ", "preemptible: "), for a queue the user may not
// use, a class not open to its users, an integer priority from anyone but
// the admin, and preemptible: false where the queue does not allow it.
struct QueueAdmission {
  std::string queue;
  int priority = 0;
};
absl::StatusOr<QueueAdmission> AdmitToQueue(const QueueConfig& config, const v1::JobSpec& spec,
                                            const std::string& user);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_QUEUE_CONFIG_H_
