#include "coordinator/queue_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
      node, path, {"name", "weight", "quota", "limit", "users", "max_running_jobs_per_user"}));
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
  return queue;
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
      ASSIGN_OR_RETURN(int64_t value, Integer(item.second, path, -1000000000, 1000000000));
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

absl::StatusOr<QueueConfig> LoadQueueConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<QueueConfig> config = ParseQueueConfig(text.str());
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " ", config.status().message()));
  }
  return config;
}

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
  if (!queue->users.empty() && user != kAdminUser &&
      std::find(queue->users.begin(), queue->users.end(), user) == queue->users.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("queue: user ", user, " may not submit to queue ", queue->name,
                     "; its users are ", absl::StrJoin(queue->users, ", ")));
  }
  const std::string& priority = spec.priority().empty() ? "normal" : spec.priority();
  if (auto it = config.priority_classes.find(priority); it != config.priority_classes.end()) {
    admission.priority = it->second;
  } else if (!absl::SimpleAtoi(priority, &admission.priority) ||
             std::abs(static_cast<int64_t>(admission.priority)) > 1000000000) {
    std::vector<std::string> classes;
    for (const auto& [name, value] : config.priority_classes) {
      classes.push_back(absl::StrCat(name, " (", value, ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "priority: \"", priority, "\" is neither a priority class nor an integer; the classes are ",
        absl::StrJoin(classes, ", ")));
  }
  return admission;
}

}  // namespace ringmaster
