#include "coordinator/core/worker_membership.h"

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/core/fake_worker_link.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

class WorkerMembershipTest : public ::testing::Test {
 protected:
  WorkerMembershipTest() : membership_(&clock_, Options()) {}

  static MembershipOptions Options() {
    MembershipOptions o;
    o.heartbeat_interval = absl::Seconds(1);
    o.heartbeat_timeout = absl::Seconds(5);
    o.worker_grace = absl::Seconds(3);
    return o;
  }

  static v1::RegisterWorker Request(const std::string& id, const std::string& incarnation = "a") {
    v1::RegisterWorker r;
    r.set_worker_id(id);
    r.set_address(id + ".local:7080");
    r.set_slots(2);
    r.set_incarnation(incarnation);
    r.add_free_ports(41000);
    return r;
  }

  WorkerSession Join(FakeWorkerLink& link, const std::string& id,
                     const std::string& incarnation = "a") {
    auto session = membership_.Register(&link, Request(id, incarnation));
    EXPECT_OK(session) << session.status();
    membership_.Admit(*session);
    return *session;
  }

  v1::WorkerState State(const std::string& id) {
    for (const v1::Worker& w : membership_.List()) {
      if (w.id() == id) return w.state();
    }
    return v1::WORKER_STATE_UNSPECIFIED;
  }

  bool Beat(const WorkerSession& s, bool* revived = nullptr) {
    bool ignored;
    return membership_.Heartbeat(s, v1::Heartbeat(), revived ? revived : &ignored);
  }

  static v1::WorkerMessage Event(int64_t seq) {
    v1::WorkerMessage m;
    m.set_seq(seq);
    m.mutable_rank_exited()->mutable_rank()->set_job_id("j-1");
    return m;
  }

  FakeClock clock_;
  WorkerMembership membership_;
};

TEST_F(WorkerMembershipTest, BrokenStreamIsSuspectThenLostAfterTheGrace) {
  FakeWorkerLink link;
  Join(link, "w1");
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_ALIVE);
  membership_.Disconnect(&link);
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_SUSPECT);
  EXPECT_TRUE(membership_.Schedulable().empty()) << "a SUSPECT worker takes no ranks";
  clock_.Advance(absl::Milliseconds(2999));
  EXPECT_TRUE(membership_.Expire().empty());
  clock_.Advance(absl::Milliseconds(1));
  std::vector<LostWorker> lost = membership_.Expire();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "w1");
  EXPECT_EQ(lost[0].why, "its stream broke and it did not come back");
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_LOST);
  EXPECT_TRUE(membership_.Expire().empty()) << "reported once";
}

TEST_F(WorkerMembershipTest, SilentWorkerIsSuspectWhenLateAndLostAtTheTimeout) {
  FakeWorkerLink link;
  WorkerSession s = Join(link, "w1");
  clock_.Advance(absl::Seconds(2));
  membership_.Expire();
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_ALIVE) << "two intervals is not late yet";
  clock_.Advance(absl::Milliseconds(100));
  membership_.Expire();
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_SUSPECT);
  EXPECT_FALSE(membership_.Answering("w1")) << "suspect";
  EXPECT_TRUE(Beat(s));
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_ALIVE) << "a heartbeat clears the suspicion";
  EXPECT_TRUE(membership_.Answering("w1"));
  clock_.Advance(absl::Seconds(5));
  std::vector<LostWorker> lost = membership_.Expire();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].why, "no heartbeat for 5s");
  // Its stream is still open (a paused process), but it does not answer.
  EXPECT_TRUE(membership_.Connected("w1"));
  EXPECT_FALSE(membership_.Answering("w1"));
}

TEST_F(WorkerMembershipTest, LostWorkerThatHeartbeatsAgainIsTakenBack) {
  FakeWorkerLink link;
  WorkerSession s = Join(link, "w1");
  clock_.Advance(absl::Seconds(13));  // kill -STOP; sleep 13; kill -CONT
  ASSERT_EQ(membership_.Expire().size(), 1u);
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_LOST);
  bool revived = false;
  EXPECT_TRUE(Beat(s, &revived));
  EXPECT_TRUE(revived);
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_ALIVE);
  ASSERT_EQ(membership_.Schedulable().size(), 1u) << "its slots are back";
  EXPECT_TRUE(Beat(s, &revived));
  EXPECT_FALSE(revived) << "revived once";
}

TEST_F(WorkerMembershipTest, LostWorkerThatRegistersAgainIsTakenBack) {
  FakeWorkerLink first, second;
  Join(first, "w1");
  membership_.Disconnect(&first);
  clock_.Advance(absl::Seconds(3));
  membership_.Expire();
  ASSERT_EQ(State("w1"), v1::WORKER_STATE_LOST);
  WorkerSession s = Join(second, "w1");
  EXPECT_EQ(s.epoch, 2);
  EXPECT_FALSE(s.new_incarnation) << "same process, reconnected";
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_ALIVE);
}

