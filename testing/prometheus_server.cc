#include "testing/prometheus_server.h"

#include <stdio.h>

#include <cctype>
#include <fstream>

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"

namespace ringmaster::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::string UrlEncode(const std::string& s) {
  std::string out;
  char hex[4];
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& dir, const std::vector<std::string>& targets, const std::string& rules) {
  const std::string config = dir + "/prometheus.yml";
  std::ofstream(config) << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                        << (rules.empty() ? "" : "rule_files: [" + rules + "]\n")
                        << "scrape_configs:\n  - job_name: ringmaster\n"
                        << "    static_configs: [{targets: [\"" << absl::StrJoin(targets, "\", \"")
                        << "\"]}]\n";
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  if (!port.ok()) return port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  auto process = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{"prometheus", "--config.file=" + config,
                               "--storage.tsdb.path=" + dir + "/tsdb",
                               "--web.listen-address=" + address},
      std::map<std::string, std::string>{}, dir + "/prometheus.log");
  if (!process->started()) {
    return absl::FailedPreconditionError(
        "cannot start prometheus (Debian's package prometheus; ./dev installs it)");
  }
  if (!WaitFor([&] { return HttpGet(address, "/-/ready").find("Ready") != std::string::npos; },
               absl::Seconds(60))) {
    return absl::DeadlineExceededError(
        absl::StrCat("Prometheus never became ready: ", process->output()));
  }
  return std::unique_ptr<PrometheusServer>(new PrometheusServer(address, std::move(process)));
}

std::vector<Struct> PrometheusServer::Query(const std::string& promql) const {
  const std::string body = HttpGet(address_, "/api/v1/query?query=" + UrlEncode(promql));
  Struct response;
  std::vector<Struct> out;
  if (!google::protobuf::util::JsonStringToMessage(body, &response).ok()) return out;
  const auto data = response.fields().find("data");
  if (data == response.fields().end()) return out;
  for (const Value& v : data->second.struct_value().fields().at("result").list_value().values()) {
    out.push_back(v.struct_value());
  }
  return out;
}

std::vector<AlertRule> AlertRules(const std::string& path) {
  std::vector<AlertRule> rules;
  for (const YAML::Node& group : YAML::LoadFile(path)["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      rules.push_back({rule["alert"].as<std::string>(), rule["expr"].as<std::string>()});
    }
  }
  return rules;
}

std::string Label(const Struct& sample, const std::string& name) {
  const auto& metric = sample.fields().at("metric").struct_value().fields();
  const auto it = metric.find(name);
  return it == metric.end() ? "" : it->second.string_value();
}

}  // namespace ringmaster::testing
