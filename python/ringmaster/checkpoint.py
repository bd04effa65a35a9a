"""ringmaster.checkpoint: a rank's state kept in its worker's memory, so that
a restart goes on from the step it was on.

    state = ringmaster.checkpoint.load()        # (state, step) or None
    if state is not None:
        saved, start = state
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
    for step in range(start, steps):
        ...
        ringmaster.checkpoint.save({"model": model.state_dict(),
                                    "optimizer": optimizer.state_dict()}, step + 1)

save(state, step) copies a dict of tensors and picklable values into the
snapshot segment the worker holds for this rank (RINGMASTER_SNAPSHOT_FD): a
sealed shared-memory file outside the rank, which outlives its death. It
takes a copy of every tensor first (from a GPU, into pinned memory, without
waiting) and returns a Handle at once; a thread of its own waits for that
copy, writes it into the segment and commits it. The segment holds the two
newest: a rank killed while one is written leaves the one before whole. The
worker pushes each to a peer of the job (a replica), and a rank started
again elsewhere finds its newest one in its new segment. With
`persist=True` the thread also writes it to the job's checkpoint directory
(RINGMASTER_CHECKPOINT_DIR/python/rank-<R>/), for restarts that lose every
worker.

load() returns (state, step) for the newest step every rank holds (in
memory, from a peer's replica, or on disk), tensors on the CPU; with
torch.distributed initialized the ranks agree on it, so call it on every
rank after init_process_group. None when there is none, or outside a job
that has a segment.

The segment's layout is domain/snapshot_segment.h's; a Python snapshot's
payload is a pickled skeleton of the state (its tensors replaced by
references) followed by the tensors' bytes, checked by zlib's CRC-32.
"""
import mmap
import os
import pickle
import struct
import threading
import time
import zlib

__all__ = ["save", "load", "Handle", "SnapshotError"]

MAGIC = 0x53534D52  # "RMSS"
VERSION = 1
HEADER_BYTES = 4096
SLOTS_AT = 32
SLOT_HEADER = 64
FORMAT_PYTHON = 2
CHECKSUM_CRC32 = 2
_ALIGN = 64


class SnapshotError(Exception):
    """A state that cannot be saved: larger than the segment's slots, or
    not picklable."""


class _Segment:
    """The segment at a descriptor, mapped: the reading and writing of
    domain/snapshot_segment.h."""

    def __init__(self, fd):
        size = os.fstat(fd).st_size
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        magic, version, capacity, slot_bytes = struct.unpack_from("<IIQQ", self.map, 0)
        if magic != MAGIC or version != VERSION or capacity > size:
            raise SnapshotError("RINGMASTER_SNAPSHOT_FD is not a snapshot segment")
        self.slot_bytes = slot_bytes

    def _slot(self, i):
        at = SLOTS_AT + i * SLOT_HEADER
        seq, step, nbytes, checksum, attempt, world, rank, fmt, kind, _, ms = struct.unpack_from(
            "<QqQQiiiIIIq", self.map, at)
        return dict(slot=i, sequence=seq, step=step, bytes=nbytes, checksum=checksum,
                    attempt=attempt, world_size=world, rank=rank, format=fmt, kind=kind,
                    commit_ms=ms)

    def committed(self):
        """The committed snapshots' headers, newest first."""
        out = [s for s in (self._slot(0), self._slot(1))
               if s["sequence"] != 0 and s["bytes"] <= self.slot_bytes]
        return sorted(out, key=lambda s: -s["sequence"])

    def data(self, i):
        start = HEADER_BYTES + i * self.slot_bytes
        return memoryview(self.map)[start:start + self.slot_bytes]

    def read(self, info):
        """The payload, checked; None when it fails or changed meanwhile."""
        payload = bytes(self.data(info["slot"])[:info["bytes"]])
        if self._slot(info["slot"])["sequence"] != info["sequence"]:
            return None
        if info["kind"] != CHECKSUM_CRC32 or zlib.crc32(payload) != info["checksum"]:
            return None
        return payload

    def begin(self, nbytes):
        if nbytes > self.slot_bytes:
            raise SnapshotError(
                f"a snapshot of {nbytes / 2**20:.1f} MiB does not fit this rank's segment, whose "
                f"slots hold {self.slot_bytes / 2**20:.1f} MiB (the worker's "
                f"--snapshot-memory-limit over its slots)")
        s0, s1 = self._slot(0)["sequence"], self._slot(1)["sequence"]
        index = 0 if s0 <= s1 else 1  # the empty or older one
        struct.pack_into("<Q", self.map, SLOTS_AT + index * SLOT_HEADER, 0)
        return index

    def commit(self, index, step, nbytes, checksum, attempt, world, rank):
        at = SLOTS_AT + index * SLOT_HEADER
        other = self._slot(1 - index)["sequence"]
        struct.pack_into("<qQQiiiIIIq", self.map, at + 8, step, nbytes, checksum, attempt, world,
                         rank, FORMAT_PYTHON, CHECKSUM_CRC32, 0, int(time.time() * 1000))
        # x86 and ARM64 stores of one aligned word: the number comes last.
        struct.pack_into("<Q", self.map, at, other + 1)