TEST_F(WorkerMembershipTest, SecondRegistrationOfALiveIdIsRefused) {
  FakeWorkerLink real, impostor;
  WorkerSession s = Join(real, "w1");
  auto refused = membership_.Register(&impostor, Request("w1", "b"));
  ASSERT_THAT(refused.status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(refused.status().message(),
            "worker id \"w1\" is held by the worker at w1.local:7080 (session 1, its stream "
            "still open); give this worker another --id, or stop that one");
  EXPECT_TRUE(Beat(s)) << "the real worker keeps its session";
  v1::CoordinatorMessage start;
  start.mutable_start_rank()->mutable_rank()->set_job_id("j-1");
  EXPECT_TRUE(membership_.Send("w1", start));
  EXPECT_EQ(real.Take().size(), 1u);
  EXPECT_TRUE(impostor.Take().empty()) << "nothing reaches the refused stream";
  // Once the real worker's stream is gone, a takeover is allowed.
  membership_.Disconnect(&real);
  auto taken = membership_.Register(&impostor, Request("w1", "b"));
  ASSERT_OK(taken);
  EXPECT_EQ(taken->epoch, 2);
  EXPECT_TRUE(taken->new_incarnation);
}

TEST_F(WorkerMembershipTest, MessagesOfAnEndedSessionAreIgnored) {
  FakeWorkerLink first, second;
  WorkerSession old_session = Join(first, "w1");
  membership_.Disconnect(&first);
  WorkerSession s = Join(second, "w1");
  EXPECT_FALSE(Beat(old_session));
  EXPECT_EQ(membership_.AcceptEvent(old_session, Event(1)), EventVerdict::kStale);
  EXPECT_EQ(membership_.AcceptEvent(s, Event(1)), EventVerdict::kApply);
}

TEST_F(WorkerMembershipTest, EventsApplyOncePerIncarnation) {
  FakeWorkerLink first, second, third;
  WorkerSession s = Join(first, "w1", "a");
  EXPECT_EQ(membership_.AcceptEvent(s, Event(1)), EventVerdict::kApply);
  EXPECT_EQ(membership_.AcceptEvent(s, Event(2)), EventVerdict::kApply);
  EXPECT_EQ(membership_.AcceptEvent(s, Event(2)), EventVerdict::kDuplicate);
  // Reconnected, the same worker process replays what it holds.
  membership_.Disconnect(&first);
  s = Join(second, "w1", "a");
  EXPECT_EQ(membership_.AcceptEvent(s, Event(2)), EventVerdict::kDuplicate);
  EXPECT_EQ(membership_.AcceptEvent(s, Event(3)), EventVerdict::kApply);
  // A restarted worker numbers its events from 1 again.
  membership_.Disconnect(&second);
  s = Join(third, "w1", "b");
  EXPECT_TRUE(s.new_incarnation);
  EXPECT_EQ(membership_.AcceptEvent(s, Event(1)), EventVerdict::kApply);
}

TEST_F(WorkerMembershipTest, NotSchedulableUntilAdmitted) {
  FakeWorkerLink link;
  auto session = membership_.Register(&link, Request("w1"));
  ASSERT_OK(session);
  EXPECT_TRUE(membership_.Schedulable().empty()) << "being reconciled";
  membership_.Admit(*session);
  EXPECT_EQ(membership_.Schedulable().size(), 1u);
}

TEST_F(WorkerMembershipTest, ExpectedWorkerIsLostUnlessItRegistersInTime) {
  membership_.Expect("w1", "w1.local:7080");
  membership_.Expect("w2", "w2.local:7080");
  EXPECT_EQ(State("w1"), v1::WORKER_STATE_SUSPECT);
  FakeWorkerLink link;
  clock_.Advance(absl::Seconds(2));
  WorkerSession w2 = Join(link, "w2");
  clock_.Advance(absl::Seconds(2));
  EXPECT_TRUE(Beat(w2));
  clock_.Advance(absl::Seconds(1));
  std::vector<LostWorker> lost = membership_.Expire();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "w1");
  EXPECT_EQ(lost[0].why, "not registered since the coordinator started and it did not come back");
  EXPECT_EQ(State("w2"), v1::WORKER_STATE_ALIVE);
}

