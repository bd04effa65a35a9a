// Hash tables keyed by std::string_view that hash as Abseil does. This
// Abseil has a string_view of its own, so absl::Hash<std::string_view>
// falls back to std::hash (libstdc++'s byte-wise hash), several times
// slower on the short ids a scheduling pass looks up by the thousand.
#ifndef RINGMASTER_COMMON_STRING_VIEW_HASH_H_
#define RINGMASTER_COMMON_STRING_VIEW_HASH_H_

#include <cstddef>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

struct StringViewHash {
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>{}(absl::string_view(s.data(), s.size()));
  }
};

template <typename Value>
using StringViewMap = absl::flat_hash_map<std::string_view, Value, StringViewHash>;
using StringViewSet = absl::flat_hash_set<std::string_view, StringViewHash>;

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_STRING_VIEW_HASH_H_
