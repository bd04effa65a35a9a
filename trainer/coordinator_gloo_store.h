// gloo::rendezvous::Store on the coordinator's rendezvous store, so Gloo
// bootstraps through the same service as every other rank of the job.
#ifndef RINGMASTER_TRAINER_COORDINATOR_GLOO_STORE_H_
#define RINGMASTER_TRAINER_COORDINATOR_GLOO_STORE_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "domain/rendezvous_client.h"

namespace ringmaster {

// Gloo's Store reports failures by throwing gloo::IoException; so does
// this one (Gloo catches nothing, GlooCollective::Connect turns it into a
// Status).
class CoordinatorGlooStore final : public gloo::rendezvous::Store {
 public:
  explicit CoordinatorGlooStore(RendezvousClient* client,
                                std::chrono::milliseconds timeout = std::chrono::seconds(120))
      : client_(client), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  RendezvousClient* const client_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_COORDINATOR_GLOO_STORE_H_
