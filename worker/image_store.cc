#include "worker/image_store.h"

#include <sys/statvfs.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/private_dir.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// How often a pull's progress is read off the layout.
constexpr absl::Duration kProgressInterval = absl::Milliseconds(500);

// The name of an image's layout: the SHA-256 of its canonical reference
// (a file name may not hold every character a reference does).
std::string NameOf(const std::string& canonical) {
  Sha256 sha;
  sha.Update(canonical);
  return sha.HexDigest();
}

// The one image of a layout is tagged so.
constexpr char kTag[] = "image";

// Bytes of the regular files below `path`.
int64_t DiskBytes(const std::string& path) {
  std::error_code error;
  int64_t bytes = 0;
  for (fs::recursive_directory_iterator
           it(path, fs::directory_options::skip_permission_denied, error),
       end;
       it != end; it.increment(error)) {
    if (error) break;
    if (it->is_regular_file(error) && !it->is_symlink(error)) {
      bytes += static_cast<int64_t>(it->file_size(error));
    }
  }
  return bytes;
}

absl::StatusOr<google::protobuf::Struct> ParseJson(const std::string& text,
                                                   const std::string& what) {
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(text, &root).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(what, " is not JSON"));
  }
  return root;
}

const google::protobuf::Value* Field(const google::protobuf::Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? nullptr : &it->second;
}

}  // namespace

absl::StatusOr<int64_t> ParseImageCacheLimit(const std::string& text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  int64_t unit = 1;
  for (const auto& [suffix, size] :
       {std::pair<const char*, int64_t>{"GiB", int64_t{1} << 30}, {"MiB", int64_t{1} << 20}}) {
    if (absl::ConsumeSuffix(&rest, suffix)) {
      unit = size;
      break;
    }
  }
  double number = 0;
  if (!absl::SimpleAtod(rest, &number) || number <= 0 || number * unit > 1e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image-cache-limit ", text, ": not a size (\"20GiB\", \"512MiB\", bytes)"));
  }
  return static_cast<int64_t>(number * unit);
}

absl::Status PullError(const std::string& canonical, const ToolRun& run) {
  std::string said = run.output;
  // skopeo's last line: level=fatal msg="...".
  if (const size_t msg = said.rfind("msg=\""); msg != std::string::npos) {
    said = said.substr(msg + 5);
    if (const size_t end = said.rfind('"'); end != std::string::npos) said.resize(end);
  }
  said = absl::StrReplaceAll(said, {{"\\\"", "\""}});  // logfmt's escaped quotes
  // It names the image again (`copy`'s and `inspect`'s words): once is
  // enough.
  for (const char* prefix : {"initializing source ", "Error parsing image name "}) {
    if (!absl::StartsWith(said, prefix)) continue;
    if (const size_t colon = said.find(": "); colon != std::string::npos) said.erase(0, colon + 2);
  }
  if (run.timed_out) said = "the pull ran out of time";
  const std::string message = absl::StrCat("pulling ", canonical, ": ", said);
  auto has = [&](const char* text) { return absl::StrContains(run.output, text); };
  // A registry whose name does not resolve is as missing as an image.
  if (has("manifest unknown") || has("name unknown") || has("not found") || has("no such host")) {
    return absl::NotFoundError(message);
  }
  // The registry's "denied", not a local file's "permission denied".
  if (has("unauthorized") || has("authentication required") ||
      (has("denied") && !has("permission denied"))) {
    return absl::PermissionDeniedError(message);
  }
  if (has("no space left on device")) return absl::ResourceExhaustedError(message);
  if (run.timed_out || has("connection refused") || has("i/o timeout") || has("connection reset") ||
      has("TLS handshake timeout") || has("network is unreachable") || has("server misbehaving") ||
      has("503 Service Unavailable")) {
    return absl::UnavailableError(message);
  }
  return absl::FailedPreconditionError(message);
}

