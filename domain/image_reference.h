// An OCI image reference as a job spec names it (`image:`), in the grammar
// of the CNCF distribution's reference package, which docker, podman,
// skopeo and Kubernetes share:
//
//   [registry[:port]/]path[:tag][@sha256:hex]
//
// The first component is the registry when it has a '.' or a ':' or is
// "localhost"; otherwise the registry is docker.io, and a one-component
// path there is under library/. Without a tag or a digest the tag is
// "latest".
#ifndef RINGMASTER_DOMAIN_IMAGE_REFERENCE_H_
#define RINGMASTER_DOMAIN_IMAGE_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct ImageReference {
  std::string registry;    // "registry.example:5000", "docker.io"
  std::string repository;  // "team/train", "library/python"
  std::string tag;         // "1.2"; empty when only a digest is given
  std::string digest;      // "sha256:<64 hex>", or empty

  // registry/repository[:tag][@digest]: one image, one spelling (the
  // key of a worker's cache).
  std::string Canonical() const;
  // docker://<Canonical()>, as skopeo takes it.
  std::string Transport() const { return "docker://" + Canonical(); }
};

// The label a worker that runs images registers with (its
// --container-runtime), and that jobs with an image are placed by.
inline constexpr char kImagesLabel[] = "ringmaster.dev/images";
inline constexpr char kImagesLabelValue[] = "true";

// INVALID_ARGUMENT naming what is wrong with `text`.
absl::StatusOr<ImageReference> ParseImageReference(const std::string& text);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_IMAGE_REFERENCE_H_
