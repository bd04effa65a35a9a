// SHA-256 (OpenSSL's), written out as 64 lowercase hex digits.
#ifndef RINGMASTER_COMMON_SHA256_H_
#define RINGMASTER_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// Not thread-safe.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void Update(absl::string_view data);
  // The digest of everything given; the object is spent.
  std::string HexDigest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// 64 lowercase hex digits: the shape of a digest, and so a safe file name.
bool IsSha256Hex(absl::string_view s);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SHA256_H_
