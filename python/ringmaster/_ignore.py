"""What `submit(upload=True)` leaves out of the directory it uploads: the
patterns of its .ringmasterignore, with .gitignore's syntax and meaning, the
same rules as the CLI's (client/ignore_rules.h; both are tested against
client/ignore_rules_cases.txt):

    # a comment            blank lines are skipped too
    *.pyc                  no '/': matches a name at any depth
    /build                 a '/' at the start or in the middle: from the top
    data/                  a trailing '/': directories only
    **/cache, logs/**, a/**/b   '**' spans directories
    !keep.pyc              a later '!' pattern takes a name back

'*' and '?' do not match '/'; "[a-z]" and "[!a-z]" are character classes;
'\\' quotes the next character. Nothing inside a left-out directory can be
taken back. ".git/" is always left out.
"""
from typing import List, NamedTuple, Optional, Tuple


def _match_class(pattern: str, c: str) -> Tuple[int, bool]:
    """Matches `c` against the class that starts at pattern[0] ('['):
    (pattern characters used, matched); used is 0 when the class has no
    ']' (then '[' is an ordinary character)."""
    i = 1
    negated = False
    if i < len(pattern) and pattern[i] in "!^":
        negated = True
        i += 1
    inside = False
    first = True
    while i < len(pattern):
        if pattern[i] == "]" and not first:
            return i + 1, (inside != negated) and c != "/"
        first = False
        low = pattern[i]
        if low == "\\" and i + 1 < len(pattern):
            i += 1
            low = pattern[i]
        high = low
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            high = pattern[i + 2]
            i += 2
        if low <= c <= high:
            inside = True
        i += 1
    return 0, False


def glob_match(p: str, s: str) -> bool:
    """Whether the glob `p` matches all of `s` ('/'-separated)."""
    while p:
        if p.startswith("**"):
            stars = len(p) - len(p.lstrip("*"))
            rest = p[stars:]
            if not rest:
                return True  # "x/**": everything inside
            if rest[0] == "/":
                # "**/": zero or more whole directories.
                rest = rest[1:]
                if glob_match(rest, s):
                    return True
                slash = s.find("/")
                while slash != -1:
                    if glob_match(rest, s[slash + 1:]):
                        return True
                    slash = s.find("/", slash + 1)
                return False
            p = p[stars - 1:]  # "a**b" is "a*b"
            continue
        head = p[0]
        if head == "*":
            k = 0
            while True:
                if glob_match(p[1:], s[k:]):
                    return True
                if k == len(s) or s[k] == "/":
                    return False
                k += 1
        elif head == "?":
            if not s or s[0] == "/":
                return False
        elif head == "[":
            if not s:
                return False
            used, matched = _match_class(p, s[0])
            if used > 0:
                if not matched:
                    return False
                p, s = p[used:], s[1:]
                continue
            if s[0] != "[":
                return False
        else:
            if head == "\\" and len(p) > 1:
                p = p[1:]
            if not s or s[0] != p[0]:
                return False
        p, s = p[1:], s[1:]
    return not s


class _Rule(NamedTuple):
    pattern: str
    negated: bool
    directory_only: bool
    anchored: bool  # matched against the whole path, else the name


def _parse(line: str) -> Optional[_Rule]:
    if line.endswith("\r"):
        line = line[:-1]
    # Trailing spaces go unless quoted with '\'.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line[0] == "#":
        return None
    negated = False
    if line[0] == "!":
        negated = True
        line = line[1:]
    elif line[0] == "\\" and len(line) > 1 and line[1] in "!#":
        line = line[1:]
    directory_only = line.endswith("/")
    if directory_only:
        line = line[:-1]
    anchored = "/" in line
    if line.startswith("/"):
        line = line[1:]
    if not line:
        return None
    return _Rule(line, negated, directory_only, anchored)


class IgnoreRules:
    """The rules of one .ringmasterignore; immutable."""

    def __init__(self, text: str = "") -> None:
        self._rules: List[_Rule] = []
        for line in [".git/"] + text.split("\n"):
            rule = _parse(line)
            if rule is not None:
                self._rules.append(rule)

    def ignored(self, path: str, is_directory: bool) -> bool:
        """Whether `path` (relative to the uploaded directory,
        '/'-separated) is left out."""
        name = path.rsplit("/", 1)[-1]
        ignored = False
        for rule in self._rules:
            if rule.directory_only and not is_directory:
                continue
            if glob_match(rule.pattern, path if rule.anchored else name):
                ignored = not rule.negated
        return ignored
