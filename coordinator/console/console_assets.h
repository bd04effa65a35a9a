// The web console's files, built into the coordinator (embed.py): served
// at /console/<name>, and index.html at / as well.
#ifndef RINGMASTER_COORDINATOR_CONSOLE_CONSOLE_ASSETS_H_
#define RINGMASTER_COORDINATOR_CONSOLE_CONSOLE_ASSETS_H_

#include "absl/strings/string_view.h"

namespace ringmaster {

struct ConsoleAsset {
  absl::string_view path;
  absl::string_view content_type;
  absl::string_view body;
};

// The file served at `path`; nullptr when there is none.
const ConsoleAsset* FindConsoleAsset(absl::string_view path);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CONSOLE_CONSOLE_ASSETS_H_
