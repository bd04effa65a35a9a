// A stolen worker key posing as the coordinator, or as another worker's
// agent: each kind of client (the CLI, a worker, a rank, the Python module)
// connects to a TLS server that shows the stolen certificate, and hangs up
// after the handshake without sending a byte, so no token reaches it. A
// control shows the same server is spoken to when its certificate is the
// one the client expects.
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

using testing::Runfile;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A TLS server on 127.0.0.1 that shows `stem`.crt/.key and speaks no
// protocol. It offers ALPN "h2", as a gRPC server does, so a client that
// accepts its certificate goes on to send the HTTP/2 preface and its
// request headers, token included. Each connection counts as refused (the
// client hung up without a byte after the handshake, or aborted it) or
// spoke (the client sent data).
class StolenKeyServer {
 public:
  explicit StolenKeyServer(const std::string& stem) {
    signal(SIGPIPE, SIG_IGN);  // a client hanging up mid-handshake
    ctx_ = SSL_CTX_new(TLS_server_method());
    EXPECT_EQ(SSL_CTX_use_certificate_file(ctx_, (stem + ".crt").c_str(), SSL_FILETYPE_PEM), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, (stem + ".key").c_str(), SSL_FILETYPE_PEM), 1);
    SSL_CTX_set_alpn_select_cb(ctx_, SelectH2, nullptr);
    listen_fd_ = testing::ListenOnLoopback(&port_);
    EXPECT_GE(listen_fd_, 0);
    thread_ = std::thread([this] { Serve(); });
  }

  ~StolenKeyServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
    SSL_CTX_free(ctx_);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  int refused() {
    absl::MutexLock lock(&mu_);
    return refused_;
  }
  int spoke() {
    absl::MutexLock lock(&mu_);
    return spoke_;
  }

 private:
  static int SelectH2(SSL*, const unsigned char** out, unsigned char* out_len,
                      const unsigned char* in, unsigned int in_len, void*) {
    static const unsigned char kH2[] = {2, 'h', '2'};
    unsigned char* selected = nullptr;
    if (SSL_select_next_proto(&selected, out_len, kH2, sizeof(kH2), in, in_len) !=
        OPENSSL_NPN_NEGOTIATED) {
      return SSL_TLSEXT_ERR_NOACK;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }

  void Serve() {
    while (!stop_) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      timeval timeout{5, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      bool spoke = false;
      bool hung_up = true;
      if (SSL_accept(ssl) == 1) {
        char buffer[256];
        const int n = SSL_read(ssl, buffer, sizeof(buffer));
        spoke = n > 0;
        // A read that timed out is neither: the client kept the connection.
        hung_up = n <= 0 && errno != EAGAIN && errno != EWOULDBLOCK;
      }
      ERR_clear_error();
      SSL_free(ssl);
      close(fd);
      absl::MutexLock lock(&mu_);
      if (spoke)
        ++spoke_;
      else if (hung_up)
        ++refused_;
    }
  }

  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Mutex mu_;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  int spoke_ ABSL_GUARDED_BY(mu_) = 0;
};

class ImpersonationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tls");
    testing::CommandResult init =
        testing::RunCommand({Runfile("client/ringmaster"), "certs", "init", "--dir", dir_,
                             "--worker", "w1", "--worker", "w2", "--host", "127.0.0.1"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  // Until `server` has seen `connections` hang up or any speak.
  static void AwaitRefusals(StolenKeyServer& server, int connections) {
    EXPECT_TRUE(testing::WaitFor(
        [&] { return server.refused() >= connections || server.spoke() > 0; }, absl::Seconds(60)))
        << "no connection came";
  }

  // `ringmaster jobs` against `server`, with the cluster's CA and admin
  // certificate, and an admin token to give away.
  testing::CommandResult CliJobs(const StolenKeyServer& server) {
    return testing::RunCommand({Runfile("client/ringmaster"), "jobs", "--coordinator",
                                server.address(), "--tls-dir", dir_},
                               {{"RINGMASTER_TOKEN", "the-admin-token"}}, absl::Seconds(60));
  }

  std::string dir_;
};

TEST_F(ImpersonationTest, TheCliRefusesAWorkerKeyAsTheCoordinator) {
  StolenKeyServer stolen(dir_ + "/worker-w1");
  testing::CommandResult jobs = CliJobs(stolen);
  EXPECT_EQ(jobs.exit_code, 1) << jobs.out;
  EXPECT_NE(jobs.err.find("does not name ringmaster-coordinator"), std::string::npos) << jobs.err;
  EXPECT_GE(stolen.refused(), 1);
  EXPECT_EQ(stolen.spoke(), 0) << "the CLI sent its request (and token) to a worker's key";
}

// The control: the same server with the coordinator's own certificate is
// spoken to, so the refusals above are the identity check's.
TEST_F(ImpersonationTest, TheSameServerWithTheCoordinatorsCertificateIsSpokenTo) {
  StolenKeyServer genuine(dir_ + "/coordinator");
  testing::CommandResult jobs = CliJobs(genuine);
  EXPECT_NE(jobs.exit_code, 0);
  EXPECT_GE(genuine.spoke(), 1) << jobs.err;
}

TEST_F(ImpersonationTest, AWorkerRefusesAnotherWorkersKeyAsTheCoordinator) {
  StolenKeyServer stolen(dir_ + "/worker-w1");
  const std::string state = testing::MakeTempDir("worker-w2");
  testing::BackgroundProcess worker(
      {Runfile("worker/ringmaster-worker"), "--coordinator", stolen.address(), "--tls-dir", dir_,
       "--id", "w2", "--state-dir", state, "--port", "0", "--metrics-port", "0", "--slots", "1"},
      {}, state + "/worker.log");
  ASSERT_TRUE(worker.started());
  AwaitRefusals(stolen, 2);
  EXPECT_EQ(stolen.spoke(), 0) << "the worker registered with a worker's key";
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return worker.output().find("does not name ringmaster-coordinator") != std::string::npos;
      },
      absl::Seconds(30)))
      << worker.output();
}

TEST_F(ImpersonationTest, ARankRefusesAWorkerKeyAsTheCoordinatorsStore) {
  StolenKeyServer stolen(dir_ + "/worker-w1");
  const std::string work = testing::MakeTempDir("rank");
  std::ofstream(work + "/spec.yaml")
      << "trainer:\n  model: {type: mlp, hidden: [8]}\n"
         "  data: {path: 'synthetic:rows=64,features=4,classes=2'}\n  epochs: 1\n";
  testing::BackgroundProcess rank(
      {Runfile("trainer/ringmaster-trainer"), "--spec", work + "/spec.yaml"},
      {{"RINGMASTER_COORDINATOR", stolen.address()},
       {"RINGMASTER_JOB_ID", "victim-1"},
       {"TORCHELASTIC_RESTART_COUNT", "0"},
       {"RANK", "0"},
       {"WORLD_SIZE", "2"},
       {"RINGMASTER_TLS_CA", ReadFile(dir_ + "/ca.crt")},
       {"RINGMASTER_JOB_TOKEN", "the-job-token"}},
      work + "/rank.log");
  ASSERT_TRUE(rank.started());
  AwaitRefusals(stolen, 1);
  EXPECT_GE(stolen.refused(), 1) << rank.output();
  EXPECT_EQ(stolen.spoke(), 0) << "the rank sent its job token to a worker's key";
}

// The Python module reports to its own worker's agent: another worker's
// key, or the coordinator's, at that address is refused.
TEST_F(ImpersonationTest, ThePythonModuleRefusesAnyoneButItsWorker) {
  const std::string python_dir = Runfile("python/ringmaster/__init__.py");
  const std::string package = python_dir.substr(0, python_dir.rfind("/ringmaster/"));
  for (const std::string stem : {"worker-w2", "coordinator"}) {
    StolenKeyServer stolen(dir_ + "/" + stem);
    testing::CommandResult report =
        testing::RunCommand({"python3", "-c",
                             "import ringmaster, time\n"
                             "ringmaster.report(step=1, loss=0.5, samples=10)\n"
                             "time.sleep(3)\n"},
                            {{"PYTHONPATH", package},
                             {"RINGMASTER_JOB_ID", "victim-1"},
                             {"RINGMASTER_WORKER_ADDRESS", stolen.address()},
                             {"RINGMASTER_WORKER_ID", "w1"},
                             {"RINGMASTER_TLS_CA", ReadFile(dir_ + "/ca.crt")},
                             {"RINGMASTER_JOB_TOKEN", "the-job-token"}},
                            absl::Seconds(60));
    EXPECT_EQ(report.exit_code, 0) << report.err;
    AwaitRefusals(stolen, 1);
    EXPECT_EQ(stolen.spoke(), 0) << stem << "'s key received the Python module's report";
  }
}

