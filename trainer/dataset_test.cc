#include "trainer/dataset.h"

#include <cstdlib>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "trainer/sampler.h"

namespace ringmaster {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = testing::MakeTempDir("dataset") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DatasetTest, ReadsCsvWithHeaderAndLabelColumn) {
  auto d = LoadCsv(WriteTemp("a.csv", "label,f1,f2\n1,0.5,2\n0,1.5,-1\n2,3,4\n"), 0);
  ASSERT_OK(d) << d.status();
  EXPECT_EQ(d->rows, 3);
  EXPECT_EQ(d->features, 2);
  EXPECT_EQ(d->classes, 3);
  EXPECT_EQ(d->y, (std::vector<int32_t>{1, 0, 2}));
  EXPECT_FLOAT_EQ(d->x[2], 1.5f);
}

TEST(DatasetTest, ErrorsNameFileLineAndColumn) {
  auto bad = LoadCsv(WriteTemp("b.csv", "1,2,0\n3,x,1\n"), -1);
  ASSERT_THAT(bad, IsError());
  EXPECT_NE(bad.status().message().find("b.csv:2: column 2 is not a number"), std::string::npos)
      << bad.status();
  auto ragged = LoadCsv(WriteTemp("c.csv", "1,2,0\n3,1\n"), -1);
  EXPECT_NE(ragged.status().message().find("c.csv:2: 2 columns, expected 3"), std::string::npos)
      << ragged.status();
  auto label = LoadCsv(WriteTemp("d.csv", "1,2,0.5\n"), -1);
  EXPECT_NE(label.status().message().find("is not a class index"), std::string::npos);
  EXPECT_THAT(LoadCsv("/nonexistent.csv", 0).status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(DatasetTest, DigitsIsTheRealDataSet) {
  auto d = LoadCsv(DigitsPath(), -1);
  if (!d.ok()) GTEST_SKIP() << "python3-sklearn not installed: " << d.status();
  EXPECT_EQ(d->rows, 1797);
  EXPECT_EQ(d->features, 64);
  EXPECT_EQ(d->classes, 10);
}

TEST(DatasetTest, SyntheticIsDeterministic) {
  auto a = MakeSynthetic("synthetic:rows=100,features=8,classes=3");
  auto b = MakeSynthetic("synthetic:rows=100,features=8,classes=3");
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(a->x, b->x);
  EXPECT_EQ(a->y, b->y);
  EXPECT_THAT(MakeSynthetic("synthetic:rows=10,colour=3"), IsError());
}

TEST(DatasetTest, SplitStandardizesWithTrainingStatistics) {
  auto d = MakeSynthetic("synthetic:rows=1000,features=4,classes=2");
  ASSERT_OK(d);
  TrainTestSplit s = SplitAndStandardize(*d, 0.25, 7);
  EXPECT_EQ(s.test.rows, 250);
  EXPECT_EQ(s.train.rows, 750);
  for (int f = 0; f < 4; ++f) {
    double sum = 0, sq = 0;
    for (int64_t r = 0; r < s.train.rows; ++r) {
      sum += s.train.x[r * 4 + f];
      sq += s.train.x[r * 4 + f] * s.train.x[r * 4 + f];
    }
    EXPECT_NEAR(sum / s.train.rows, 0, 1e-4);
    EXPECT_NEAR(sq / s.train.rows, 1, 1e-3);
  }
}

TEST(SamplerTest, DistributedSamplerSemantics) {
  const int64_t rows = 103;
  const int world = 4;
  std::set<int64_t> seen;
  for (int rank = 0; rank < world; ++rank) {
    DistributedSampler s(rows, rank, world, 5);
    auto idx = s.Indices(0);
    EXPECT_EQ(idx.size(), 25u) << "drop_last: every rank gets the same count";
    for (int64_t i : idx) EXPECT_TRUE(seen.insert(i).second) << i << " on two ranks";
    EXPECT_EQ(s.Indices(0), idx) << "the same epoch gives the same order";
    EXPECT_NE(s.Indices(1), idx) << "each epoch reshuffles";
  }
  EXPECT_EQ(seen.size(), 100u);
}

// World 2 with batch B sees, batch for batch, the rows world 1 sees with
// batch 2B.
TEST(SamplerTest, TwoRanksCoverWhatOneRankSeesWithDoubleBatch) {
  const int64_t rows = 64;
  const int b = 4;
  DistributedSampler one(rows, 0, 1, 3);
  DistributedSampler r0(rows, 0, 2, 3), r1(rows, 1, 2, 3);
  auto all = one.Indices(2), i0 = r0.Indices(2), i1 = r1.Indices(2);
  for (int k = 0; k < rows / (2 * b); ++k) {
    std::multiset<int64_t> big(all.begin() + 2 * b * k, all.begin() + 2 * b * (k + 1));
    std::multiset<int64_t> pair(i0.begin() + b * k, i0.begin() + b * (k + 1));
    pair.insert(i1.begin() + b * k, i1.begin() + b * (k + 1));
    EXPECT_EQ(big, pair) << "batch " << k;
  }
}

// A world of 3 that consumed the first 30 rows of an epoch, resumed as a
// world of 2, sees every other row of that epoch once.
TEST(SamplerTest, ResumingAtAnotherWorldSizeSeesTheRestOfTheEpochOnce) {
  const int64_t rows = 100;
  const int64_t consumed = 30;
  std::multiset<int64_t> before;
  for (int rank = 0; rank < 3; ++rank) {
    auto idx = DistributedSampler(rows, rank, 3, 9).Indices(4);
    before.insert(idx.begin(), idx.begin() + consumed / 3);
  }
  std::multiset<int64_t> after;
  for (int rank = 0; rank < 2; ++rank) {
    DistributedSampler s(rows, rank, 2, 9);
    auto idx = s.Indices(4, consumed);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), s.rows_per_rank(consumed));
    after.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(before.size(), 30u);
  EXPECT_EQ(after.size(), 70u);
  for (int64_t row : after) EXPECT_EQ(before.count(row), 0u) << row << " seen twice";
  std::set<int64_t> all(before.begin(), before.end());
  all.insert(after.begin(), after.end());
  EXPECT_EQ(all.size(), 100u) << "every row of the epoch once";
}

// At the same world size, a start that is a whole number of batches gives
// each rank the rows it had left.
TEST(SamplerTest, ResumingAtTheSameSizeKeepsEachRanksRows) {
  for (int rank = 0; rank < 2; ++rank) {
    DistributedSampler s(64, rank, 2, 1);
    auto whole = s.Indices(0);
    auto rest = s.Indices(0, 2 * 8);
    EXPECT_EQ(rest, std::vector<int64_t>(whole.begin() + 8, whole.end())) << "rank " << rank;
  }
}

}  // namespace
}  // namespace ringmaster
