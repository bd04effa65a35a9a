// N ranks as threads in one process, each with a GlooCollective connected
// through an in-memory store: multi-rank logic tested before it runs as
// processes.
#ifndef RINGMASTER_TRAINER_TEST_WORLD_H_
#define RINGMASTER_TRAINER_TEST_WORLD_H_

#include <gloo/rendezvous/hash_store.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "trainer/gloo_collective.h"

namespace ringmaster {

// Runs `body(rank, collective)` on `world` threads and joins them. With
// `hosts` > 1 the ranks play that many hosts (rank r on host r % hosts), so
// all-reduces take the hierarchical path between hosts.
inline void RunWorld(int world, const std::function<void(int, Collective*)>& body, int hosts = 1) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions options;
      options.timeout = std::chrono::seconds(60);
      options.host_identity = "host" + std::to_string(rank % hosts);
      auto comm = GlooCollective::Connect(store, rank, world, options);
      ASSERT_OK(comm) << comm.status();
      body(rank, comm->get());
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_TEST_WORLD_H_
