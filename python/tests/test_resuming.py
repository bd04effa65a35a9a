"""How the clients go on after a failure, without a cluster: following the
leader, and resuming a log stream from its positions."""
from ringmaster._connection import Targets, leader_named_in, split_addresses
from ringmaster._stream import LogResume, RevisionFilter
from ringmaster.v1 import job_pb2


def test_a_standby_s_refusal_names_the_leader():
    assert leader_named_in("not the leader: the leader is at 10.0.0.2:7070") == "10.0.0.2:7070"
    assert leader_named_in("not the leader: the leader is at b:7070; try it") == "b:7070"
    assert leader_named_in("connection refused") == ""
    assert split_addresses(" a:1, ,b:2 ") == ("a:1", "b:2")
    assert split_addresses(["a:1", "b:2"]) == ("a:1", "b:2")


def test_targets_follow_the_leader_named_then_the_next_address():
    targets = Targets(["a:1", "b:2", "c:3"])
    assert targets.current() == "a:1"
    assert targets.follow("UNAVAILABLE", "not the leader: the leader is at c:3", "a:1",
                          False) == 0.0
    assert targets.current() == "c:3"
    assert targets.follow("UNAVAILABLE", "connection refused", "c:3", False) == 0.0
    assert targets.current() == "a:1", "after the last address, the first"
    pause = targets.follow("UNAVAILABLE", "connection refused", "a:1", False)
    assert pause == 0.25, "a whole round without a leader: a pause"
    assert targets.follow("NOT_FOUND", "no job", "b:2", True) is None, "an answer stands"
    assert targets.follow("DEADLINE_EXCEEDED", "", "b:2", False) is None, \
        "a call that may have been made is not made again"
    assert targets.follow("DEADLINE_EXCEEDED", "", "b:2", True) == 0.0
    assert targets.follow("CANCELLED", "", "c:3", False) is None
    assert targets.follow("CANCELLED", "", "c:3", True) == 0.0, \
        "a read cancelled by a standby turning leader is made again"
    one = Targets(["a:1"])
    assert one.follow("UNAVAILABLE", "connection refused", "a:1", True) is None
    assert one.follow("UNAVAILABLE", "the leader is at z:9", "a:1", True) == 0.25, \
        "every try of one address is a whole round"
    assert one.current() == "z:9"


def chunk(rank, data, attempt=0, offset=None):
    c = job_pb2.LogChunk(rank=rank, data=data, attempt=attempt)
    if offset is not None:
        c.next.CopyFrom(job_pb2.LogPosition(attempt=attempt, rank=rank, offset=offset))
    return c


def test_a_log_stream_resumes_from_each_ranks_position_dropping_what_came_since():
    resume = LogResume(job_pb2.StreamLogsRequest(job_id="j-1", all_ranks=True, follow=True,
                                                 tail_lines=5))
    assert list(resume.request().resume) == []
    assert resume.take(chunk(0, b"a\nb\n", offset=40)) == b"a\nb\n"
    assert resume.take(chunk(1, b"x\n", offset=12)) == b"x\n"
    # A line longer than a read: pieces without a position.
    assert resume.take(chunk(0, b"long-1\n")) == b"long-1\n"
    again = resume.request()
    assert again.tail_lines == 5 and again.follow and again.job_id == "j-1"
    assert sorted((p.rank, p.offset) for p in again.resume) == [(0, 40), (1, 12)]
    # The new stream sends rank 0's pieces again from offset 40: dropped.
    assert resume.take(chunk(0, b"long-")) == b""
    assert resume.take(chunk(0, b"1\nlong-2\n", offset=90)) == b"long-2\n"
    assert resume.take(chunk(1, b"y\n", offset=14)) == b"y\n"
    # On to the next attempt: its positions only.
    assert resume.take(chunk(0, b"again\n", attempt=1, offset=6)) == b"again\n"
    assert [(p.attempt, p.rank, p.offset) for p in resume.request().resume] == [(1, 0, 6)]


def test_a_snapshot_is_new_only_with_a_higher_revision():
    seen = RevisionFilter()
    assert seen.new(job_pb2.Job(id="a-1", revision=5))
    assert not seen.new(job_pb2.Job(id="a-1", revision=5))
    assert not seen.new(job_pb2.Job(id="a-1", revision=3))
    assert seen.new(job_pb2.Job(id="b-2", revision=1)), "by job"
    assert seen.new(job_pb2.Job(id="a-1", revision=1 << 41))