// A certificate made before identities were checked (a worker's naming the
// coordinator's hosts, a coordinator's without ringmaster-coordinator) is
// made again by certs init; renew makes them all again with the same names.
TEST_F(ImpersonationTest, CertsInitReissuesWhatLacksANameAndRenewRemakesAll) {
  const std::string before = ReadFile(dir_ + "/coordinator.crt");
  testing::CommandResult same = testing::RunCommand(
      {Runfile("client/ringmaster"), "certs", "init", "--dir", dir_, "--worker", "w1"});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("nothing to do"), std::string::npos) << same.out;

  testing::CommandResult added =
      testing::RunCommand({Runfile("client/ringmaster"), "certs", "init", "--dir", dir_, "--host",
                           "coordinator.example"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_NE(added.out.find("coordinator.crt (adds coordinator.example"), std::string::npos)
      << added.out;
  const std::string text =
      testing::Shell("openssl x509 -noout -ext subjectAltName -in " + dir_ + "/coordinator.crt")
          .out;
  for (const char* name : {"ringmaster-coordinator", "127.0.0.1", "coordinator.example"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << " lost: " << text;
  }

  testing::CommandResult renew =
      testing::RunCommand({Runfile("client/ringmaster"), "certs", "renew", "--dir", dir_});
  ASSERT_EQ(renew.exit_code, 0) << renew.err;
  for (const char* file : {"admin.crt", "coordinator.crt", "worker-w1.crt", "worker-w2.crt"}) {
    EXPECT_NE(renew.out.find(absl::StrCat(file, " (renewed; valid until")), std::string::npos)
        << file << ": " << renew.out;
  }
  EXPECT_EQ(renew.out.find("ca.crt"), std::string::npos) << "renew must keep the CA";
  const std::string worker =
      testing::Shell("openssl x509 -noout -ext subjectAltName -in " + dir_ + "/worker-w1.crt").out;
  EXPECT_NE(worker.find("DNS:w1"), std::string::npos) << worker;
  EXPECT_EQ(worker.find("127.0.0.1"), std::string::npos) << "a worker names only itself";
  EXPECT_EQ(worker.find("localhost"), std::string::npos) << "a worker names only itself";
  EXPECT_NE(ReadFile(dir_ + "/coordinator.crt"), before);
}

// Signs with the CA of `dir` a certificate of the old worker profile: the
// coordinator's host names besides the worker's id.
void MakeOldWorkerCertificate(const std::string& dir, const std::string& id) {
  std::ofstream(dir + "/old.ext") << "subjectAltName=DNS:" << id
                                  << ",DNS:localhost,IP:127.0.0.1\n"
                                     "extendedKeyUsage=serverAuth,clientAuth\n";
  const std::string stem = dir + "/worker-" + id;
  testing::CommandResult made = testing::Shell(absl::StrCat(
      "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ", stem,
      ".key -subj /O=ringmaster/CN=ringmaster:worker:", id, " -out ", dir,
      "/old.csr 2>&1 && openssl x509 -req -in ", dir, "/old.csr -CA ", dir, "/ca.crt -CAkey ", dir,
      "/ca.key -CAcreateserial -days 30 -extfile ", dir, "/old.ext -out ", stem, ".crt 2>&1"));
  ASSERT_EQ(made.exit_code, 0) << made.out;
}

TEST_F(ImpersonationTest, CertsInitRemakesAWorkerCertificateThatNamesMore) {
  MakeOldWorkerCertificate(dir_, "w3");
  testing::CommandResult init = testing::RunCommand(
      {Runfile("client/ringmaster"), "certs", "init", "--dir", dir_, "--worker", "w3"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_NE(init.out.find("worker-w3.crt (named more than ringmaster:worker:w3 (localhost, "
                          "127.0.0.1)"),
            std::string::npos)
      << init.out;
  const std::string names =
      testing::Shell("openssl x509 -noout -ext subjectAltName -in " + dir_ + "/worker-w3.crt").out;
  EXPECT_EQ(names.find("localhost"), std::string::npos) << names;
}

TEST_F(ImpersonationTest, AWorkerCannotBeNamedAsTheCoordinator) {
  testing::CommandResult init =
      testing::RunCommand({Runfile("client/ringmaster"), "certs", "init", "--dir", dir_, "--worker",
                           "ringmaster-coordinator"});
  EXPECT_EQ(init.exit_code, 2);
  EXPECT_NE(init.err.find("--worker ringmaster-coordinator: that is the coordinator's name"),
            std::string::npos)
      << init.err;
}

}  // namespace
}  // namespace ringmaster
