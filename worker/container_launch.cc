#include "worker/container_launch.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "worker/checkpoint_copy.h"

namespace ringmaster {
namespace {

// What an image's programs are looked up on when the rank's environment
// gives no PATH.
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Where the OCI runtime is looked for, and the PATH it runs with.
constexpr char kRuntimePath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// An executable regular file at `path` inside `root`: every link, absolute
// or not, resolved as if `root` were "/".
bool ExecutableInRoot(int root, const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
  if (fd < 0) return false;
  struct stat st {};
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
  close(fd);
  return ok;
}

// Where the init is bound in every container.
constexpr char kInitPath[] = "/.ringmaster-init";

// What an image's configuration sets for its processes (the entrypoint
// and command are not used: the job's command runs).
struct ImageConfig {
  std::map<std::string, std::string> env;
  std::string working_dir;
};

// From the runtime configuration umoci wrote beside the root file system;
// nothing when there is none or it cannot be read.
ImageConfig ReadImageConfig(const std::string& rootfs) {
  ImageConfig config;
  std::ifstream in(std::filesystem::path(rootfs).parent_path() / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct parsed;
  if (text.str().empty() ||
      !google::protobuf::util::JsonStringToMessage(text.str(), &parsed).ok()) {
    return config;
  }
  auto process = parsed.fields().find("process");
  if (process == parsed.fields().end()) return config;
  const auto& fields = process->second.struct_value().fields();
  if (auto env = fields.find("env"); env != fields.end()) {
    for (const google::protobuf::Value& item : env->second.list_value().values()) {
      const std::string& pair = item.string_value();
      const size_t eq = pair.find('=');
      if (eq != std::string::npos && eq > 0) config.env[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
  }
  if (auto cwd = fields.find("cwd"); cwd != fields.end()) {
    config.working_dir = cwd->second.string_value();
  }
  return config;
}

}  // namespace

absl::StatusOr<std::string> FindInImage(const std::string& rootfs, const std::string& program,
                                        const std::string& path, const FoundThrough& binds) {
  UniqueFd root(open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the image's root ", rootfs, ": ", strerror(errno)));
  }
  // A path in the container: in a bind (the job's directory), the host's
  // file as the job's user sees it; else the image's.
  auto executable = [&](const std::string& at) {
    const BindMount* through = nullptr;
    for (const BindMount& bind : binds.binds) {
      if ((at == bind.destination || absl::StartsWith(at, bind.destination + "/")) &&
          (through == nullptr || bind.destination.size() > through->destination.size())) {
        through = &bind;
      }
    }
    if (through == nullptr) return ExecutableInRoot(root.get(), at);
    const std::string host = through->source + at.substr(through->destination.size());
    FsIdentity as(binds.user);
    struct stat st {};
    return stat(host.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
  };
  // Relative to the working directory, as exec resolves it there.
  auto in_container = [&](absl::string_view p) {
    return p[0] == '/' ? std::string(p) : absl::StrCat(binds.cwd, "/", p);
  };
  if (absl::StrContains(program, '/')) {
    if (executable(in_container(program))) return program;
  } else {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(in_container(dir), "/", program);
      if (executable(candidate)) return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat("no program ", program, " on PATH=", path));
}

absl::StatusOr<std::string> ResolveRuntime(const std::string& runtime) {
  absl::StatusOr<std::string> path = ResolveProgram(runtime, kRuntimePath);
  if (!path.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this worker's --container-runtime ", runtime, ": ", path.status().message()));
  }
  return path;
}

absl::StatusOr<LaunchSpec> InImage(const LaunchSpec& spec, const std::string& rootfs,
                                   const std::string& image, const std::string& id,
                                   const ContainerOptions& options) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("a launch without a command");
  if (options.init.empty()) return absl::FailedPreconditionError("no container init");
  const ImageConfig config = ReadImageConfig(rootfs);
  ContainerSpec container;
  container.env = config.env;
  for (const auto& [name, value] : options.gpus.env) container.env[name] = value;
  for (const auto& [name, value] : spec.env) {
    const bool hosts = absl::c_linear_search(options.host_env, name);
    if (!hosts || container.env.count(name) == 0) container.env[name] = value;
  }
  if (container.env.count("PATH") == 0) container.env["PATH"] = kDefaultPath;
  container.working_dir = spec.working_dir.empty() ? config.working_dir : spec.working_dir;
  if (container.working_dir.empty()) container.working_dir = "/";
  absl::StatusOr<std::string> program =
      FindInImage(rootfs, spec.argv[0], container.env.at("PATH"),
                  {options.binds, container.working_dir, spec.run_as});
  if (!program.ok()) {
    return absl::NotFoundError(absl::StrCat("the command ", spec.argv[0], " is not in the image ",
                                            image, ": ", program.status().message()));
  }
  container.argv = {kInitPath, *program};
  container.argv.insert(container.argv.end(), spec.argv.begin() + 1, spec.argv.end());
  if (spec.inherit_fd >= 3) container.env["RINGMASTER_SNAPSHOT_FD"] = "3";
  if (spec.run_as) {
    container.uid = spec.run_as->uid;
    container.gid = spec.run_as->gid;
    container.groups = spec.run_as->groups;
  } else {
    container.uid = geteuid();
    container.gid = getegid();
  }
  container.masks = options.masks;
  container.binds = options.binds;
  container.binds.push_back({options.init, kInitPath, true});
  container.shm = spec.private_shm;
  container.devices = options.gpus.device_nodes;
  container.hooks = options.gpus.hooks;
  container.binds.insert(container.binds.end(), options.gpus.mounts.begin(),
                         options.gpus.mounts.end());
  container.cgroups_path = options.cgroups_path;
  const std::string bundle = absl::StrCat(options.bundles_dir, "/", id);
  container.rootfs = bundle + "/rootfs";
  if (absl::Status written = WriteBundle(bundle, container); !written.ok()) return written;
  if (absl::Status mounted = MountRootfs(rootfs, bundle); !mounted.ok()) return mounted;

  // The runtime runs as the worker: nothing of the job's environment
  // (PATH, LD_PRELOAD) reaches it; the job's goes to config.json only.
  ASSIGN_OR_RETURN(const std::string runtime, ResolveRuntime(options.runtime));
  LaunchSpec launch = spec;
  launch.env = {{"PATH", kRuntimePath}};
  launch.argv = {runtime};
  if (!options.state_dir.empty())
    launch.argv.insert(launch.argv.end(), {"--root", options.state_dir});
  launch.argv.insert(launch.argv.end(), {"run", "--bundle", bundle});
  if (spec.inherit_fd >= 3) {
    // The runtime passes descriptors 3 to 3 + n - 1 on: the snapshot
    // segment's is 3.
    launch.argv.insert(launch.argv.end(), {"--preserve-fds", "1"});
    launch.inherit_fd_as = 3;
  }
  launch.argv.push_back(id);
  // The runtime runs as the worker; the rank, as the job (config.json).
  launch.run_as.reset();
  launch.working_dir.clear();
  launch.required_access.clear();
  // Its own pid namespace and /dev/shm come with the container.
  launch.hide_other_users_processes = false;
  launch.private_shm.clear();
  return launch;
}

absl::Status MountRootfs(const std::string& image_rootfs, const std::string& bundle) {
  // overlayfs takes ',' and ':' as separators in its options.
  if (absl::StrContains(image_rootfs, ',') || absl::StrContains(image_rootfs, ':') ||
      absl::StrContains(bundle, ',') || absl::StrContains(bundle, ':')) {
    return absl::FailedPreconditionError(
        absl::StrCat("the worker's state directory may hold no ',' or ':': ", bundle));
  }
  const std::string rw = bundle + "/rw", root = bundle + "/rootfs";
  for (const std::string& dir : {rw, root}) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot make ", dir, ": ", strerror(errno)));
    }
  }
  // The upper layer is a small tmpfs: overlayfs takes no upper layer on
  // an overlay, which a worker in a container may have as its disk.
  if (mount("tmpfs", rw.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0700") != 0) {
    return absl::InternalError(absl::StrCat("cannot mount a tmpfs on ", rw, ": ", strerror(errno)));
  }
  for (const char* sub : {"/upper", "/work"}) mkdir((rw + sub).c_str(), 0755);
  const std::string layers =
      absl::StrCat("lowerdir=", image_rootfs, ",upperdir=", rw, "/upper,workdir=", rw, "/work");
  if (mount("overlay", root.c_str(), "overlay", MS_NOSUID | MS_NODEV, layers.c_str()) != 0) {
    const int mount_errno = errno;
    umount2(rw.c_str(), MNT_DETACH);
    return absl::InternalError(
        absl::StrCat("cannot mount the image's overlay on ", root, ": ", strerror(mount_errno)));
  }
  return absl::OkStatus();
}

absl::Status OnlyRootCanChange(const std::string& path, const std::string& what) {
  auto refuse = [&](const std::string& why) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", path,
                     ": a job in an image is given only a directory that no one but root can "
                     "move or replace, and ",
                     why));
  };
  if (path.empty() || path[0] != '/') return refuse("it is not an absolute path");
  std::string at;
  const std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "." || parts[i] == "..") return refuse("it has . or .. in it");
    at += "/" + parts[i];
    struct stat st {};
    if (lstat(at.c_str(), &st) != 0) return refuse(absl::StrCat(at, ": ", strerror(errno)));
    if (S_ISLNK(st.st_mode)) return refuse(absl::StrCat(at, " is a symbolic link"));
    if (!S_ISDIR(st.st_mode)) return refuse(absl::StrCat(at, " is not a directory"));
    if (st.st_uid != 0) return refuse(absl::StrCat(at, " belongs to uid ", st.st_uid));
    const bool last = i + 1 == parts.size();
    if (!last && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return refuse(absl::StrCat(at, " may be written by others than root (mode ",
                                 absl::StrFormat("%04o", st.st_mode & 07777), ")"));
    }
  }
  return absl::OkStatus();
}

