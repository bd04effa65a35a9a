"""Packs a working directory into a code archive, as the CLI's `submit`
does, to the same bytes (common/code_archive.cc; the cases of
client/code_package_cases.txt hold both to it): a gzip-compressed ustar
archive, with pax records only for what ustar cannot hold, of its
directories, regular files and links (no times or owners; modes 0644/0755),
leaving out what its .ringmasterignore names (ringmaster._ignore)."""
import hashlib
import os
import stat
import zlib
from typing import BinaryIO, List, NamedTuple, Tuple

from ringmaster._ignore import IgnoreRules
from ringmaster.errors import InvalidSpec


class Packed(NamedTuple):
    sha256: str
    archive_bytes: int
    file_bytes: int
    files: int


class _Item(NamedTuple):
    kind: str  # "dir", "file", "link"
    name: str
    size: int
    executable: bool
    target: str


def _walk(top: str, relative: str, rules: IgnoreRules, items: List[_Item]) -> None:
    """Lists what to pack below top/relative, sorted, directories before
    what they hold."""
    here = os.path.join(top, relative) if relative else top
    try:
        names = sorted(os.listdir(here), key=os.fsencode)
    except OSError as e:
        raise InvalidSpec(f"{here}: {e.strerror}") from None
    for name in names:
        rel = f"{relative}/{name}" if relative else name
        path = os.path.join(top, rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # gone meanwhile
        if stat.S_ISDIR(st.st_mode):
            if not rules.ignored(rel, True):
                items.append(_Item("dir", rel, 0, False, ""))
                _walk(top, rel, rules, items)
        elif stat.S_ISREG(st.st_mode):
            if not rules.ignored(rel, False):
                items.append(_Item("file", rel, st.st_size, bool(st.st_mode & stat.S_IXUSR), ""))
        elif stat.S_ISLNK(st.st_mode):
            if not rules.ignored(rel, False):
                items.append(_Item("link", rel, 0, False, os.readlink(path)))
        # Sockets, pipes and devices stay behind.


def _mebibytes(n: int) -> str:
    return f"{n / 1048576:.1f} MiB"


def _too_large(top: str, items: List[_Item], total: int, limit: int) -> InvalidSpec:
    by_top = {}
    for item in items:
        head, slash, _ = item.name.partition("/")
        key = head + slash
        by_top[key] = by_top.get(key, 0) + item.size
    largest = sorted(by_top.items(), key=lambda kv: -kv[1])[:3]
    return InvalidSpec(
        f"working directory {top} holds {_mebibytes(total)} to upload, more than the "
        f"{_mebibytes(limit)} limit (upload_limit_mb); the largest: "
        + ", ".join(f"{name} {_mebibytes(size)}" for name, size in largest)
        + f". Leave them out in {top}/.ringmasterignore, or set working_dir to a directory "
        "every host mounts and submit with upload=False")


_BLOCK = 512
_MAX_PAX_BYTES = 64 << 10


def _octal(value: int, width: int, name: str) -> bytes:
    """width - 1 octal digits and a NUL."""
    digits = "%0*o" % (width - 1, value)
    if len(digits) != width - 1:
        raise InvalidSpec(f"{name}: too large for the archive")
    return digits.encode() + b"\0"


def _pax_record(key: str, value: bytes) -> bytes:
    """"<length> key=value\\n", the length counting itself."""
    body = len(key) + len(value) + 3
    length = body + 1
    while len(str(length)) + body != length:
        length += 1
    return f"{length} {key}=".encode() + value + b"\n"


def _split_name(full: bytes):
    """ustar's (prefix, name) for a name of up to 255 bytes, or None."""
    if len(full) <= 100:
        return b"", full
    slash = full.find(b"/")
    while slash != -1:
        if slash > 155:
            return None
        if len(full) - slash - 1 <= 100:
            return full[:slash], full[slash + 1:]
        slash = full.find(b"/", slash + 1)
    return None


def _header(name: bytes, kind: bytes, size: int, mode: int, link: bytes = b"") -> bytes:
    """The ustar header block of an entry, after a pax header for what its
    fields cannot hold."""
    out = b""
    split = _split_name(name)
    pax = b""
    if split is None:
        pax += _pax_record("path", name)
        split = (b"", name[:100])
    if len(link) > 100:
        pax += _pax_record("linkpath", link)
    if len(pax) > _MAX_PAX_BYTES:
        raise InvalidSpec(f"{name[:200].decode(errors='replace')}...: the name is too long for "
                          "the archive")
    if pax:
        out += _header(b"PaxHeader", b"x", len(pax), 0o644) + pax + _padding(len(pax))
    prefix, short = split
    block = bytearray(_BLOCK)
    block[0:len(short)] = short
    block[345:345 + len(prefix)] = prefix
    block[157:157 + min(len(link), 100)] = link[:100]
    block[124:136] = _octal(size, 12, name.decode(errors="replace"))
    block[100:108] = _octal(mode, 8, "mode")
    block[108:116] = _octal(0, 8, "uid")
    block[116:124] = _octal(0, 8, "gid")
    block[136:148] = _octal(0, 12, "mtime")
    block[156:157] = kind
    block[257:263] = b"ustar\0"
    block[263:265] = b"00"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return out + bytes(block)


def _padding(size: int) -> bytes:
    return b"\0" * ((_BLOCK - size % _BLOCK) % _BLOCK)


class _Gzip:
    """gzip as zlib writes it for the CLI (gzopen "wb6"): level 6 and
    zlib's own header, so that both make the same bytes."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def write(self, data: bytes) -> None:
        self._out.write(self._z.compress(data))

    def close(self) -> None:
        self._out.write(self._z.flush())


def pack_directory(top: str, limit_bytes: int, out: BinaryIO) -> Packed:
    """Packs `top` into `out` (an open, empty binary file). InvalidSpec
    when its files hold more than `limit_bytes`, naming the largest."""
    try:
        with open(os.path.join(top, ".ringmasterignore"), encoding="utf-8",
                  errors="replace") as f:
            rules = IgnoreRules(f.read())
    except FileNotFoundError:
        rules = IgnoreRules()
    items: List[_Item] = []
    _walk(top, "", rules, items)
    file_bytes = sum(item.size for item in items)
    if file_bytes > limit_bytes:
        raise _too_large(top, items, file_bytes, limit_bytes)
    gz = _Gzip(out)
    for item in items:
        name = item.name.encode("utf-8", "surrogateescape")
        if item.kind == "dir":
            gz.write(_header(name + b"/", b"5", 0, 0o755))
        elif item.kind == "link":
            gz.write(_header(name, b"2", 0, 0o777, item.target.encode("utf-8", "surrogateescape")))
        else:
            gz.write(_header(name, b"0", item.size, 0o755 if item.executable else 0o644))
            _copy(os.path.join(top, item.name), item.size, gz)
            gz.write(_padding(item.size))
    gz.write(b"\0" * (2 * _BLOCK))
    gz.close()
    out.flush()
    archive_bytes, digest = _hash(out)
    return Packed(digest, archive_bytes, file_bytes, sum(i.kind == "file" for i in items))


def _copy(path: str, size: int, gz: _Gzip) -> None:
    """The file's `size` bytes, as the walk measured them."""
    left = size
    with open(path, "rb") as f:
        while left > 0:
            chunk = f.read(min(left, 1 << 16))
            if not chunk:
                raise InvalidSpec(f"{path} shrank while it was being packed")
            gz.write(chunk)
            left -= len(chunk)


def _hash(f: BinaryIO) -> Tuple[int, str]:
    f.seek(0)
    h = hashlib.sha256()
    size = 0
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        size += len(block)
    f.seek(0)
    return size, h.hexdigest()
