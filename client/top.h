// `ringmaster top`: a live view of the cluster, refreshed every second.
#ifndef RINGMASTER_CLIENT_TOP_H_
#define RINGMASTER_CLIENT_TOP_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/client.h"
#include "client/output.h"

namespace ringmaster {

// What one frame shows; rates come from the difference to the last frame.
class TopView {
 public:
  // Renders the jobs (step rate, samples/s, all-reduce algbw and busbw)
  // and the workers (GPU or CPU utilization, memory) as plain text lines.
  std::string Render(const std::vector<v1::Job>& jobs, const std::vector<v1::Worker>& workers,
                     absl::Time now);

 private:
  struct Last {
    int64_t step = 0;
    absl::Time at;
  };
  std::map<std::string, Last> last_;
};

struct TopOptions {
  int iterations = 0;  // > 0: stop after that many frames
  bool all = false;    // finished jobs too (the newest 100 jobs); else the active ones
  OutputFormat output = OutputFormat::kTable;  // json, yaml: one document per frame
};

// Runs the view: on a terminal in its alternate screen with the cursor
// hidden, restored on exit (q, Ctrl-C or SIGTERM).
int RunTop(Client& client, const TopOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_TOP_H_
