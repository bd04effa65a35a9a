#include "coordinator/api/coordinator_metrics.h"

#include <gtest/gtest.h>

#include "common/fake_clock.h"

namespace ringmaster {
namespace {

v1::StateChange Change(v1::JobState state, v1::Reason reason, int64_t ms) {
  v1::StateChange c;
  c.set_state(state);
  c.set_reason(reason);
  c.set_time_unix_ms(ms);
  return c;
}

TEST(CoordinatorMetricsTest, GaugesRestartsAndQueueWait) {
  metrics::Registry registry;
  CoordinatorMetrics m(&registry);
  v1::Job running;
  running.set_id("a-1");
  running.set_state(v1::RUNNING);
  v1::Job pending = running;
  pending.set_id("b-2");
  pending.set_state(v1::PENDING);
  v1::Worker w;
  w.set_id("w1");
  w.set_state(v1::WORKER_STATE_ALIVE);
  w.set_heartbeat_age_seconds(1.5);
  m.SetSources(
      [&] {
        return std::map<v1::JobState, int>{{running.state(), 1}, {pending.state(), 1}};
      },
      [&] {
        v1::Worker cordoned;
        cordoned.set_id("w2");
        cordoned.mutable_health()->mutable_cordon()->set_reason("new NIC");
        return std::vector<v1::Worker>{w, cordoned};
      });

  m.OnTransition(running, Change(v1::RESTARTING, v1::RANK_EXITED, 0));
  // A rank started again alone: a note of the running job, a restart all
  // the same; other notes are not.
  m.OnTransition(running, Change(v1::RUNNING, v1::RANK_REPLACED, 0));
  m.OnTransition(running, Change(v1::RUNNING, v1::RESUMED, 0));
  v1::Job queued = pending;
  *queued.add_history() = Change(v1::PENDING, v1::SUBMITTED, 1000);
  m.OnTransition(queued, Change(v1::STARTING, v1::SCHEDULED, 3500));

  const std::string text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_jobs{state=\"RUNNING\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ringmaster_jobs{state=\"PENDING\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_jobs{state=\"FAILED\"} 0\n"), std::string::npos)
      << "every state has a series, so dashboards see zeros";
  EXPECT_NE(text.find("ringmaster_workers{state=\"ALIVE\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_worker_heartbeat_age_seconds{worker=\"w1\"} 1.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringmaster_worker_cordoned{worker=\"w1\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_worker_cordoned{worker=\"w2\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringmaster_job_restarts_total{job_id=\"a-1\",reason=\"RANK_EXITED\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringmaster_job_restarts_total{job_id=\"a-1\",reason=\"RANK_REPLACED\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("reason=\"RESUMED\""), std::string::npos) << text;
  EXPECT_NE(text.find("ringmaster_job_queue_wait_seconds_sum 2.5\n"), std::string::npos) << text;
}

TEST(CoordinatorMetricsTest, EndedJobsAndForgottenWorkersLeave) {
  metrics::Registry registry;
  FakeClock clock;
  CoordinatorMetrics m(&registry, &clock, absl::Minutes(10));
  std::vector<v1::Worker> workers(2);
  workers[0].set_id("w1");
  workers[1].set_id("w2");
  m.SetSources([] { return std::map<v1::JobState, int>{}; }, [&] { return workers; });
  v1::Job a, b;
  a.set_id("a-1");
  b.set_id("b-2");
  m.OnTransition(a, Change(v1::RESTARTING, v1::RANK_EXITED, 0));
  m.OnTransition(b, Change(v1::RESTARTING, v1::WORKER_LOST, 0));
  m.OnTransition(a, Change(v1::FAILED, v1::RANK_EXITED, 0));
  const std::string a_series = "ringmaster_job_restarts_total{job_id=\"a-1\"";
  const std::string b_series = "ringmaster_job_restarts_total{job_id=\"b-2\"";
  EXPECT_NE(registry.Serialize().find("heartbeat_age_seconds{worker=\"w2\"}"), std::string::npos);
  workers.pop_back();
  clock.Advance(absl::Minutes(10) - absl::Seconds(1));
  std::string text = registry.Serialize();
  EXPECT_NE(text.find(a_series), std::string::npos) << text;
  EXPECT_EQ(text.find("heartbeat_age_seconds{worker=\"w2\"}"), std::string::npos) << text;
  EXPECT_EQ(text.find("ringmaster_worker_cordoned{worker=\"w2\"}"), std::string::npos) << text;
  clock.Advance(absl::Seconds(1));
  text = registry.Serialize();
  EXPECT_EQ(text.find(a_series), std::string::npos) << text;
  EXPECT_NE(text.find(b_series), std::string::npos) << "b has not ended";
  EXPECT_NE(text.find("heartbeat_age_seconds{worker=\"w1\"}"), std::string::npos);
}

// A hang is counted once for the attempt it ends, whether the job
// restarts or fails; a hang the job ends with is a hang too, with no
// restart counted.
TEST(CoordinatorMetricsTest, HangsCountedWhenTheyEndAnAttempt) {
  metrics::Registry registry;
  CoordinatorMetrics m(&registry);
  v1::Job running;
  running.set_id("a-1");
  running.set_state(v1::RUNNING);
  m.OnTransition(running, Change(v1::RESTARTING, v1::RANK_HUNG, 0));
  v1::Job restarting = running;
  restarting.set_state(v1::RESTARTING);
  m.OnTransition(restarting, Change(v1::PENDING, v1::RANK_HUNG, 0));
  m.OnTransition(running, Change(v1::FAILED, v1::RANK_HUNG, 0));
  v1::Job other = running;
  other.set_id("b-2");
  m.OnTransition(other, Change(v1::FAILED, v1::RANK_HUNG, 0));
  const std::string text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_rank_hangs_total{job_id=\"a-1\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ringmaster_rank_hangs_total{job_id=\"b-2\"} 1\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("ringmaster_job_restarts_total{job_id=\"b-2\""), std::string::npos)
      << "b failed without restarting: " << text;
}

TEST(CoordinatorMetricsTest, EachJobsGoodputAndLostTimeByCause) {
  metrics::Registry registry;
  FakeClock clock;
  CoordinatorMetrics m(&registry, &clock, absl::Minutes(10));
  v1::Goodput g;
  g.set_ratio(0.9);
  (*g.mutable_lost_seconds())["restart"] = 2.5;
  (*g.mutable_lost_seconds())["startup"] = 1;
  std::vector<std::pair<std::string, v1::Goodput>> jobs = {{"a-1", g}};
  m.SetSources([] { return std::map<v1::JobState, int>{}; },
               [] { return std::vector<v1::Worker>{}; });
  m.SetGoodputSource([&] { return jobs; });
  std::string text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_job_goodput_ratio{job_id=\"a-1\"} 0.9\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ringmaster_job_lost_seconds_total{cause=\"restart\",job_id=\"a-1\"} 2.5\n"),
            std::string::npos)
      << text;
  (*jobs[0].second.mutable_lost_seconds())["restart"] = 4;  // another restart
  text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_job_lost_seconds_total{cause=\"restart\",job_id=\"a-1\"} 4\n"),
            std::string::npos)
      << text;
  // Retired: its series stay for the retention, then leave.
  jobs.clear();
  registry.Serialize();
  clock.Advance(absl::Minutes(10) - absl::Seconds(1));
  EXPECT_NE(registry.Serialize().find("ringmaster_job_goodput_ratio{job_id=\"a-1\"}"),
            std::string::npos);
  clock.Advance(absl::Seconds(1));
  text = registry.Serialize();
  EXPECT_EQ(text.find("job_id=\"a-1\""), std::string::npos) << text;
}

}  // namespace
TEST(CoordinatorMetricsTest, FreeSlotsPerDomainAndThoseOfPartlyUsedDomains) {
  metrics::Registry registry;
  CoordinatorMetrics m(&registry);
  std::vector<DomainGauge> domains = {{"rack", "r1", 16, 16},
                                      {"rack", "r2", 16, 5},
                                      {"rack", "r3", 16, 0},
                                      {"host", "r2/h1", 8, 5}};
  m.SetSources([] { return std::map<v1::JobState, int>{}; },
               [] { return std::vector<v1::Worker>{}; });
  m.SetDomainSource([&] { return domains; });
  std::string text = registry.Serialize();
  EXPECT_NE(text.find("ringmaster_domain_free_slots{domain=\"r2\",level=\"rack\"} 5\n"),
            std::string::npos)
      << text;
  // r1 is whole and r3 full: only r2's free slots are fragmented.
  EXPECT_NE(text.find("ringmaster_domain_fragmented_free_slots{level=\"rack\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringmaster_domain_fragmented_free_slots{level=\"host\"} 5\n"),
            std::string::npos)
      << text;
  domains.pop_back();  // its worker left
  text = registry.Serialize();
  EXPECT_EQ(text.find("domain=\"r2/h1\""), std::string::npos) << text;
  EXPECT_EQ(text.find("ringmaster_domain_fragmented_free_slots{level=\"host\"}"), std::string::npos)
      << "no host is left: " << text;
}

}  // namespace ringmaster
