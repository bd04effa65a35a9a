#include "domain/queue_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/credentials.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

constexpr int kMaxQueues = 1000;
constexpr int64_t kMaxAmount = 1 << 24;

absl::Status Bad(const YAML::Node& node, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("line ", node.Mark().line + 1, ": ", path, ": ", why));
}

std::string Shown(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("\"", node.Scalar(), "\"");
  return node.IsSequence() ? "a list" : node.IsMap() ? "a mapping" : "nothing";
}

// The keys of `map`, each one of `known`, none twice.
absl::Status CheckKeys(const YAML::Node& map, const std::string& path,
                       const std::set<std::string>& known) {
  if (!map.IsMap()) return Bad(map, path, absl::StrCat("expected a mapping, got ", Shown(map)));
  std::set<std::string> seen;
  for (const auto& item : map) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    if (known.count(key) == 0) {
      return Bad(item.first, where,
                 absl::StrCat("unknown key; expected one of ", absl::StrJoin(known, ", ")));
    }
    if (!seen.insert(key).second) return Bad(item.first, where, "given twice");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Integer(const YAML::Node& node, const std::string& path, int64_t low,
                                int64_t high) {
  int64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return Bad(node, path, absl::StrCat("expected an integer, got ", Shown(node)));
  }
  if (v < low || v > high) {
    return Bad(node, path, absl::StrCat("must be in [", low, ", ", high, "], got ", v));
  }
  return v;
}

absl::StatusOr<std::string> Name(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return Bad(node, path, absl::StrCat("expected a name, got ", Shown(node)));
  }
  const std::string& name = node.Scalar();
  const bool valid = name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
                       return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
                     });
  if (!valid) return Bad(node, path, absl::StrCat("\"", name, "\": use 1-63 of [A-Za-z0-9._-]"));
  return name;
}

// {slots: N, gpus: N}; a part left out is `fallback`'s.
absl::StatusOr<SlotAmount> Amount(const YAML::Node& node, const std::string& path,
                                  SlotAmount fallback) {
  RETURN_IF_ERROR(CheckKeys(node, path, {"slots", "gpus"}));
  SlotAmount amount = fallback;
  if (node["slots"]) {
    ASSIGN_OR_RETURN(amount.slots, Integer(node["slots"], path + ".slots", 0, kMaxAmount));
  }
  if (node["gpus"]) {
    ASSIGN_OR_RETURN(amount.gpus, Integer(node["gpus"], path + ".gpus", 0, kMaxAmount));
  }
  return amount;
}

