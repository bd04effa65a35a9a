// What `submit` leaves out of a working directory it uploads: the patterns
// of its .ringmasterignore, with .gitignore's syntax and meaning:
//
//   # a comment            blank lines are skipped too
//   *.pyc                  no '/': matches a name at any depth
//   /build                 a '/' at the start or in the middle: from the top
//   data/                  a trailing '/': directories only
//   **/cache, logs/**, a/**/b   '**' spans directories
//   !keep.pyc              a later '!' pattern takes a name back
//
// '*' and '?' do not match '/'; "[a-z]" and "[!a-z]" are character classes;
// '\' quotes the next character. As in git, nothing inside a left-out
// directory can be taken back. ".git/" is always left out.
#ifndef RINGMASTER_CLIENT_IGNORE_RULES_H_
#define RINGMASTER_CLIENT_IGNORE_RULES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringmaster {

// Immutable after construction; thread-compatible.
class IgnoreRules {
 public:
  // The lines of a .ringmasterignore (empty text: only the defaults).
  explicit IgnoreRules(absl::string_view text);

  // `path` is relative to the uploaded directory, '/'-separated.
  bool Ignored(absl::string_view path, bool is_directory) const;

 private:
  struct Rule {
    std::string pattern;
    bool negated = false;
    bool directory_only = false;
    bool anchored = false;  // matched against the whole path, else the name
  };
  void Add(absl::string_view line);

  std::vector<Rule> rules_;
};

// Glob matching of the rules above, exposed for tests.
bool GlobMatch(absl::string_view pattern, absl::string_view text);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_IGNORE_RULES_H_
