// `ringmaster ui`: a URL that signs a browser in to the web console as the
// CLI's own credential, once, within two minutes (as Jupyter's token URL).
// With --proxy, a local port that carries the browser's connections over
// TLS to the coordinator (as `kubectl proxy`), so that the browser needs
// neither the cluster's CA nor a route to anything but this machine.
#ifndef RINGMASTER_CLIENT_UI_H_
#define RINGMASTER_CLIENT_UI_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/commands.h"

namespace ringmaster {

struct UiOptions {
  bool open = false;   // --open: in the desktop's browser ($BROWSER, else xdg-open)
  bool proxy = false;  // --proxy: serve on 127.0.0.1 until interrupted
  int proxy_port = 0;  // --proxy-port; 0: a free one
  std::string url;     // --url: the console's base URL; empty: the coordinator's host
};

int RunUi(const GlobalOptions& global, const UiOptions& options);

// The console's base URL ("https://host:7072"): `url` when given, else the
// host of `coordinator` (the first, of several) with `http_port`.
absl::StatusOr<std::string> ConsoleBaseUrl(const std::string& url, const std::string& coordinator,
                                           bool tls, int http_port);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_UI_H_
