#include "testing/test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace ringmaster::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int counter = 0;

}  // namespace

std::string MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name, "-", getpid(), "-", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "ringmaster", "/", path);
}

BackgroundProcess::BackgroundProcess(std::vector<std::string> argv,
                                     const std::map<std::string, std::string>& env, std::string log)
    : log_(std::move(log)) {
  SubprocessSpec spec;
  spec.argv = std::move(argv);
  spec.env = CurrentEnvironment();
  for (const auto& [name, value] : env) spec.env[name] = value;
  spec.output_path = log_;
  pid_ = SpawnProcess(spec).value_or(-1);
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string BackgroundProcess::output() const { return ReadFile(log_); }

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, absl::Duration timeout) {
  const std::string dir = MakeTempDir("cmd");
  // stdout and stderr go to separate files: a wrapper shell splits them.
  SubprocessSpec spec;
  spec.argv = {"/bin/sh", "-c", "\"$@\" 2>\"$RM_ERR\"", "sh"};
  spec.argv.insert(spec.argv.end(), argv.begin(), argv.end());
  spec.env = CurrentEnvironment();
  for (const auto& [k, v] : env) spec.env[k] = v;
  spec.env["RM_ERR"] = dir + "/err";
  spec.output_path = dir + "/out";
  CommandResult result;
  absl::StatusOr<pid_t> pid = SpawnProcess(spec);
  if (!pid.ok()) {
    result.err = std::string(pid.status().message());
    return result;
  }
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(*pid, &status, WNOHANG);
    if (r == *pid) break;
    if (absl::Now() > deadline) {
      kill(-*pid, SIGKILL);
      waitpid(*pid, &status, 0);
      result.err = "timed out\n";
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(dir + "/out");
  result.err += ReadFile(dir + "/err");
  return result;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", address, "\r\nConnection: close\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

CommandResult Shell(const std::string& command_line) {
  return RunCommand({"/bin/sh", "-c", command_line});
}

bool ProcessGroupAlive(int pgid) { return kill(-pgid, 0) == 0 || errno != ESRCH; }

bool ProcessAlive(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  // A zombie is dead for our purposes.
  size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
}

int SpawnLogged(std::vector<std::string> argv, const std::string& log_path) {
  SubprocessSpec spec;
  spec.argv = std::move(argv);
  spec.env = CurrentEnvironment();
  spec.output_path = log_path;
  return SpawnProcess(spec).value_or(0);
}

void KillAndReap(int pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

int ListenOnLoopback(int* port, int backlog) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

}  // namespace ringmaster::testing
