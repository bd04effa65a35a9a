"""ringmaster.checkpoint against a segment laid out as the worker makes it
(domain/snapshot_segment.h): saves come back whole, a save cut off leaves
the one before, a corrupt one is passed over, a state too large is refused
by name, and the two newest steps on disk serve when memory holds none."""
import os
import signal
import struct

import pytest

torch = pytest.importorskip("torch")
import ringmaster.checkpoint as ckpt  # noqa: E402

PAGE = 4096


def make_segment(capacity=1 << 20):
    """A memfd with the header the worker writes; its descriptor."""
    fd = os.memfd_create("segment", 0)
    os.ftruncate(fd, capacity)
    slot_bytes = (capacity - ckpt.HEADER_BYTES) // 2 // PAGE * PAGE
    os.pwrite(fd, struct.pack("<IIQQ", ckpt.MAGIC, ckpt.VERSION, capacity, slot_bytes), 0)
    return fd


@pytest.fixture
def rank(monkeypatch, tmp_path):
    """This process as rank 0 of 1 with a segment and a checkpoint dir."""
    fd = make_segment()
    monkeypatch.setenv("RINGMASTER_SNAPSHOT_FD", str(fd))
    monkeypatch.setenv("RINGMASTER_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    ckpt._reset_for_tests()
    yield fd
    ckpt._reset_for_tests()
    os.close(fd)


def state(step):
    return {"w": torch.arange(100, dtype=torch.float32) * step,
            "half": torch.ones(3, 5, dtype=torch.bfloat16) * step,
            "empty": torch.zeros(0),
            "meta": {"epoch": step // 10, "names": ["a", "b"]},
            "list": [torch.tensor([step]), (1, 2)]}


def assert_state(got, step):
    want = state(step)
    assert torch.equal(got["w"], want["w"])
    assert got["half"].dtype == torch.bfloat16 and torch.equal(got["half"], want["half"])
    assert got["empty"].shape == (0,)
    assert got["meta"] == want["meta"]
    assert torch.equal(got["list"][0], want["list"][0]) and got["list"][1] == (1, 2)


def test_saves_come_back_whole_and_the_newest_wins(rank):
    assert ckpt.load() is None
    for s in (1, 2, 3):
        handle = ckpt.save(state(s), s)
    assert handle.wait(10)
    got, step = ckpt.load()
    assert step == 3
    assert_state(got, 3)
    # What the worker sees: two slots, the newest first, a Python payload of
    # attempt 2, checked by CRC-32.
    seg = ckpt._get_saver().segment
    held = seg.committed()
    assert [h["step"] for h in held] == [3, 2]
    assert all(h["format"] == ckpt.FORMAT_PYTHON and h["kind"] == ckpt.CHECKSUM_CRC32 and
               h["attempt"] == 2 for h in held)


def test_the_tensors_are_copied_when_save_returns(rank):
    live = {"w": torch.zeros(1000)}
    handle = ckpt.save(live, 1)
    live["w"].fill_(7)  # the training goes on at once
    handle.wait(10)
    got, _ = ckpt.load()
    assert torch.equal(got["w"], torch.zeros(1000))


def test_a_save_cut_off_leaves_the_one_before(rank):
    ckpt.save(state(1), 1).wait(10)
    pid = os.fork()
    if pid == 0:  # a rank killed mid-write: the slot begun, never committed
        seg = ckpt._get_saver().segment
        index = seg.begin(5000)
        seg.data(index)[:5000] = b"x" * 5000
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    got, step = ckpt.load()
    assert step == 1
    assert_state(got, 1)


def test_a_corrupt_snapshot_is_passed_over(rank):
    ckpt.save(state(1), 1).wait(10)
    ckpt.save(state(2), 2).wait(10)
    seg = ckpt._get_saver().segment
    newest = seg.committed()[0]
    seg.data(newest["slot"])[100] ^= 0xFF
    got, step = ckpt.load()
    assert step == 1
    assert_state(got, 1)


def test_a_state_too_large_is_refused_naming_the_sizes(rank):
    handle = ckpt.save({"w": torch.zeros(1 << 20)}, 1)  # 4 MiB into 0.5 MiB slots
    with pytest.raises(ckpt.SnapshotError, match="does not fit this rank's segment"):
        handle.wait(10)


def test_disk_serves_when_memory_holds_nothing(rank, monkeypatch, tmp_path):
    for s in (100, 200, 300):
        ckpt.save(state(s), s, persist=True).wait(10)
    files = sorted(os.listdir(tmp_path / "python" / "rank-0"))
    assert files == ["step-200.rmsnap", "step-300.rmsnap"]  # the two newest
    # A new worker: an empty segment.
    monkeypatch.setenv("RINGMASTER_SNAPSHOT_FD", str(make_segment()))
    ckpt._reset_for_tests()
    got, step = ckpt.load()
    assert step == 300
    assert_state(got, 300)
    # What the rank's progress reports say of it.
    import ringmaster
    assert ringmaster._get()._p["resumed_from"] == "disk"
    assert ringmaster._get()._p["resumed_step"] == 300
    # A torn file is passed over for the one before.
    path = tmp_path / "python" / "rank-0" / "step-300.rmsnap"
    path.write_bytes(path.read_bytes()[:-20])
    assert ckpt.load()[1] == 200


def test_a_fetched_replica_is_reported_as_the_source(rank, monkeypatch):
    ckpt.save(state(7), 7).wait(10)
    monkeypatch.setenv("RINGMASTER_SNAPSHOT_FETCHED", "7 worker w2")
    import ringmaster
    assert ckpt.load()[1] == 7
    assert ringmaster._get()._p["resumed_from"] == "replica"
    monkeypatch.setenv("RINGMASTER_SNAPSHOT_FETCHED", "5 worker w2")
    assert ckpt.load()[1] == 7
    assert ringmaster._get()._p["resumed_from"] == "memory"


def test_outside_a_job_load_finds_nothing(monkeypatch):
    for name in ("RINGMASTER_SNAPSHOT_FD", "RINGMASTER_CHECKPOINT_DIR"):
        monkeypatch.delenv(name, raising=False)
    ckpt._reset_for_tests()
    assert ckpt.load() is None
    ckpt.save({"w": torch.ones(2)}, 1).wait(10)  # goes nowhere, fails nothing
    ckpt._reset_for_tests()