absl::StatusOr<std::unique_ptr<ImageStore>> ImageStore::Open(ImageStoreOptions options) {
  RETURN_IF_ERROR(MakePrivateDir(options.dir));
  std::error_code error;
  for (const char* sub : {"/rootfs", "/layouts", "/trash"}) {
    fs::create_directories(options.dir + sub, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make ", options.dir, sub, ": ", error.message()));
    }
  }
  fs::remove_all(options.dir + "/trash", error);  // what a removal left
  fs::create_directories(options.dir + "/trash", error);
  std::unique_ptr<ImageStore> store(new ImageStore(std::move(options)));
  store->LoadIndex();
  store->RemoveLeftovers();
  return store;
}

void ImageStore::RemoveLeftovers() {
  std::set<std::string> kept;
  {
    MutexLock lock(&mu_);
    for (const auto& [digest, image] : images_) kept.insert(RootfsOf(digest));
  }
  std::error_code error;
  // Pulls and unpacks a crash cut short, and images the index lost.
  for (const char* sub : {"/layouts", "/rootfs"}) {
    for (const auto& entry : fs::directory_iterator(options_.dir + sub, error)) {
      if (kept.count(entry.path().string()) > 0) continue;
      spdlog::info("image cache: removing {}, left by an earlier worker", entry.path().string());
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
}

std::string ImageStore::RootfsOf(const std::string& digest) const {
  return absl::StrCat(options_.dir, "/rootfs/", absl::StripPrefix(digest, "sha256:"));
}

std::string ImageStore::LayoutOf(const std::string& canonical) const {
  return absl::StrCat(options_.dir, "/layouts/", NameOf(canonical));
}

std::vector<std::string> ImageStore::RegistryFlags(const ImageReference& ref) const {
  std::vector<std::string> flags;
  if (!options_.auth_file.empty()) flags.insert(flags.end(), {"--authfile", options_.auth_file});
  const std::string certs = absl::StrCat(options_.certs_dir, "/", ref.registry);
  std::error_code error;
  if (!options_.certs_dir.empty() && fs::is_directory(certs, error)) {
    flags.insert(flags.end(), {"--src-cert-dir", certs});
  }
  return flags;
}

absl::StatusOr<int64_t> ImageStore::ManifestBytes(const ImageReference& ref) const {
  std::vector<std::string> argv = {options_.skopeo, "inspect", "--raw"};
  for (std::string& flag : RegistryFlags(ref)) {
    argv.push_back(flag == "--src-cert-dir" ? "--cert-dir" : std::move(flag));
  }
  argv.push_back(ref.Transport());
  ASSIGN_OR_RETURN(ToolRun run, RunToCompletion(argv, {}, absl::Minutes(2)));
  if (run.exit_code != 0) return PullError(ref.Canonical(), run);
  // The size is for the progress alone: an answer this cannot read (a
  // warning printed before it) leaves it unknown.
  absl::StatusOr<google::protobuf::Struct> parsed = ParseJson(run.output, "the manifest");
  if (!parsed.ok()) return 0;
  const google::protobuf::Struct& manifest = *parsed;
  int64_t bytes = 0;
  if (const google::protobuf::Value* config = Field(manifest, "config");
      config != nullptr && config->has_struct_value()) {
    if (const auto* size = Field(config->struct_value(), "size")) {
      bytes += static_cast<int64_t>(size->number_value());
    }
  }
  if (const google::protobuf::Value* layers = Field(manifest, "layers")) {
    for (const google::protobuf::Value& layer : layers->list_value().values()) {
      if (const auto* size = Field(layer.struct_value(), "size")) {
        bytes += static_cast<int64_t>(size->number_value());
      }
    }
  }
  return bytes;  // 0 for a list of manifests (one per platform): unknown
}

absl::StatusOr<std::string> ImageStore::Pull(const ImageReference& ref,
                                             const ProgressFn& progress) {
  const std::string canonical = ref.Canonical();
  Progress seen;
  absl::StatusOr<int64_t> total = ManifestBytes(ref);
  if (!total.ok()) return total.status();
  seen.total_bytes = *total;
  RETURN_IF_ERROR(RoomFor(canonical, seen.total_bytes));
  if (progress && !progress(seen)) {
    return absl::CancelledError(absl::StrCat("the pull of ", canonical, " was stopped"));
  }
  std::vector<std::string> argv = {options_.skopeo, "copy", "--quiet"};
  for (std::string& flag : RegistryFlags(ref)) argv.push_back(std::move(flag));
  argv.push_back(ref.Transport());
  // Pulled afresh: a layout holds one image.
  const std::string layout = LayoutOf(canonical);
  std::error_code error;
  fs::remove_all(layout, error);
  argv.push_back(absl::StrCat("oci:", layout, ":", kTag));
  auto tick = [&] {
    seen.done_bytes = DiskBytes(layout);
    {
      MutexLock lock(&mu_);
      pulling_[canonical] = seen;  // for the ranks that wait for it
    }
    return !progress || progress(seen);
  };
  ASSIGN_OR_RETURN(ToolRun run, RunToCompletion(argv, {}, options_.pull_timeout, 1 << 16, tick,
                                                kProgressInterval));
  if (run.cancelled)
    return absl::CancelledError(absl::StrCat("the pull of ", canonical, " was stopped"));
  if (run.exit_code != 0) return PullError(canonical, run);
  tick();  // all of it
  return LayoutDigest(layout);
}

absl::Status ImageStore::RoomFor(const std::string& canonical, int64_t layer_bytes) const {
  if (layer_bytes > options_.cache_limit_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pulling ", canonical, ": its layers take ", layer_bytes >> 20,
                     " MiB, more than the worker's --image-cache-limit of ",
                     options_.cache_limit_bytes >> 20, " MiB"));
  }
  // The layers and their unpacked files, at least as large, side by side
  // until the unpack ends.
  struct statvfs fs {};
  if (statvfs(options_.dir.c_str(), &fs) == 0) {
    const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < 2 * layer_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pulling ", canonical, ": its layers take ", layer_bytes >> 20, " MiB, and ",
                       options_.dir, " has ", free_bytes >> 20, " MiB free, less than twice that"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ImageStore::LayoutDigest(const std::string& layout) const {
  std::ifstream in(layout + "/index.json");
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(google::protobuf::Struct index, ParseJson(text.str(), "the layout's index"));
  if (const google::protobuf::Value* manifests = Field(index, "manifests")) {
    for (const google::protobuf::Value& m : manifests->list_value().values()) {
      const google::protobuf::Value* annotations = Field(m.struct_value(), "annotations");
      if (annotations == nullptr) continue;
      const auto* name = Field(annotations->struct_value(), "org.opencontainers.image.ref.name");
      const auto* digest = Field(m.struct_value(), "digest");
      if (name != nullptr && digest != nullptr && name->string_value() == kTag) {
        return digest->string_value();
      }
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the image layout ", layout, " holds no image after its pull"));
}

absl::StatusOr<int64_t> ImageStore::Unpack(const std::string& canonical,
                                           const std::string& digest) {
  const std::string bundle = RootfsOf(digest);
  std::error_code error;
  if (fs::is_directory(bundle + "/rootfs", error)) return DiskBytes(bundle);
  // Two names of one image may unpack it at once: the first in place wins.
  const std::string partial = absl::StrCat(bundle, ".", NameOf(canonical));
  fs::remove_all(partial, error);
  std::vector<std::string> argv = {options_.umoci, "unpack"};
  if (geteuid() != 0) argv.push_back("--rootless");
  argv.insert(argv.end(), {"--image", absl::StrCat(LayoutOf(canonical), ":", kTag), partial});
  ASSIGN_OR_RETURN(ToolRun run, RunToCompletion(argv, {}, options_.pull_timeout));
  if (run.exit_code != 0) {
    fs::remove_all(partial, error);
    const std::string message =
        absl::StrCat("unpacking ", canonical, ": ", absl::StripTrailingAsciiWhitespace(run.output));
    if (absl::StrContains(run.output, "no space left on device")) {
      return absl::ResourceExhaustedError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  fs::rename(partial, bundle, error);
  if (error) {
    fs::remove_all(partial, error);
    if (!fs::is_directory(bundle + "/rootfs", error)) {
      return absl::FailedPreconditionError(absl::StrCat("cannot put ", canonical, " in ", bundle));
    }
  }
  return DiskBytes(bundle);
}

absl::StatusOr<ImageStore::Held> ImageStore::Acquire(const ImageReference& ref, bool always,
                                                     const ProgressFn& progress) {
  const std::string canonical = ref.Canonical();
  // One pull of an image at a time, which a waiter for it takes; a new
  // pull once a slot is free. One wait for both, so that no other pull of
  // the image starts while this one waits for a slot.
  for (;;) {
    {
      MutexLock lock(&mu_);
      auto cached_or_free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (pulling_.count(canonical) > 0) return false;
        return (!always && tags_.count(canonical) > 0) || pulls_ < options_.max_pulls;
      };
      if (mu_.AwaitWithTimeout(absl::Condition(&cached_or_free), kProgressInterval)) {
        auto cached = tags_.find(canonical);
        if (cached != tags_.end() && !always) return HoldLocked(canonical, cached->second);
        ++pulls_;
        pulling_[canonical] = {};
        break;
      }
    }
    // Waiting: for another rank's pull of the image (how far it is), or
    // for a pull slot.
    Progress other;
    {
      MutexLock lock(&mu_);
      if (auto it = pulling_.find(canonical); it != pulling_.end()) {
        other = it->second;
      } else {
        other.waiting_for_slot = true;
      }
    }
    if (progress && !progress(other)) {
      return absl::CancelledError(absl::StrCat("no longer waiting for the pull of ", canonical));
    }
  }
  absl::StatusOr<std::string> digest = Pull(ref, progress);
  if (digest.ok()) {
    MutexLock lock(&mu_);
    unpacking_.insert(*digest);  // not pruned under the unpack (another name may hold it)
  }
  absl::StatusOr<int64_t> bytes = digest.ok() ? Unpack(canonical, *digest) : digest.status();
  // The root filesystem is what ranks use; the layout was for unpacking.
  std::error_code error;
  fs::remove_all(LayoutOf(canonical), error);
  absl::StatusOr<Held> held;
  {
    MutexLock lock(&mu_);
    --pulls_;
    pulling_.erase(canonical);
    if (digest.ok()) unpacking_.erase(unpacking_.find(*digest));
    if (bytes.ok() && *bytes > options_.cache_limit_bytes) {
      bytes = absl::ResourceExhaustedError(
          absl::StrCat("pulling ", canonical, ": it takes ", *bytes >> 20,
                       " MiB unpacked, more than the worker's --image-cache-limit of ",
                       options_.cache_limit_bytes >> 20, " MiB"));
      if (images_.count(*digest) == 0) TrashLocked(RootfsOf(*digest));
    }
    if (!bytes.ok()) {
      held = bytes.status();
    } else {
      tags_[canonical] = *digest;
      images_[*digest].bytes = *bytes;
      held = HoldLocked(canonical, *digest);
      SaveIndexLocked();
    }
  }
  Prune();
  return held;
}

ImageStore::Held ImageStore::HoldLocked(const std::string& canonical, const std::string& digest) {
  Image& image = images_[digest];
  ++image.users;
  image.last_used = absl::Now();
  return Held{canonical, digest, RootfsOf(digest) + "/rootfs"};
}

void ImageStore::Release(const Held& held) {
  {
    MutexLock lock(&mu_);
    auto it = images_.find(held.digest);
    if (it == images_.end() || it->second.users == 0) return;
    --it->second.users;
    it->second.last_used = absl::Now();
    SaveIndexLocked();
  }
  Prune();
}

void ImageStore::Prune() {
  {
    MutexLock lock(&mu_);
    while (BytesLocked() > options_.cache_limit_bytes) {
      auto oldest = images_.end();
      for (auto it = images_.begin(); it != images_.end(); ++it) {
        if (it->second.users > 0 || unpacking_.count(it->first) > 0) continue;
        if (oldest == images_.end() || it->second.last_used < oldest->second.last_used) {
          oldest = it;
        }
      }
      if (oldest == images_.end()) break;  // every image is in use
      const std::string digest = oldest->first;
      std::string names;
      for (auto it = tags_.begin(); it != tags_.end();) {
        if (it->second != digest) {
          ++it;
          continue;
        }
        absl::StrAppend(&names, names.empty() ? "" : ", ", it->first);
        it = tags_.erase(it);
      }
      spdlog::info("image cache over its {} MiB: removed {} ({} MiB, unused since {})",
                   options_.cache_limit_bytes >> 20, names.empty() ? digest : names,
                   oldest->second.bytes >> 20, absl::FormatTime(oldest->second.last_used));
      TrashLocked(RootfsOf(digest));
      images_.erase(oldest);
    }
    SaveIndexLocked();
  }
  FlushIndex();
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(options_.dir + "/trash", error)) {
    fs::remove_all(entry.path(), error);
  }
}

void ImageStore::TrashLocked(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return;
  fs::rename(path, absl::StrCat(options_.dir, "/trash/", ++trashed_), error);
  if (error) spdlog::warn("cannot remove {} from the image cache: {}", path, error.message());
}

int64_t ImageStore::BytesLocked() const {
  int64_t bytes = 0;
  for (const auto& [digest, image] : images_) bytes += image.bytes;
  return bytes;
}

int64_t ImageStore::bytes() const {
  MutexLock lock(&mu_);
  return BytesLocked();
}

std::vector<CachedImage> ImageStore::List() const {
  MutexLock lock(&mu_);
  std::vector<CachedImage> list;
  for (const auto& [canonical, digest] : tags_) {
    auto it = images_.find(digest);
    if (it == images_.end()) continue;
    list.push_back({canonical, digest, it->second.bytes, it->second.users, it->second.last_used});
  }
  return list;
}

// images/index: a line per name, "<canonical> <digest> <bytes> <last used,
// unix seconds>", so that a restarted worker knows its cache.
void ImageStore::SaveIndexLocked() {
  index_text_.clear();
  for (const auto& [canonical, digest] : tags_) {
    auto it = images_.find(digest);
    if (it == images_.end()) continue;
    absl::StrAppend(&index_text_, canonical, " ", digest, " ", it->second.bytes, " ",
                    absl::ToUnixSeconds(it->second.last_used), "\n");
  }
}

void ImageStore::FlushIndex() {
  // The newest text is written last, whichever thread writes it.
  MutexLock file_lock(&index_mu_);
  std::string text;
  {
    MutexLock lock(&mu_);
    text = index_text_;
  }
  const std::string path = options_.dir + "/index";
  {
    std::ofstream out(path + ".new", std::ios::trunc);
    out << text;
  }
  std::error_code error;
  fs::rename(path + ".new", path, error);
  if (error) spdlog::warn("cannot write {}: {}", path, error.message());
}

void ImageStore::LoadIndex() {
  std::ifstream in(options_.dir + "/index");
  std::string line;
  MutexLock lock(&mu_);
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    int64_t bytes = 0, used = 0;
    std::error_code error;
    if (f.size() != 4 || !absl::SimpleAtoi(f[2], &bytes) || !absl::SimpleAtoi(f[3], &used) ||
        !fs::is_directory(RootfsOf(f[1]) + "/rootfs", error)) {
      continue;  // a line of a cache that is gone
    }
    tags_[f[0]] = f[1];
    Image& image = images_[f[1]];
    image.bytes = bytes;
    image.last_used = absl::FromUnixSeconds(used);
  }
}

}  // namespace ringmaster
