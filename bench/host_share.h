// The ranks of a world that one run of a benchmark binary starts (as forked
// children), and where they meet. On one host: every rank, through a
// temporary directory. Across hosts, each host runs the binary with its
// share and a directory every host sees:
//   --world 4 --first-rank 2 --ranks 2 --host 10.0.0.2 --store /shared/dir
#ifndef RINGMASTER_BENCH_HOST_SHARE_H_
#define RINGMASTER_BENCH_HOST_SHARE_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

namespace ringmaster {

struct HostShare {
  int world = 2;
  int first_rank = 0;
  int ranks = 0;                   // 0: the rest of the world
  std::string host = "127.0.0.1";  // this host's address for its peers
  std::string store;               // the rendezvous directory; empty: a temporary one

  void AddOptions(CLI::App& app) {
    app.add_option("--world", world);
    app.add_option("--first-rank", first_rank, "the first rank this host runs");
    app.add_option("--ranks", ranks, "how many ranks this host runs (default: all)");
    app.add_option("--host", host, "this host's address for its peers");
    app.add_option("--store", store, "a directory every host sees, for the rendezvous");
  }

  // After parsing: fills in the defaults.
  void Resolve() {
    if (ranks == 0) ranks = world - first_rank;
    if (store.empty()) {
      std::string dir = (std::filesystem::temp_directory_path() / "ringmaster-bench-XXXXXX");
      store = mkdtemp(dir.data());
      temporary_ = true;
    }
  }

  // A temporary store goes with the run (forked ranks leave with _exit).
  ~HostShare() {
    std::error_code ignored;
    if (temporary_) std::filesystem::remove_all(store, ignored);
  }

 private:
  bool temporary_ = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_HOST_SHARE_H_
