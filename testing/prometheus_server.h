// A real Prometheus (Debian's) for a test, and its instant queries.
#ifndef RINGMASTER_TESTING_PROMETHEUS_SERVER_H_
#define RINGMASTER_TESTING_PROMETHEUS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/status/statusor.h"
#include "testing/test_util.h"

namespace ringmaster::testing {

class PrometheusServer {
 public:
  // Scraping every target (host:port of a /metrics) each second, under the
  // scrape job "ringmaster" with an ordinary config (no honor_labels), and
  // evaluating `rules` (a rule file) each second when given; its files in
  // `dir`. Returns once it is ready; stopped with the object.
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(
      const std::string& dir, const std::vector<std::string>& targets,
      const std::string& rules = "");

  const std::string& address() const { return address_; }
  // The result vector of an instant query; empty when there is none, or
  // when the answer is not one.
  std::vector<google::protobuf::Struct> Query(const std::string& promql) const;

 private:
  PrometheusServer(std::string address, std::unique_ptr<BackgroundProcess> process)
      : address_(std::move(address)), process_(std::move(process)) {}

  std::string address_;
  std::unique_ptr<BackgroundProcess> process_;
};

// The alert rules of a rule file: each alert's name and expression, in
// the file's order.
struct AlertRule {
  std::string name;
  std::string expr;
};
std::vector<AlertRule> AlertRules(const std::string& path);

// A sample's label, empty when it has none.
std::string Label(const google::protobuf::Struct& sample, const std::string& name);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTING_PROMETHEUS_SERVER_H_
