// The OCI images a worker's ranks run in, under its state directory:
//
//   images/layouts/<sha256 of the reference>
//                        the OCI image layout skopeo pulls the image into,
//                        while it is pulled and unpacked
//   images/rootfs/<manifest digest>
//                        its root filesystem, unpacked once by umoci (a
//                        digest that two references name, once), read-only
//                        to the ranks
//   images/index         what the cache holds, for a restarted worker
//
// A worker pulls an image once and shares it between jobs; at most
// `max_pulls` pulls run at once, and one image is never pulled twice at
// the same time. The cache is bounded: once it holds more than
// `cache_limit_bytes`, least recently used images are removed, never one a
// rank holds (Acquire to Release).
#ifndef RINGMASTER_WORKER_IMAGE_STORE_H_
#define RINGMASTER_WORKER_IMAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/subprocess.h"
#include "domain/image_reference.h"

namespace ringmaster {

struct ImageStoreOptions {
  std::string dir;  // <state-dir>/images
  // --registry-auth: credentials in the auth.json format of podman and
  // skopeo ({"auths": {"host:port": {"auth": base64(user:password)}}}).
  std::string auth_file;
  // --registry-certs: <dir>/<host:port>/ca.crt trusted for that registry
  // (as /etc/containers/certs.d, which is used without it).
  std::string certs_dir;
  int64_t cache_limit_bytes = int64_t{20} << 30;
  int max_pulls = 2;
  absl::Duration pull_timeout = absl::Hours(1);
  std::string skopeo = "skopeo";
  std::string umoci = "umoci";
};

// An image in the cache, as `ringmaster images` lists it.
struct CachedImage {
  std::string reference;  // canonical
  std::string digest;     // of its manifest
  int64_t bytes = 0;      // its unpacked root filesystem
  int users = 0;          // ranks running in it
  absl::Time last_used;
};

// Thread-safe; Acquire blocks its caller for the length of a pull.
class ImageStore {
 public:
  static absl::StatusOr<std::unique_ptr<ImageStore>> Open(ImageStoreOptions options);

  struct Progress {
    int64_t done_bytes = 0;
    int64_t total_bytes = 0;  // 0 until the manifest is read
    // Waiting for one of the `max_pulls` slots, which other images' pulls
    // hold.
    bool waiting_for_slot = false;
  };
  // The root filesystem of `ref`, pulled when the cache lacks it (or
  // always, with `always`), held until Release. Errors name the image and
  // what the registry said: NOT_FOUND (no such image or tag),
  // PERMISSION_DENIED (credentials refused), UNAVAILABLE (the registry
  // cannot be reached: worth trying again), RESOURCE_EXHAUSTED (no room on
  // the disk, or an image larger than the cache), FAILED_PRECONDITION
  // (anything else the tools refused). `progress`, when given, is called
  // from the caller's thread about once a second while it waits for a pull
  // or pulls; when it returns false, the wait or its own pull ends:
  // CANCELLED.
  struct Held {
    std::string reference;  // canonical
    std::string digest;
    std::string rootfs;
  };
  using ProgressFn = std::function<bool(const Progress&)>;
  absl::StatusOr<Held> Acquire(const ImageReference& ref, bool always,
                               const ProgressFn& progress = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const Held& held) ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<CachedImage> List() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Image {
    int64_t bytes = 0;
    int users = 0;
    absl::Time last_used;
  };
  explicit ImageStore(ImageStoreOptions options) : options_(std::move(options)) {}
  std::string RootfsOf(const std::string& digest) const;
  std::string LayoutOf(const std::string& canonical) const;
  std::vector<std::string> RegistryFlags(const ImageReference& ref) const;
  // The sum of the sizes of the manifest's config and layers; 0 when the
  // registry's answer does not say (a list of manifests).
  absl::StatusOr<int64_t> ManifestBytes(const ImageReference& ref) const;
  // RESOURCE_EXHAUSTED when an image whose layers take `layer_bytes`
  // cannot fit: in the cache, or on the disk with its unpacked files.
  absl::Status RoomFor(const std::string& canonical, int64_t layer_bytes) const;
  // skopeo copy into the image's layout; the manifest's digest.
  absl::StatusOr<std::string> Pull(const ImageReference& ref, const ProgressFn& progress);
  absl::StatusOr<std::string> LayoutDigest(const std::string& layout) const;
  // umoci unpack of the image, unless its digest is unpacked; its size.
  absl::StatusOr<int64_t> Unpack(const std::string& canonical, const std::string& digest);
  Held HoldLocked(const std::string& canonical, const std::string& digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the least recently used images nobody holds while the cache
  // is over its limit: out of the index under the lock (their directories
  // moved to images/trash), off the disk after.
  void Prune() ABSL_LOCKS_EXCLUDED(mu_);
  void TrashLocked(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t BytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // images/index: rendered under the lock, written after it.
  void SaveIndexLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushIndex() ABSL_LOCKS_EXCLUDED(mu_, index_mu_);
  void LoadIndex() ABSL_LOCKS_EXCLUDED(mu_);
  // Removes what is on the disk and not in the index (at Open, before any
  // pull).
  void RemoveLeftovers() ABSL_LOCKS_EXCLUDED(mu_);

  const ImageStoreOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Image> images_ ABSL_GUARDED_BY(mu_);      // by manifest digest
  std::map<std::string, std::string> tags_ ABSL_GUARDED_BY(mu_);  // canonical -> digest
  // Digests being unpacked (or found unpacked) for a pull: never pruned.
  std::multiset<std::string> unpacking_ ABSL_GUARDED_BY(mu_);
  // The pulls running, by canonical reference, and how far each is.
  std::map<std::string, Progress> pulling_ ABSL_GUARDED_BY(mu_);
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;  // running now
  int64_t trashed_ ABSL_GUARDED_BY(mu_) = 0;
  std::string index_text_ ABSL_GUARDED_BY(mu_);
  Mutex index_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // the index file's writes, in order
};

// --image-cache-limit: a size ("20GiB", "512MiB", bytes).
absl::StatusOr<int64_t> ParseImageCacheLimit(const std::string& text);

// What a failed skopeo run means, naming the image and what the registry
// said (see ImageStore::Acquire).
absl::Status PullError(const std::string& canonical, const ToolRun& run);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_IMAGE_STORE_H_