TEST_F(WorkerMembershipTest, ReportedRanksOccupySlotsUntilTheirExitIsApplied) {
  FakeWorkerLink link;
  WorkerSession s = Join(link, "w1");
  v1::Heartbeat beat;
  v1::RunningRank* r = beat.add_running();
  r->mutable_rank()->set_job_id("j-1");
  r->set_slot(1);
  bool revived;
  ASSERT_TRUE(membership_.Heartbeat(s, beat, &revived));
  const std::vector<SchedulableWorker> before = membership_.Schedulable();
  ASSERT_EQ(before[0].running->jobs.size(), 1u);
  EXPECT_EQ(before[0].running->jobs[0].job_id, "j-1");
  EXPECT_EQ(before[0].running->jobs[0].slots, std::vector<int>{1});
  EXPECT_EQ(membership_.Schedulable()[0].running, before[0].running)
      << "snapshots share the list of one report";
  EXPECT_EQ(membership_.AcceptEvent(s, Event(1)), EventVerdict::kApply);
  EXPECT_TRUE(membership_.Schedulable()[0].running->jobs.empty());
  EXPECT_EQ(before[0].running->jobs.size(), 1u) << "a snapshot keeps what it saw";
}

TEST(WorkerTopologyTest, AWorkersDomainsComeFromItsLabelsAndHostname) {
  FakeClock clock;
  MembershipOptions options;
  options.topology_levels = {"block", "rack", "host"};
  WorkerMembership membership(&clock, options);
  auto join = [&](FakeWorkerLink& link, const std::string& id, const std::string& hostname,
                  std::map<std::string, std::string> labels) {
    v1::RegisterWorker r;
    r.set_worker_id(id);
    r.set_address(id + ":7080");
    r.set_hostname(hostname);
    r.set_slots(1);
    for (const auto& [k, v] : labels) (*r.mutable_labels())[k] = v;
    auto session = membership.Register(&link, r);
    ASSERT_OK(session);
    membership.Admit(*session);
  };
  FakeWorkerLink a, b, c, d;
  join(a, "a", "node-a", {{"block", "b1"}, {"rack", "r1"}});
  join(b, "b", "node-b", {{"block", "b1"}, {"rack", "r1"}, {"host", "box-1"}});
  join(c, "c", "node-c", {{"block", "b2"}, {"rack", "r1"}});  // another block's r1
  join(d, "d", "node-d", {});
  std::map<std::string, TopologyDomains> domains;
  for (const SchedulableWorker& w : membership.Schedulable()) domains[w.worker_id] = w.domains;
  EXPECT_EQ(domains["a"][0], domains["b"][0]);
  EXPECT_EQ(domains["a"][1], domains["b"][1]) << "one rack";
  EXPECT_NE(domains["a"][2], domains["b"][2]) << "two hosts";
  EXPECT_NE(domains["a"][1], domains["c"][1]) << "r1 of block b2 is another rack";
  EXPECT_EQ(domains["d"][0], -1);
  EXPECT_EQ(domains["d"][1], -1);
  EXPECT_GE(domains["d"][2], 0) << "its hostname is its host";
  EXPECT_EQ(membership.Domain(domains["c"][1]), (std::pair<int, std::string>{1, "b2/r1"}));
  for (const SchedulableWorker& w : membership.Schedulable()) {
    if (w.worker_id == "d") {
      EXPECT_EQ(w.labels.at("host"), "node-d") << "a selector may name its host";
    }
  }
  EXPECT_EQ(membership.Domain(domains["b"][2]), (std::pair<int, std::string>{2, "b1/r1/box-1"}));
  for (const v1::Worker& w : membership.List()) {
    if (w.id() == "b") {
      EXPECT_EQ(w.topology().at("host"), "box-1");
      EXPECT_EQ(w.topology().at("rack"), "r1");
    }
    if (w.id() == "d") {
      EXPECT_EQ(w.topology().size(), 1u);
      EXPECT_EQ(w.topology().at("host"), "node-d");
    }
  }
}

TEST(WorkerTopologyTest, AGpuWorkersTypeIsALabel) {
  FakeClock clock;
  WorkerMembership membership(&clock, MembershipOptions());
  FakeWorkerLink link, other;
  v1::RegisterWorker r;
  r.set_worker_id("gpu");
  r.set_slots(1);
  r.add_gpus()->set_name("NVIDIA H100 80GB HBM3");
  ASSERT_OK(membership.Register(&link, r));
  r.set_worker_id("labelled");
  (*r.mutable_labels())["gpu_type"] = "h100";  // the operator's own wins
  ASSERT_OK(membership.Register(&other, r));
  for (const v1::Worker& w : membership.List()) {
    EXPECT_EQ(w.labels().at("gpu_type"), w.id() == "gpu" ? "NVIDIA-H100-80GB-HBM3" : "h100");
  }
}

}  // namespace
}  // namespace ringmaster
