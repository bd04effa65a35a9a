#include "worker/oci_bundle.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/private_dir.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

Value Str(const std::string& s) {
  Value v;
  v.set_string_value(s);
  return v;
}

Value Num(double n) {
  Value v;
  v.set_number_value(n);
  return v;
}

Value Bool(bool b) {
  Value v;
  v.set_bool_value(b);
  return v;
}

Value List(const std::vector<Value>& items) {
  Value v;
  for (const Value& item : items) *v.mutable_list_value()->add_values() = item;
  return v;
}

Value Strings(const std::vector<std::string>& items) {
  std::vector<Value> values;
  for (const std::string& s : items) values.push_back(Str(s));
  return List(values);
}

Value Object(std::initializer_list<std::pair<const char*, Value>> fields) {
  Value v;
  for (const auto& [name, value] : fields)
    (*v.mutable_struct_value()->mutable_fields())[name] = value;
  return v;
}

Value Mount(const std::string& destination, const std::string& type, const std::string& source,
            const std::vector<std::string>& options) {
  return Object({{"destination", Str(destination)},
                 {"type", Str(type)},
                 {"source", Str(source)},
                 {"options", Strings(options)}});
}

Value Mounts(const ContainerSpec& spec) {
  std::vector<Value> mounts = {
      Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      Mount("/dev/pts", "devpts", "devpts",
            {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      // The host's network: its /sys (sysfs alone, not the cgroup and
      // debug file systems mounted below it), names and resolver.
      Mount("/sys", "bind", "/sys", {"bind", "nosuid", "noexec", "nodev", "ro"}),
  };
  if (spec.shm.empty()) {
    mounts.push_back(Mount("/dev/shm", "tmpfs", "shm",
                           {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}));
  } else {
    mounts.push_back(Mount("/dev/shm", "bind", spec.shm, {"rbind", "nosuid", "nodev"}));
  }
  for (const char* file : {"/etc/hosts", "/etc/resolv.conf", "/etc/hostname"}) {
    struct stat st {};
    if (stat(file, &st) == 0) mounts.push_back(Mount(file, "bind", file, {"rbind", "ro"}));
  }
  // Shallower paths first, so that a mount inside another lands on it; a
  // mask before a bind at the same depth. Every such path exists on the
  // host, so a mount point inside a bind is there already.
  std::vector<std::pair<std::string, Value>> placed;
  for (const std::string& mask : spec.masks) {
    if (mask == "/") continue;
    placed.emplace_back(
        mask, Mount(mask, "tmpfs", "tmpfs", {"nosuid", "nodev", "noexec", "mode=755", "size=1m"}));
  }
  for (const BindMount& bind : spec.binds) {
    std::vector<std::string> options = {"rbind", "nosuid", "nodev"};
    if (bind.read_only) options.push_back("ro");
    placed.emplace_back(bind.destination, Mount(bind.destination, "bind", bind.source, options));
  }
  auto depth = [](const std::string& path) { return std::count(path.begin(), path.end(), '/'); };
  std::stable_sort(placed.begin(), placed.end(),
                   [&](const auto& a, const auto& b) { return depth(a.first) < depth(b.first); });
  for (auto& [path, mount] : placed) mounts.push_back(std::move(mount));
  return List(mounts);
}

Value Process(const ContainerSpec& spec) {
  std::vector<std::string> env;
  for (const auto& [name, value] : spec.env) env.push_back(absl::StrCat(name, "=", value));
  std::vector<Value> groups;
  for (gid_t g : spec.groups) groups.push_back(Num(g));
  // The worker's own limit on open files (an unlimited one as 2^20: JSON
  // numbers here are doubles).
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  for (rlim_t* limit : {&files.rlim_cur, &files.rlim_max}) {
    if (*limit == RLIM_INFINITY || *limit > (rlim_t{1} << 20)) *limit = rlim_t{1} << 20;
  }
  const Value none = Strings({});
  return Object({
      {"terminal", Bool(false)},
      {"user",
       Object({{"uid", Num(spec.uid)}, {"gid", Num(spec.gid)}, {"additionalGids", List(groups)}})},
      {"args", Strings(spec.argv)},
      {"env", Strings(env)},
      {"cwd", Str(spec.working_dir.empty() ? "/" : spec.working_dir)},
      // The job's user holds no capability, and gains none by exec.
      {"capabilities", Object({{"bounding", none},
                               {"effective", none},
                               {"inheritable", none},
                               {"permitted", none},
                               {"ambient", none}})},
      {"noNewPrivileges", Bool(true)},
      {"rlimits", List({Object({{"type", Str("RLIMIT_NOFILE")},
                                {"hard", Num(static_cast<double>(files.rlim_max))},
                                {"soft", Num(static_cast<double>(files.rlim_cur))}})})},
  });
}

// The system calls refused with EPERM (clone3 with ENOSYS, so that the C
// library falls back to clone, whose flags the filter can see).
Value Seccomp() {
  std::vector<Value> rules = {
      Object({{"names", Strings({"unshare",
                                 "setns",
                                 "mount",
                                 "umount2",
                                 "pivot_root",
                                 "chroot",
                                 "move_mount",
                                 "open_tree",
                                 "fsopen",
                                 "fsconfig",
                                 "fsmount",
                                 "fspick",
                                 "keyctl",
                                 "add_key",
                                 "request_key",
                                 "bpf",
                                 "userfaultfd",
                                 "init_module",
                                 "finit_module",
                                 "delete_module",
                                 "kexec_load",
                                 "kexec_file_load",
                                 "open_by_handle_at",
                                 "acct",
                                 "swapon",
                                 "swapoff",
                                 "reboot",
                                 "syslog",
                                 "io_uring_setup",
                                 "io_uring_enter",
                                 "io_uring_register",
                                 "perf_event_open"})},
              {"action", Str("SCMP_ACT_ERRNO")},
              {"errnoRet", Num(EPERM)}}),
      Object({{"names", Strings({"clone3"})},
              {"action", Str("SCMP_ACT_ERRNO")},
              {"errnoRet", Num(ENOSYS)}}),
  };
  // clone with any new namespace flag (threads and fork stay): a rule per
  // flag, each "flags & flag == flag".
  for (const uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                              CLONE_NEWNET, CLONE_NEWCGROUP}) {
    const double bits = static_cast<double>(flag);
    rules.push_back(Object({{"names", Strings({"clone"})},
                            {"action", Str("SCMP_ACT_ERRNO")},
                            {"errnoRet", Num(EPERM)},
                            {"args", List({Object({{"index", Num(0)},
                                                   {"value", Num(bits)},
                                                   {"valueTwo", Num(bits)},
                                                   {"op", Str("SCMP_CMP_MASKED_EQ")}})})}}));
  }
  return Object({
    {"defaultAction", Str("SCMP_ACT_ALLOW")},
#if defined(__x86_64__)
        {"architectures", Strings({"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"})},
#elif defined(__aarch64__)
        {"architectures", Strings({"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"})},
#endif
    {
      "syscalls", List(rules)
    }
  });
}

Value Linux(const ContainerSpec& spec) {
  std::vector<Value> devices;
  for (const DeviceNode& node : spec.devices) {
    const std::string& host = node.host_path.empty() ? node.path : node.host_path;
    struct stat st {};
    if (stat(host.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) continue;
    devices.push_back(Object({{"path", Str(node.path)},
                              {"type", Str(S_ISCHR(st.st_mode) ? "c" : "b")},
                              {"major", Num(major(st.st_rdev))},
                              {"minor", Num(minor(st.st_rdev))},
                              {"fileMode", Num(st.st_mode & 07777)},
                              {"uid", Num(st.st_uid)},
                              {"gid", Num(st.st_gid)}}));
  }
  std::vector<Value> allowed = {Object({{"allow", Bool(false)}, {"access", Str("rwm")}})};
  for (const Value& device : devices) {
    const auto& f = device.struct_value().fields();
    allowed.push_back(Object({{"allow", Bool(true)},
                              {"type", f.at("type")},
                              {"major", f.at("major")},
                              {"minor", f.at("minor")},
                              {"access", Str("rwm")}}));
  }
  Struct linux;
  auto& fields = *linux.mutable_fields();
  fields["namespaces"] = List({Object({{"type", Str("pid")}}), Object({{"type", Str("mount")}}),
                               Object({{"type", Str("ipc")}})});
  fields["devices"] = List(devices);
  fields["seccomp"] = Seccomp();
  fields["maskedPaths"] = Strings({"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                                   "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                                   "/proc/sched_debug", "/proc/scsi", "/sys/firmware"});
  fields["readonlyPaths"] =
      Strings({"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"});
  if (!spec.cgroups_path.empty()) fields["cgroupsPath"] = Str(spec.cgroups_path);
  // The default devices (null, zero, random...) and these, nothing else.
  fields["resources"] = Object({{"devices", List(allowed)}});
  Value v;
  *v.mutable_struct_value() = linux;
  return v;
}

}  // namespace

std::string OciConfigJson(const ContainerSpec& spec) {
  Struct config;
  auto& fields = *config.mutable_fields();
  fields["ociVersion"] = Str("1.0.2");
  fields["root"] = Object({{"path", Str(spec.rootfs)}, {"readonly", Bool(true)}});
  fields["process"] = Process(spec);
  fields["mounts"] = Mounts(spec);
  fields["linux"] = Linux(spec);
  if (!spec.hooks.empty()) {
    Struct hooks;
    for (const OciHook& hook : spec.hooks) {
      Value entry = Object({{"path", Str(hook.path)}, {"args", Strings(hook.args)}});
      if (!hook.env.empty())
        (*entry.mutable_struct_value()->mutable_fields())["env"] = Strings(hook.env);
      *(*hooks.mutable_fields())[hook.hook].mutable_list_value()->add_values() = entry;
    }
    *fields["hooks"].mutable_struct_value() = hooks;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(config, &json, options);
  return json;
}

absl::Status WriteBundle(const std::string& dir, const ContainerSpec& spec) {
  RETURN_IF_ERROR(MakePrivateDir(dir));
  const std::string path = dir + "/config.json";
  const std::string json = OciConfigJson(spec);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  const bool written = write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
  close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace ringmaster
