#include "common/daemon_flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/signals.h"

namespace ringmaster {

CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* value,
                               const std::string& help) {
  CLI::Option* option = app.add_option_function<std::string>(
      name,
      [name, value](const std::string& text) {
        double seconds;
        if (absl::SimpleAtod(text, &seconds)) {
          *value = absl::Seconds(seconds);
        } else if (!absl::ParseDuration(text, value)) {
          throw CLI::ValidationError(
              name, absl::StrCat("\"", text, "\" is not a duration such as 3s, 500ms or 1m30s"));
        }
      },
      help);
  option->default_str(absl::FormatDuration(*value));
  return option;
}

void DaemonFlags::AddTo(CLI::App& app, const std::string& advertise_help) {
  app.add_option("--port", port_, "gRPC port (0 picks a free one)")->capture_default_str();
  app.add_option("--bind", bind_,
                 "address to listen on (beyond loopback needs --tls-dir or --insecure)")
      ->capture_default_str();
  app.add_option("--tls-dir", tls_dir_,
                 "serve TLS and require credentials, with the files of `ringmaster certs init`");
  app.add_flag("--insecure", insecure_,
               "allow a --bind beyond loopback without TLS: anyone who reaches it may call it");
  app.add_option("--metrics-port", metrics_port_, "Prometheus /metrics port (0: none)")
      ->capture_default_str();
  app.add_option("--metrics-bind", metrics_bind_,
                 "address /metrics listens on: plain HTTP, apart from --bind; 0.0.0.0 lets a "
                 "Prometheus on another machine scrape it")
      ->capture_default_str();
  AddDurationOption(app, "--metrics-retention", &metrics_retention_,
                    "how long the series of an ended job stay on /metrics");
  app.add_option("--advertise-address", advertise_, advertise_help);
  app.add_option("--log-level", log_level_, "trace|debug|info|warn|error")->capture_default_str();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // An address, not a name that begins like one ("127.0.0.1.example.com").
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

absl::StatusOr<DaemonAddresses> DaemonFlags::Start(const std::string& name) {
  InitLogging(name, log_level_);
  if (!IsLoopbackHost(bind_) && tls_dir_.empty() && !insecure_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--bind ", bind_, " would serve this ", name,
        "'s API beyond this machine without TLS; give --tls-dir, or pass --insecure to do so "
        "anyway"));
  }
  BlockTerminationSignals();
  absl::StatusOr<ServingAddresses> serving = ResolveServingAddresses(bind_, port_, advertise_);
  if (!serving.ok()) return serving.status();
  DaemonAddresses out;
  out.listen = serving->listen;
  out.advertise = serving->advertise;
  out.port = serving->port;
  out.metrics = metrics_port_ > 0 ? absl::StrCat(metrics_bind_, ":", metrics_port_) : "";
  if (!out.metrics.empty() && !IsLoopbackHost(metrics_bind_)) {
    spdlog::info("/metrics is served in plain HTTP on {} (--metrics-bind)", out.metrics);
  }
  return out;
}

void DaemonFlags::WarnWhileInsecure(const std::string& name) const {
  if (IsLoopbackHost(bind_) || !tls_dir_.empty()) return;
  // Every hour, so that it is in any window of the log.
  std::thread([name, bind = bind_] {
    for (;;) {
      spdlog::warn(
          "--insecure: the {} API on {} is served without TLS to anyone who can "
          "reach it",
          name, bind);
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
  }).detach();
}

}  // namespace ringmaster
