#include "worker/machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace ringmaster {

int MachineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

int64_t MachineMemoryBytes() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? pages * page_size : 0;
}

}  // namespace ringmaster
