#include "worker/cdi.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// Written by root alone: a spec's hooks and mounts are run and made as root.
bool RootsAlone(const std::filesystem::path& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
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
    std::error_code error;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      const std::string ext = entry.path().extension().string();
      if ((ext == ".yaml" || ext == ".json") && RootsAlone(entry.path())) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) {
      try {
        const YAML::Node spec = YAML::LoadFile(file.string());
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
