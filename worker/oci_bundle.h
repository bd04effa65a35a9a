// The OCI runtime bundle a rank in an image runs from: config.json for an
// OCI runtime (runc or crun) that starts the job's command in the image's
// root filesystem, read-only, as the job's uid, with the host's network
// (Gloo and NCCL keep their speed), a pid, mount and IPC namespace of its
// own (other jobs' processes are not there), and what the rank needs of
// the host bound in: its code, checkpoints, the job's private /dev/shm,
// the Python package and its start-up hook, its rank directory. The job's
// user holds no capability, and a seccomp filter refuses what a job never
// needs and a kernel exploit often does: new user and mount namespaces,
// mounts, keyrings, BPF, kernel modules, io_uring, perf events.
#ifndef RINGMASTER_WORKER_OCI_BUNDLE_H_
#define RINGMASTER_WORKER_OCI_BUNDLE_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster {

struct BindMount {
  std::string source;       // on the host
  std::string destination;  // in the container
  bool read_only = true;
};

// A device node made in the container's /dev: `path` there, the host's
// `host_path` (empty: the same path) giving its type and numbers.
struct DeviceNode {
  std::string path;
  std::string host_path;
};

// A program the runtime runs at one of the container's hooks (as root, on
// the host, in the container's namespaces where the hook says so).
struct OciHook {
  std::string hook = "createContainer";  // prestart, createRuntime, ...
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
};

struct ContainerSpec {
  std::string rootfs;  // the image's, shared and never written
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string working_dir;  // in the container; empty: "/"
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // Empty tmpfs mounts, made before the binds (see ContainerOptions).
  std::vector<std::string> masks;
  std::vector<BindMount> binds;
  std::string shm;  // the job's private /dev/shm on the host; empty: a tmpfs of its own
  // Device nodes passed in (a rank's GPUs: /dev/nvidia0, /dev/nvidiactl...).
  std::vector<DeviceNode> devices;
  std::vector<OciHook> hooks;
  // linux.cgroupsPath: where the runtime puts the container (the rank's
  // cgroup); empty: the runtime's default.
  std::string cgroups_path;
};

// config.json's text (OCI runtime spec 1.0).
std::string OciConfigJson(const ContainerSpec& spec);

// Writes <dir>/config.json (making dir, mode 0700); the root filesystem is
// named by its absolute path, so the bundle holds nothing else.
absl::Status WriteBundle(const std::string& dir, const ContainerSpec& spec);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_OCI_BUNDLE_H_
