"""Packs a working directory into a code archive, as the CLI's `submit`
does: a gzip-compressed ustar/pax archive of its directories, regular files
and links (no times or owners; modes 0644/0755), leaving out what its
.ringmasterignore names (ringmaster._ignore)."""
import gzip
import hashlib
import os
import stat
import tarfile
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


def _info(item: _Item) -> tarfile.TarInfo:
    info = tarfile.TarInfo(item.name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if item.kind == "dir":
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    elif item.kind == "link":
        info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, item.target
    else:
        info.type, info.size = tarfile.REGTYPE, item.size
        info.mode = 0o755 if item.executable else 0o644
    return info


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
    with gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=out, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for item in items:
                info = _info(item)
                if item.kind != "file":
                    tar.addfile(info)
                    continue
                with open(os.path.join(top, item.name), "rb") as data:
                    tar.addfile(info, data)
    out.flush()
    archive_bytes, digest = _hash(out)
    return Packed(digest, archive_bytes, file_bytes, sum(i.kind == "file" for i in items))


def _hash(f: BinaryIO) -> Tuple[int, str]:
    f.seek(0)
    h = hashlib.sha256()
    size = 0
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        size += len(block)
    f.seek(0)
    return size, h.hexdigest()
