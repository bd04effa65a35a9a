#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(MetricsServerTest, ServesTheRegistryOnMetrics) {
  metrics::Registry registry;
  registry.AddCounter("ringmaster_test_total", "A test counter.").Add({{"job", "x"}}).Increment(5);
  auto port = PickFreePort("127.0.0.1");
  ASSERT_OK(port);
  auto server = MetricsServer::Start(absl::StrCat("127.0.0.1:", *port), &registry);
  ASSERT_OK(server) << server.status();
  const std::string response = HttpGet(*port, "/metrics");
  EXPECT_NE(response.find("200 OK"), std::string::npos) << response;
  EXPECT_NE(response.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(response.find("ringmaster_test_total{job=\"x\"} 5\n"), std::string::npos) << response;
  // A second server on the same port is refused with a reason.
  auto twice = MetricsServer::Start(absl::StrCat("127.0.0.1:", *port), &registry);
  EXPECT_THAT(twice, IsError());
}

// /ready follows its test (a standby coordinator's 503, the leader's 200),
// and is not served without one.
TEST(MetricsServerTest, ReadyFollowsItsTest) {
  metrics::Registry registry;
  std::atomic<bool> ready{false};
  auto port = PickFreePort("127.0.0.1");
  ASSERT_OK(port);
  auto server = MetricsServer::Start(absl::StrCat("127.0.0.1:", *port), &registry,
                                     [&] { return ready.load(); });
  ASSERT_OK(server) << server.status();
  EXPECT_NE(HttpGet(*port, "/ready").find("503 Service Unavailable"), std::string::npos);
  ready = true;
  EXPECT_NE(HttpGet(*port, "/ready").find("200 OK"), std::string::npos);
  server->reset();
  auto plain = MetricsServer::Start(absl::StrCat("127.0.0.1:", *port), &registry);
  ASSERT_OK(plain) << plain.status();
  EXPECT_EQ(HttpGet(*port, "/ready").find("200 OK"), std::string::npos);
}

// promtool, Prometheus' own checker, accepts what the registry writes.
TEST(MetricsServerTest, PromtoolAcceptsTheExposition) {
  if (system("command -v promtool >/dev/null 2>&1") != 0) {
    FAIL() << "promtool not found: install Debian's prometheus (./dev does)";
  }
  metrics::Registry registry;
  registry.AddCounter("ringmaster_events_total", "Counter.").Add({{"l", "v\"q"}}).Increment();
  registry.AddGauge("ringmaster_buffered_bytes", "Gauge.").Add({}).Set(3);
  registry.AddHistogram("ringmaster_wait_seconds", "Histogram.")
      .Add({{"job", "j"}}, metrics::Histogram::BucketBoundaries{0.5, 1})
      .Observe(0.7);
  const std::string path = testing::MakeTempDir("promtool") + "/metrics.txt";
  std::ofstream(path) << registry.Serialize();
  const std::string command = "promtool check metrics < " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe)) output += buffer;
  EXPECT_EQ(pclose(pipe), 0) << output;
}

}  // namespace
}  // namespace ringmaster