absl::StatusOr<QueueSpec> Queue(const YAML::Node& node, const std::string& path) {
  RETURN_IF_ERROR(CheckKeys(
      node, path,
      {"name", "weight", "quota", "limit", "users", "max_running_jobs_per_user",
       "max_pending_jobs_per_user", "priority_classes", "max_priority", "allow_unpreemptible"}));
  QueueSpec queue;
  if (!node["name"]) return Bad(node, path + ".name", "is required");
  ASSIGN_OR_RETURN(queue.name, Name(node["name"], path + ".name"));
  if (const YAML::Node weight = node["weight"]) {
    if (!weight.IsScalar() || !absl::SimpleAtod(weight.Scalar(), &queue.weight) ||
        !(queue.weight > 0) || queue.weight > 1e6) {
      return Bad(weight, path + ".weight",
                 absl::StrCat("must be a number in (0, 1e6], got ", Shown(weight)));
    }
  }
  // No quota guarantees nothing; no limit is the quota, or everything when
  // there is no quota either.
  if (node["quota"]) {
    ASSIGN_OR_RETURN(queue.quota, Amount(node["quota"], path + ".quota", {}));
  }
  const SlotAmount no_limit = node["quota"] ? queue.quota : SlotAmount::Unlimited();
  queue.limit = no_limit;
  if (node["limit"]) {
    ASSIGN_OR_RETURN(queue.limit, Amount(node["limit"], path + ".limit", no_limit));
    if (!queue.quota.Within(queue.limit)) {
      return Bad(node["limit"], path + ".limit",
                 absl::StrCat("is below the quota (", queue.quota.slots, " slots, ",
                              queue.quota.gpus, " GPUs); a limit is at least the quota"));
    }
  }
  if (const YAML::Node users = node["users"]) {
    if (!users.IsSequence()) {
      return Bad(users, path + ".users", absl::StrCat("expected a list, got ", Shown(users)));
    }
    for (size_t i = 0; i < users.size(); ++i) {
      const std::string where = absl::StrCat(path, ".users[", i, "]");
      if (!users[i].IsScalar()) return Bad(users[i], where, "expected a user name");
      if (absl::Status s = ValidateUserName(users[i].Scalar()); !s.ok()) {
        return Bad(users[i], where, std::string(s.message()));
      }
      queue.users.push_back(users[i].Scalar());
    }
  }
  if (node["max_running_jobs_per_user"]) {
    ASSIGN_OR_RETURN(int64_t most, Integer(node["max_running_jobs_per_user"],
                                           path + ".max_running_jobs_per_user", 0, 1 << 20));
    queue.max_running_jobs_per_user = static_cast<int>(most);
  }
  if (node["max_pending_jobs_per_user"]) {
    ASSIGN_OR_RETURN(int64_t most, Integer(node["max_pending_jobs_per_user"],
                                           path + ".max_pending_jobs_per_user", 0, 1 << 20));
    queue.max_pending_jobs_per_user = static_cast<int>(most);
  }
  // The classes are checked against priority_classes once both are read.
  if (const YAML::Node classes = node["priority_classes"]) {
    if (!classes.IsSequence() || classes.size() == 0) {
      return Bad(classes, path + ".priority_classes",
                 absl::StrCat("expected a list of class names, got ", Shown(classes)));
    }
    for (size_t i = 0; i < classes.size(); ++i) {
      ASSIGN_OR_RETURN(std::string name,
                       Name(classes[i], absl::StrCat(path, ".priority_classes[", i, "]")));
      queue.priority_classes.push_back(std::move(name));
    }
  }
  if (node["max_priority"]) {
    ASSIGN_OR_RETURN(int64_t most, Integer(node["max_priority"], path + ".max_priority",
                                           -kMaxPriority, kMaxPriority));
    queue.max_priority = static_cast<int>(most);
  }
  if (const YAML::Node allow = node["allow_unpreemptible"]) {
    if (!allow.IsScalar() || (allow.Scalar() != "true" && allow.Scalar() != "false")) {
      return Bad(allow, path + ".allow_unpreemptible",
                 absl::StrCat("expected true or false, got ", Shown(allow)));
    }
    queue.allow_unpreemptible = allow.Scalar() == "true";
  }
  return queue;
}

