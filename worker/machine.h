// What this machine offers, as the kernel tells: its CPUs and memory.
#ifndef RINGMASTER_WORKER_MACHINE_H_
#define RINGMASTER_WORKER_MACHINE_H_

#include <cstdint>

namespace ringmaster {

// The CPUs this process may run on; at least 1.
int MachineCpus();
// This machine's physical memory; 0 when the kernel does not say.
int64_t MachineMemoryBytes();

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_MACHINE_H_