class _TensorRef:
    """Where a tensor of the state lies in the payload."""

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, shape
        self.offset = self.nbytes = 0  # set by _encode


def _stage(value, staged):
    """The state with each tensor replaced by a reference; each reference
    and a copy of its tensor (on the CPU; from a GPU without waiting) are
    appended to `staged`, in the order of the payload."""
    import torch
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.is_cuda:
            copy = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            copy.copy_(t, non_blocking=True)
        else:
            copy = t.clone(memory_format=torch.contiguous_format)
        ref = _TensorRef(str(t.dtype).replace("torch.", ""), tuple(t.shape))
        staged.append((ref, copy.contiguous()))
        return ref
    if isinstance(value, dict):
        return type(value)((k, _stage(v, staged)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_stage(v, staged) for v in value)
    return value


def _bytes_of(tensor):
    import torch
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return memoryview(flat.view(torch.uint8).numpy()).cast("B")


def _encode(skeleton, staged):
    """The payload's parts: a length, the pickled skeleton, then each
    tensor's bytes at an aligned offset."""
    offset = 0
    for ref, t in staged:
        ref.nbytes = t.numel() * t.element_size()
        ref.offset = offset
        offset += (ref.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    head = pickle.dumps(skeleton, protocol=pickle.HIGHEST_PROTOCOL)
    start = (8 + len(head) + _ALIGN - 1) // _ALIGN * _ALIGN
    return head, start, start + offset


def _decode(payload):
    import torch
    (head_len,) = struct.unpack_from("<Q", payload, 0)
    skeleton = pickle.loads(payload[8:8 + head_len])
    start = (8 + head_len + _ALIGN - 1) // _ALIGN * _ALIGN

    def build(value):
        if isinstance(value, _TensorRef):
            raw = bytearray(payload[start + value.offset:start + value.offset + value.nbytes])
            dtype = getattr(torch, value.dtype)
            if value.nbytes == 0:
                return torch.empty(value.shape, dtype=dtype)
            return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(value.shape)
        if isinstance(value, dict):
            return type(value)((k, build(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return type(value)(build(v) for v in value)
        return value
    return build(skeleton)


class Handle:
    """A save in flight: wait() blocks until it is committed (and raises
    what it failed with); done() says whether it has ended."""

    def __init__(self):
        self._done = threading.Event()
        self._error = None

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True

    def _finish(self, error=None):
        self._error = error
        self._done.set()


def _env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class _Saver:
    """The rank's segment and its writing thread (one save at a time)."""

    def __init__(self):
        fd = _env_int("RINGMASTER_SNAPSHOT_FD", -1)
        self.segment = _Segment(fd) if fd >= 0 else None
        self.rank = _env_int("RANK", 0)
        self.world = _env_int("WORLD_SIZE", 1)
        self.attempt = _env_int("TORCHELASTIC_RESTART_COUNT", 0)
        self.disk = os.path.join(os.environ.get("RINGMASTER_CHECKPOINT_DIR", ""), "python",
                                 f"rank-{self.rank}") \
            if os.environ.get("RINGMASTER_CHECKPOINT_DIR") else None
        self.last = None  # the Handle of the save before

    def save(self, state, step, persist):
        if self.last is not None:
            self.last.wait()  # one slot is always whole: the next waits for the commit
        staged = []
        skeleton = _stage(state, staged)
        event = None
        if any(t.is_pinned() for _, t in staged):
            import torch
            event = torch.cuda.Event()
            event.record()
        head, start, total = _encode(skeleton, staged)
        handle = Handle()
        self.last = handle
        threading.Thread(target=self._write, daemon=True, name="ringmaster-checkpoint",
                         args=(handle, head, start, total, staged, step, persist, event)).start()
        return handle

    def _write(self, handle, head, start, total, staged, step, persist, event):
        try:
            if event is not None:
                event.synchronize()  # the copies from the GPU have landed
            if self.segment is not None:
                index = self.segment.begin(total)
                out = self.segment.data(index)
                self._fill(out, head, start, staged)
                checksum = zlib.crc32(out[:total])
                self.segment.commit(index, step, total, checksum, self.attempt, self.world,
                                    self.rank)
                payload = out[:total] if persist else None
            else:
                buf = bytearray(total)
                self._fill(memoryview(buf), head, start, staged)
                payload = memoryview(buf)
            if persist and self.disk:
                _write_file(self.disk, step, payload)
            handle._finish()
        except BaseException as e:  # noqa: B902 - handed to whoever waits
            handle._finish(e)

    @staticmethod
    def _fill(out, head, start, staged):
        struct.pack_into("<Q", out, 0, len(head))
        out[8:8 + len(head)] = head
        for ref, t in staged:
            at = start + ref.offset
            out[at:at + ref.nbytes] = _bytes_of(t)


def _write_file(directory, step, payload):
    """step-<N>.rmsnap in `directory`, whole or not at all: a checksum
    trailer, written to a temporary name, synced, renamed."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"step-{step}.rmsnap")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(payload)
        f.write(struct.pack("<IQ", zlib.crc32(payload), step))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    for old in _disk_steps(directory)[:-2]:  # the two newest are kept
        try:
            os.unlink(os.path.join(directory, f"step-{old}.rmsnap"))
        except OSError:
            pass


def _disk_steps(directory):
    steps = []
    try:
        names = os.listdir(directory)
    except OSError:
        return steps
    for name in names:
        if name.startswith("step-") and name.endswith(".rmsnap"):
            try:
                steps.append(int(name[len("step-"):-len(".rmsnap")]))
            except ValueError:
                pass
    return sorted(steps)


def _read_file(directory, step):
    try:
        with open(os.path.join(directory, f"step-{step}.rmsnap"), "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 12:
        return None
    crc, stored = struct.unpack_from("<IQ", data, len(data) - 12)
    payload = data[:-12]
    return payload if stored == step and zlib.crc32(payload) == crc else None


_saver = None
_lock = threading.Lock()


def _get_saver():
    global _saver
    with _lock:
        if _saver is None:
            _saver = _Saver()
        return _saver


def save(state, step, persist=False):
    """Copies `state` (a dict of tensors and picklable values) as this
    rank's snapshot of `step`; returns a Handle before the copy is written.
    Waits for the save before it, if that one is still being written."""
    if not isinstance(state, dict):
        raise TypeError("ringmaster.checkpoint.save takes a dict")
    return _get_saver().save(state, int(step), persist)


def _held(saver):
    """Steps this rank can load: {step: ("memory", info) or ("disk", None)}."""
    held = {}
    if saver.disk:
        for s in _disk_steps(saver.disk):
            held[s] = ("disk", None)
    if saver.segment is not None:
        for info in saver.segment.committed():
            if info["format"] == FORMAT_PYTHON:
                held[info["step"]] = ("memory", info)
    return held


def _gather(value):
    """Every rank's `value`, in rank order, when the ranks' process group is
    up (torch.distributed); else this rank's alone."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return [value]
    except ImportError:
        return [value]
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    return everyone


def _agree(steps):
    """The highest step every rank holds: all ranks' lists, gathered."""
    everyone = _gather(sorted(steps))
    common = set(everyone[0])
    for other in everyone[1:]:
        common &= set(other)
    return max(common) if common else None


def load():
    """(state, step) for the newest step every rank holds, or None. Where
    it came from goes with the rank's progress reports (`status` says it)."""
    saver = _get_saver()
    if saver.last is not None:
        saver.last.wait()
    held = _held(saver)
    # A snapshot that fails its checksum is passed over for the next.
    usable, source = {}, {}
    for s, (where, info) in held.items():
        payload = saver.segment.read(info) if where == "memory" else None
        source[s] = "memory" if payload is not None else "disk"
        if payload is None and saver.disk:
            payload = _read_file(saver.disk, s)
        if payload is not None:
            usable[s] = payload
    step = _agree(list(usable))
    if step is None:
        return None
    _report_resumed(_job_source(_from_replica(source[step], step)), step)
    return _decode(usable[step]), step


def _from_replica(source, step):
    """`source` of this rank's `step`: "replica" when its worker fetched that
    snapshot from a peer's replica before the rank started."""
    fetched = os.environ.get("RINGMASTER_SNAPSHOT_FETCHED", "").split(" ", 1)[0]
    return "replica" if source == "memory" and fetched == str(step) else source


def _job_source(mine):
    """Where the job's ranks resumed from, as the trainer says it: "replica"
    when any rank's snapshot came from a peer's, "disk" when any read disk,
    else "memory"."""
    everyone = _gather(mine)
    for source in ("replica", "disk"):
        if source in everyone:
            return source
    return "memory"


def _report_resumed(source, step):
    import ringmaster
    ringmaster._get().resumed(source, step)


def _reset_for_tests():
    global _saver
    with _lock:
        _saver = None