// Each class a queue lists is defined.
absl::Status CheckQueueClasses(const YAML::Node& queues, const QueueConfig& config) {
  for (size_t i = 0; i < config.queues.size(); ++i) {
    const std::vector<std::string>& listed = config.queues[i].priority_classes;
    for (size_t c = 0; c < listed.size(); ++c) {
      if (config.priority_classes.count(listed[c]) == 0) {
        return Bad(queues[i]["priority_classes"][c],
                   absl::StrCat("queues[", i, "].priority_classes[", c, "]"),
                   absl::StrCat("\"", listed[c], "\" is not one of priority_classes"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QueueConfig> ParseDocument(const YAML::Node& root) {
  RETURN_IF_ERROR(CheckKeys(root, "", {"queues", "priority_classes", "default_queue"}));
  QueueConfig config;
  const YAML::Node queues = root["queues"];
  if (!queues || !queues.IsSequence() || queues.size() == 0) {
    return Bad(queues ? queues : root, "queues", "expected a list of at least one queue");
  }
  if (queues.size() > kMaxQueues) {
    return Bad(queues, "queues", absl::StrCat("at most ", kMaxQueues, " queues"));
  }
  std::map<std::string, int> first_line;
  for (size_t i = 0; i < queues.size(); ++i) {
    const std::string path = absl::StrCat("queues[", i, "]");
    ASSIGN_OR_RETURN(QueueSpec queue, Queue(queues[i], path));
    auto [it, added] = first_line.emplace(queue.name, queues[i].Mark().line + 1);
    if (!added) {
      return Bad(
          queues[i]["name"], path + ".name",
          absl::StrCat("queue \"", queue.name, "\" is already defined at line ", it->second));
    }
    config.queues.push_back(std::move(queue));
  }
  if (const YAML::Node classes = root["priority_classes"]) {
    if (!classes.IsMap()) {
      return Bad(classes, "priority_classes",
                 absl::StrCat("expected a mapping of name: priority, got ", Shown(classes)));
    }
    for (const auto& item : classes) {
      ASSIGN_OR_RETURN(std::string name, Name(item.first, "priority_classes"));
      const std::string path = "priority_classes." + name;
      ASSIGN_OR_RETURN(int64_t value, Integer(item.second, path, -kMaxPriority, kMaxPriority));
      if (!config.priority_classes.emplace(name, static_cast<int>(value)).second) {
        return Bad(item.first, path, "given twice");
      }
    }
    if (config.priority_classes.count("normal") == 0) {
      return Bad(classes, "priority_classes",
                 "must define \"normal\", the class of jobs that name none");
    }
  } else {
    config.priority_classes = DefaultQueueConfig().priority_classes;
  }
  RETURN_IF_ERROR(CheckQueueClasses(queues, config));
  config.default_queue = "default";
  if (const YAML::Node name = root["default_queue"]) {
    ASSIGN_OR_RETURN(config.default_queue, Name(name, "default_queue"));
  }
  if (config.Find(config.default_queue) == nullptr) {
    return Bad(root["default_queue"] ? root["default_queue"] : root, "default_queue",
               absl::StrCat("\"", config.default_queue, "\" is not one of the queues listed"));
  }
  return config;
}

}  // namespace

const QueueSpec* QueueConfig::Find(const std::string& name) const {
  for (const QueueSpec& queue : queues) {
    if (queue.name == name) return &queue;
  }
  return nullptr;
}

QueueConfig DefaultQueueConfig() {
  QueueConfig config;
  QueueSpec queue;
  queue.name = "default";
  queue.quota = SlotAmount::Unlimited();
  queue.limit = SlotAmount::Unlimited();
  config.queues.push_back(queue);
  config.priority_classes = {{"low", 0}, {"normal", 100}, {"high", 1000}};
  config.default_queue = "default";
  return config;
}

absl::StatusOr<QueueConfig> ParseQueueConfig(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  try {
    return ParseDocument(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
}

namespace {

// The file's bytes; nullopt when it cannot be read.
std::optional<std::string> ReadQueuesText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<QueueConfig> ParseQueuesText(const std::string& path,
                                            const std::optional<std::string>& text) {
  if (!text) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read it"));
  absl::StatusOr<QueueConfig> config = ParseQueueConfig(*text);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " ", config.status().message()));
  }
  return config;
}

}  // namespace

absl::StatusOr<QueueConfig> LoadQueueConfig(const std::string& path) {
  return ParseQueuesText(path, ReadQueuesText(path));
}

std::optional<absl::StatusOr<QueueConfig>> QueuesFile::Read(bool always) {
  std::optional<std::string> text = ReadQueuesText(path_);
  const bool settled = text == seen_;
  seen_ = text;
  if (!always && read_ && (text == last_ || !settled)) return std::nullopt;
  read_ = true;
  last_ = text;
  return ParseQueuesText(path_, text);
}

namespace {

// Whether the users of `queue` may name the class `name` of `priority`.
bool ClassOpen(const QueueConfig& config, const QueueSpec& queue, const std::string& name,
               int priority) {
  const std::vector<std::string>& listed = queue.priority_classes;
  if (!listed.empty() && std::find(listed.begin(), listed.end(), name) == listed.end()) {
    return false;
  }
  std::optional<int> most = queue.max_priority;
  if (!most && listed.empty()) most = config.priority_classes.at("normal");
  return !most || priority <= *most;
}

// "low (0), normal (100)": the classes of `config`, those open to the
// users of `queue` when it is given.
std::string Classes(const QueueConfig& config, const QueueSpec* queue) {
  std::vector<std::string> shown;
  for (const auto& [name, value] : config.priority_classes) {
    if (queue == nullptr || ClassOpen(config, *queue, name, value)) {
      shown.push_back(absl::StrCat(name, " (", value, ")"));
    }
  }
  return shown.empty() ? "none" : absl::StrJoin(shown, ", ");
}

// An optional '-' and digits: an integer, whether or not it fits.
bool LooksLikeInteger(absl::string_view text) {
  absl::ConsumePrefix(&text, "-");
  return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
}

// The priority the spec names, as a number, checked for `user`.
absl::StatusOr<int> Priority(const QueueConfig& config, const QueueSpec& queue,
                             const std::string& priority, const std::string& user) {
  const bool admin = user == kAdminUser;
  if (auto it = config.priority_classes.find(priority); it != config.priority_classes.end()) {
    if (!admin && !ClassOpen(config, queue, it->first, it->second)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "priority: class ", priority, " (", it->second, ") is not open to users of queue ",
          queue.name, "; theirs are ", Classes(config, &queue),
          priority == "normal" ? " (a job that names no priority is normal: name one of them)"
                               : ""));
    }
    return it->second;
  }
  if (!LooksLikeInteger(priority)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority: \"", priority, "\" is neither a priority class nor an integer; the classes are ",
        Classes(config, nullptr)));
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(priority, &value) || value < 0 || value > kMaxPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority: ", priority, " is out of range: an integer priority is in [0, ",
                     kMaxPriority, "] (a negative one comes only from a class)"));
  }
  if (!admin) {
    return absl::PermissionDeniedError(absl::StrCat("priority: an integer priority (", priority,
                                                    ") is the admin's; users of queue ", queue.name,
                                                    " name a class: ", Classes(config, &queue)));
  }
  return static_cast<int>(value);
}

}  // namespace