std::string RootHolding(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    std::error_code error;
    const std::string resolved = std::filesystem::canonical(root, error).string();
    if (error) continue;
    if (path == resolved || absl::StartsWith(path, resolved == "/" ? "/" : resolved + "/")) {
      return resolved;
    }
  }
  return "";
}

namespace {

// Unmounts the container's root file system and its writable layer, and
// removes its bundle; not when a mount stays, whose files would be the
// image's or the host's.
void RemoveBundle(const std::string& bundle) {
  for (const char* mount : {"/rootfs", "/rw"}) {
    const std::string path = bundle + mount;
    if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
      spdlog::warn("cannot unmount {}: {}", path, strerror(errno));
      return;  // its files would be the image's
    }
  }
  std::error_code error;
  std::filesystem::remove_all(bundle, error);
}

// The children of every thread of `pid` (the runtime is multithreaded).
std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) children.push_back(child);
  }
  return children;
}

}  // namespace

pid_t ContainedCommand(pid_t runtime_pid) {
  for (pid_t init : Children(runtime_pid)) {
    for (pid_t command : Children(init)) return command;
  }
  return 0;
}

void RemoveContainer(const ContainerOptions& options, const std::string& id) {
  absl::StatusOr<std::string> runtime = ResolveRuntime(options.runtime);
  if (runtime.ok()) {
    std::vector<std::string> argv = {*runtime};
    if (!options.state_dir.empty()) argv.insert(argv.end(), {"--root", options.state_dir});
    argv.insert(argv.end(), {"delete", "--force", id});
    absl::StatusOr<ToolRun> run =
        RunToCompletion(argv, {{"PATH", kRuntimePath}}, absl::Seconds(30));
    // A container that ended of itself is gone already: "does not exist".
    if (run.ok() && run->exit_code != 0 && !absl::StrContains(run->output, "does not exist")) {
      spdlog::warn("container {}: {} delete: {}", id, options.runtime,
                   std::string(absl::StripTrailingAsciiWhitespace(run->output)));
    }
  }
  RemoveBundle(absl::StrCat(options.bundles_dir, "/", id));
}

void SweepContainers(const ContainerOptions& options) {
  std::error_code error;
  if (!options.state_dir.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(options.state_dir, error)) {
      spdlog::info("removing container {}, left by an earlier worker",
                   entry.path().filename().string());
      RemoveContainer(options, entry.path().filename().string());
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(options.bundles_dir, error)) {
    RemoveBundle(entry.path().string());
  }
}

}  // namespace ringmaster
