// Where the CLI sends a token. A fake coordinator records the metadata of
// each call it gets: over plaintext, a token goes beyond loopback only when
// the user says so (--insecure, or --tls-dir ""), with a warning; and a
// standby's "the leader is at X" is followed with the token only to an
// address the user gave.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "proto/job.grpc.pb.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

constexpr char kToken[] = "rmu.bob.6f1b2d0c";

// A JobService whose ListJobs records the authorization it was given and
// answers empty, or, with `leader`, as a standby naming that leader.
class RecordingCoordinator : public v1::JobService::CallbackService {
 public:
  // Serves on `host` (port picked by the kernel), plaintext.
  RecordingCoordinator(const std::string& host, std::string leader = "")
      : leader_(std::move(leader)) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(absl::StrCat(host, ":0"), grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat(host, ":", port);
  }
  ~RecordingCoordinator() override { server_->Shutdown(); }

  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest*, v1::ListJobsResponse*) override {
    std::string authorization = "(none)";
    auto it = context->client_metadata().find("authorization");
    if (it != context->client_metadata().end()) {
      authorization = std::string(it->second.data(), it->second.size());
    }
    {
      MutexLock lock(&mu_);
      seen_.push_back(authorization);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(leader_.empty() ? grpc::Status::OK
                                    : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                   "not the leader: the leader is at " + leader_));
    return reactor;
  }

  const std::string& address() const { return address_; }
  // The authorization of each call, in order.
  std::vector<std::string> Seen() {
    MutexLock lock(&mu_);
    return seen_;
  }

 private:
  const std::string leader_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

// This machine's first IPv4 address beyond loopback; empty when it has none.
std::string AddressBeyondLoopback() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* a = all; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr &&
        std::string(text).rfind("127.", 0) != 0) {
      found = text;
    }
  }
  freeifaddrs(all);
  return found;
}

testing::CommandResult Jobs(const std::vector<std::string>& flags,
                            std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {testing::Runfile("client/ringmaster")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("jobs");
  env["RINGMASTER_TOKEN"] = kToken;
  env["HOME"] = testing::MakeTempDir("home");  // no local cluster's TLS files
  return testing::RunCommand(argv, env, absl::Seconds(30));
}

TEST(TokenRoutesTest, APlaintextTokenGoesBeyondLoopbackOnlyWhenTheUserSaysSo) {
  const std::string host = AddressBeyondLoopback();
  if (host.empty()) GTEST_SKIP() << "this machine has no IPv4 address beyond loopback";
  RecordingCoordinator remote(host);
  const testing::CommandResult refused = Jobs({"--coordinator", remote.address()});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(absl::StrCat("not sending the token in plaintext to ",
                                          remote.address(), ", beyond loopback")),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(remote.Seen().empty()) << "a call reached it";

  for (const std::vector<std::string>& said :
       {std::vector<std::string>{"--insecure"}, std::vector<std::string>{"--tls-dir", ""}}) {
    const testing::CommandResult sent = Jobs([&] {
      std::vector<std::string> flags = said;
      flags.insert(flags.end(), {"--coordinator", remote.address()});
      return flags;
    }());
    EXPECT_EQ(sent.exit_code, 0) << said[0] << ": " << sent.err;
    EXPECT_NE(sent.err.find("warning: the token goes in plaintext to " + remote.address()),
              std::string::npos)
        << said[0] << ": " << sent.err;
  }
  EXPECT_EQ(remote.Seen(), (std::vector<std::string>{absl::StrCat("Bearer ", kToken),
                                                     absl::StrCat("Bearer ", kToken)}));
}

// Loopback is an address, not a name that begins like one.
TEST(TokenRoutesTest, ANameThatLooksLikeLoopbackIsNotLoopback) {
  const testing::CommandResult r = Jobs({"--coordinator", "127.0.0.1.example.invalid:7070"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not sending the token in plaintext to 127.0.0.1.example.invalid:7070"),
            std::string::npos)
      << r.err;
}

// A worker's own token follows the same rule.
TEST(TokenRoutesTest, AWorkerSendsItsTokenInPlaintextOnlyToLoopback) {
  const std::string state = testing::MakeTempDir("worker-token");
  const testing::CommandResult r = testing::RunCommand(
      {testing::Runfile("worker/ringmaster-worker"), "--coordinator", "192.0.2.9:7070", "--port",
       "0", "--metrics-port", "0", "--state-dir", state},
      {{"RINGMASTER_TOKEN", "wkr.w1.0d3c"}, {"PATH", "/usr/bin:/bin"}}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("not sending this worker's token in plaintext to 192.0.2.9:7070"),
            std::string::npos)
      << r.out << r.err;
}

TEST(TokenRoutesTest, ALoopbackCoordinatorTakesAPlaintextTokenWithoutAWord) {
  RecordingCoordinator local("127.0.0.1");
  const testing::CommandResult r = Jobs({"--coordinator", local.address()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("plaintext"), std::string::npos) << r.err;
  EXPECT_EQ(local.Seen(), std::vector<std::string>{absl::StrCat("Bearer ", kToken)});
}

TEST(TokenRoutesTest, AStandbysRedirectIsFollowedOnlyToAnAddressGiven) {
  RecordingCoordinator elsewhere("127.0.0.1");
  RecordingCoordinator standby("127.0.0.1", elsewhere.address());
  const testing::CommandResult r = Jobs({"--coordinator", standby.address()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the leader is at " + elsewhere.address()), std::string::npos) << r.err;
  EXPECT_EQ(standby.Seen().size(), 1u);
  EXPECT_TRUE(elsewhere.Seen().empty()) << "the token followed the redirect";

  // Given among the addresses, the leader named is followed.
  const testing::CommandResult listed =
      Jobs({"--coordinator", absl::StrCat(standby.address(), ",", elsewhere.address())});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(elsewhere.Seen(), std::vector<std::string>{absl::StrCat("Bearer ", kToken)});
}

}  // namespace
}  // namespace ringmaster