absl::StatusOr<QueueAdmission> AdmitToQueue(const QueueConfig& config, const v1::JobSpec& spec,
                                            const std::string& user) {
  QueueAdmission admission;
  admission.queue = spec.queue().empty() ? config.default_queue : spec.queue();
  const QueueSpec* queue = config.Find(admission.queue);
  if (queue == nullptr) {
    std::vector<std::string> names;
    for (const QueueSpec& q : config.queues) names.push_back(q.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "queue: no queue \"", admission.queue, "\"; the queues are ", absl::StrJoin(names, ", ")));
  }
  const bool admin = user == kAdminUser;
  if (!queue->users.empty() && !admin &&
      std::find(queue->users.begin(), queue->users.end(), user) == queue->users.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("queue: user ", user, " may not submit to queue ", queue->name,
                     "; its users are ", absl::StrJoin(queue->users, ", ")));
  }
  ASSIGN_OR_RETURN(
      admission.priority,
      Priority(config, *queue, spec.priority().empty() ? "normal" : spec.priority(), user));
  if (spec.has_preemptible() && !spec.preemptible() && !admin && !queue->allow_unpreemptible) {
    return absl::PermissionDeniedError(
        absl::StrCat("preemptible: false is not allowed in queue ", queue->name,
                     " (it does not set allow_unpreemptible); leave it out"));
  }
  return admission;
}

}  // namespace ringmaster
