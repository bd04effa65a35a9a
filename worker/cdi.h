// Container Device Interface (CDI) specs: what a container needs of the
// host to use a device, as its vendor's tools describe it. The NVIDIA
// container toolkit writes one for a machine's GPUs (`nvidia-ctk cdi
// generate --output=/etc/cdi/nvidia.yaml`): for each GPU its device node,
// and for all of them the control devices, the driver's libraries and
// programs to bind in, environment, and hooks that refresh the linker's
// cache. A rank in an image gets the edits of its GPUs (container_launch.h).
#ifndef RINGMASTER_WORKER_CDI_H_
#define RINGMASTER_WORKER_CDI_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/oci_bundle.h"

namespace ringmaster {

struct ContainerEdits {
  std::vector<DeviceNode> device_nodes;
  std::vector<BindMount> mounts;
  std::map<std::string, std::string> env;
  std::vector<OciHook> hooks;

  void Add(const ContainerEdits& more);
};

// The edits for `devices` ("nvidia.com/gpu=GPU-8f2...", "nvidia.com/gpu=0"),
// from the specs (*.yaml, *.json) in `dirs`: each device's own, and once
// the spec-wide edits of every spec that holds one of them. Only specs that
// root owns and only root may write are read (a spec's hooks run as root).
// NOT_FOUND naming a device no spec has; INVALID_ARGUMENT naming a spec
// that cannot be read.
absl::StatusOr<ContainerEdits> CdiEdits(const std::vector<std::string>& dirs,
                                        const std::vector<std::string>& devices);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CDI_H_
