#include "client/ui.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "common/coordinator_targets.h"
#include "common/signals.h"
#include "common/tls_relay.h"

extern char** environ;

namespace ringmaster {
namespace {

// The host of "host:port" or "[v6]:port", as a URL has it.
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// A file of the user's alone that sends a browser on to `url`, so that
// the sign-in code is in no command line (which other users may read):
// $XDG_RUNTIME_DIR/ringmaster-ui.html, else ~/.cache/ringmaster-ui.html,
// mode 600, written again each time. Empty when it cannot be written.
std::string RedirectFile(const std::string& url) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const char* home = std::getenv("HOME");
  std::string dir = runtime != nullptr && *runtime ? runtime : "";
  if (dir.empty() && home != nullptr) {
    dir = std::string(home) + "/.cache";
    mkdir(dir.c_str(), 0700);
  }
  if (dir.empty()) return "";
  const std::string path = dir + "/ringmaster-ui.html";
  unlink(path.c_str());  // a file left by another user, or a link, is not written through
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return "";
  // `url` is of [A-Za-z0-9:/.?=_-]: nothing HTML reads as markup.
  const std::string page =
      absl::StrCat("<!doctype html>\n<meta http-equiv=\"refresh\" content=\"0;url=", url,
                   "\">\n<a href=\"", url, "\">Open the Ringmaster console</a>\n");
  const bool written = write(fd, page.data(), page.size()) == static_cast<ssize_t>(page.size());
  close(fd);
  return written ? path : "";
}

// Opens `url` in the desktop's browser ($BROWSER, else xdg-open) through a
// RedirectFile. Says so when there is none.
void OpenInBrowser(const std::string& url) {
  const char* browser = std::getenv("BROWSER");
  const std::string program = browser != nullptr && *browser ? browser : "xdg-open";
  const std::string file = RedirectFile(url);
  if (file.empty()) {
    std::cerr << "ringmaster: cannot write the page that opens the console: open the URL yourself"
              << std::endl;
    return;
  }
  const std::string target = "file://" + file;
  char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>(target.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, program.c_str(), nullptr, nullptr, argv, environ) != 0) {
    std::cerr << "ringmaster: no browser to open (" << program
              << " not found): open the URL yourself" << std::endl;
    return;
  }
  int status = 0;
  waitpid(pid, &status, 0);  // xdg-open hands over to the browser and exits
}

void Print(const GlobalOptions& global, const v1::ConsoleLogin& login, const std::string& url,
           const std::string& proxy) {
  if (!global.table()) {
    google::protobuf::Struct fields;
    (*fields.mutable_fields())["url"].set_string_value(url);
    (*fields.mutable_fields())["user"].set_string_value(login.user());
    (*fields.mutable_fields())["expires_unix_ms"].set_number_value(
        static_cast<double>(login.expires_unix_ms()));
    if (!proxy.empty()) (*fields.mutable_fields())["proxy"].set_string_value(proxy);
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(fields, &json);
    std::cout << json << std::endl;
    return;
  }
  if (!proxy.empty()) {
    std::cout << "The console, through a proxy to " << proxy << " (Ctrl-C stops it):\n";
  }
  if (absl::StrContains(url, "/login?code=")) {
    std::cout << "Open this URL within 2 minutes to sign in as " << login.user()
              << " (it works once):\n  " << url << std::endl;
  } else {
    std::cout << "Open the console (an open cluster: no sign-in):\n  " << url << std::endl;
  }
}

}  // namespace

absl::StatusOr<std::string> ConsoleBaseUrl(const std::string& url, const std::string& coordinator,
                                           bool tls, int http_port) {
  if (!url.empty()) {
    if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--url ", url, ": give http://host:port or https://host:port"));
    }
    return std::string(absl::StripSuffix(url, "/"));
  }
  if (http_port == 0) {
    return absl::FailedPreconditionError(
        "the coordinator serves no HTTP API (it runs with --http-port 0)");
  }
  const std::vector<std::string> addresses = SplitAddresses(coordinator);
  if (addresses.empty()) return absl::InvalidArgumentError("no coordinator address");
  return absl::StrCat(tls ? "https://" : "http://", HostOf(addresses.front()), ":", http_port);
}

int RunUi(const GlobalOptions& global, const UiOptions& options) {
  if (options.proxy && !global.tls) {
    std::cerr << "ringmaster: --proxy carries a browser to a coordinator served with TLS; "
                 "this one is not: open its URL directly"
              << std::endl;
    return 2;
  }
  // The proxy waits for Ctrl-C: every thread started from here on leaves
  // the signal to the wait.
  if (options.proxy) BlockTerminationSignals();
  Client client(global.coordinator, global.token, global.tls);
  absl::StatusOr<v1::ConsoleLogin> login = client.CreateConsoleLogin();
  absl::StatusOr<std::string> base =
      login.ok() ? ConsoleBaseUrl(options.url, client.CurrentAddress(), global.tls.has_value(),
                                  login->http_port())
                 : login.status();
  if (!base.ok()) {
    std::cerr << "ringmaster: " << base.status().message() << std::endl;
    return base.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::unique_ptr<TlsRelay> proxy;
  std::string upstream;
  if (options.proxy) {
    if (!absl::StartsWith(*base, "https://")) {
      std::cerr << "ringmaster: --proxy carries the browser over TLS: the console's URL must be "
                   "https://, not "
                << *base << std::endl;
      return 2;
    }
    upstream = std::string(absl::StripPrefix(*base, "https://"));
    absl::StatusOr<std::unique_ptr<TlsRelay>> relay = TlsRelay::Originate(
        absl::StrCat("127.0.0.1:", options.proxy_port), *global.tls, upstream, kCoordinatorName);
    if (!relay.ok()) {
      std::cerr << "ringmaster: " << relay.status().message() << std::endl;
      return 1;
    }
    proxy = *std::move(relay);
    *base = absl::StrCat("http://127.0.0.1:", proxy->port());
  }
  // An open cluster (no token, no TLS) has no sign-in.
  const bool open = global.token.empty() && !global.tls;
  const std::string url = open ? *base + "/" : absl::StrCat(*base, "/login?code=", login->code());
  Print(global, *login, url, upstream);
  if (options.open) OpenInBrowser(url);
  if (proxy) WaitForTerminationSignal();
  return 0;
}

}  // namespace ringmaster
