#include "worker/cdi.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/unique_fd.h"

namespace ringmaster {
namespace {

// node[key], or a null node when there is none (yaml-cpp's missing key
// throws at its first use).
YAML::Node Child(const YAML::Node& node, const char* key) {
  if (node.IsMap()) {
    if (YAML::Node value = node[key]; value.IsDefined()) return value;
  }
  return YAML::Node();
}

// node[key] when it is a sequence, else an empty one.
YAML::Node Seq(const YAML::Node& node, const char* key) {
  YAML::Node value = Child(node, key);
  return value.IsSequence() ? value : YAML::Node(YAML::NodeType::Sequence);
}

std::vector<std::string> Strings(const YAML::Node& node, const char* key) {
  std::vector<std::string> out;
  for (const YAML::Node& item : Seq(node, key)) out.push_back(item.as<std::string>());
  return out;
}

// Throws YAML::Exception where a field has the wrong type.
ContainerEdits ParseEdits(const YAML::Node& node) {
  ContainerEdits edits;
  for (const YAML::Node& d : Seq(node, "deviceNodes")) {
    edits.device_nodes.push_back(
        {d["path"].as<std::string>(""), d["hostPath"].as<std::string>("")});
  }
  for (const YAML::Node& m : Seq(node, "mounts")) {
    const std::vector<std::string> options = Strings(m, "options");
    edits.mounts.push_back({m["hostPath"].as<std::string>(""),
                            m["containerPath"].as<std::string>(""),
                            std::find(options.begin(), options.end(), "ro") != options.end()});
  }
  for (const std::string& pair : Strings(node, "env")) {
    const size_t eq = pair.find('=');
    if (eq != std::string::npos && eq > 0) edits.env[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  for (const YAML::Node& h : Seq(node, "hooks")) {
    edits.hooks.push_back({h["hookName"].as<std::string>(""), h["path"].as<std::string>(""),
                           Strings(h, "args"), Strings(h, "env")});
  }
  return edits;
}

// The text of `name` in the directory `dir_fd`, when it is a regular file
// root alone may write (a spec's hooks and mounts are run and made as
// root): opened without following a link, checked on what was opened.
std::optional<std::string> ReadRootsFile(int dir_fd, const std::string& name) {
  UniqueFd fd(openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return std::nullopt;
  }
  std::string text;
  char buffer[8192];
  for (ssize_t n; (n = read(fd.get(), buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

void ContainerEdits::Add(const ContainerEdits& more) {
  device_nodes.insert(device_nodes.end(), more.device_nodes.begin(), more.device_nodes.end());
  mounts.insert(mounts.end(), more.mounts.begin(), more.mounts.end());
  for (const auto& [name, value] : more.env) env[name] = value;
  hooks.insert(hooks.end(), more.hooks.begin(), more.hooks.end());
}

absl::StatusOr<ContainerEdits> CdiEdits(const std::vector<std::string>& dirs,
                                        const std::vector<std::string>& devices) {
  std::set<std::string> missing(devices.begin(), devices.end());
  ContainerEdits edits;
  for (const std::string& dir : dirs) {
    UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd.valid()) continue;
    std::error_code error;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".yaml" || ext == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) {
      const std::optional<std::string> text = ReadRootsFile(dir_fd.get(), file.filename().string());
      if (!text) continue;
      try {
        const YAML::Node spec = YAML::Load(*text);
        const std::string kind = spec["kind"].as<std::string>("");
        bool holds_one = false;
        for (const YAML::Node& device : Seq(spec, "devices")) {
          const std::string name = absl::StrCat(kind, "=", device["name"].as<std::string>(""));
          if (missing.erase(name) == 0) continue;
          holds_one = true;
          edits.Add(ParseEdits(Child(device, "containerEdits")));
        }
        if (holds_one) edits.Add(ParseEdits(Child(spec, "containerEdits")));
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError(absl::StrCat("CDI spec ", file.string(), ": ", e.what()));
      }
    }
  }
  if (!missing.empty()) {
    return absl::NotFoundError(absl::StrCat("no CDI spec in ", absl::StrJoin(dirs, ", "), " names ",
                                            absl::StrJoin(missing, ", ")));
  }
  return edits;
}

}  // namespace ringmaster
