#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/time/clock.h"

#include "absl/strings/str_cat.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    metrics::Registry* registry,
                                                                    std::function<bool()> ready) {
  static const unsigned initialized = mg_init_library(0);
  (void)initialized;
  std::unique_ptr<MetricsServer> server(new MetricsServer);
  server->registry_ = registry;
  server->ready_ = std::move(ready);
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", "2", nullptr};
  mg_callbacks callbacks{};
  server->context_ = mg_start(&callbacks, nullptr, options);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, " (address in use?)"));
  }
  mg_set_request_handler(server->context_, "/metrics", &MetricsServer::Handle, server.get());
  if (server->ready_) {
    mg_set_request_handler(server->context_, "/ready", &MetricsServer::HandleReady, server.get());
  }
  server->port_ = std::stoi(address.substr(address.rfind(':') + 1));
  server->host_ = address.substr(0, address.rfind(':'));
  return server;
}

void StopCivetweb(::mg_context* context, const std::string& host, int port) {
  if (context == nullptr) return;
  // civetweb's listener polls in 2 s quanta and mg_stop waits for it; a
  // connection made while it stops wakes it at once.
  std::thread poke([port, host] {
    for (int i = 0; i < 50; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
          addr.sin_addr.s_addr == htonl(INADDR_ANY)) {
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      }
      const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      close(fd);
      if (!connected) return;  // the listener is gone
    }
  });
  mg_stop(context);
  poke.join();
}

MetricsServer::~MetricsServer() { StopCivetweb(context_, host_, port_); }

int MetricsServer::Handle(::mg_connection* connection, void* self) {
  const std::string body = static_cast<MetricsServer*>(self)->registry_->Serialize();
  const std::string head = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  mg_write(connection, body.data(), body.size());
  return 200;
}

int MetricsServer::HandleReady(::mg_connection* connection, void* self) {
  const bool ready = static_cast<MetricsServer*>(self)->ready_();
  const std::string body = ready ? "ready\n" : "not ready\n";
  const std::string head =
      absl::StrCat("HTTP/1.1 ", ready ? "200 OK" : "503 Service Unavailable",
                   "\r\nContent-Type: text/plain\r\nContent-Length: ", body.size(),
                   "\r\nConnection: close\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  mg_write(connection, body.data(), body.size());
  return ready ? 200 : 503;
}

}  // namespace ringmaster
