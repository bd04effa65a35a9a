#include "common/parse_errors.h"

#include <gtest/gtest.h>

#include "proto/job.pb.h"

namespace ringmaster {
namespace {

TEST(RequestMessageOfTest, NamesTheRequestOfAGeneratedMethod) {
  v1::GetJobRequest linked;  // the generated descriptors are in the pool
  EXPECT_EQ(RequestMessageOf("/ringmaster.v1.JobService/GetJob"), "GetJobRequest");
  EXPECT_EQ(RequestMessageOf("/ringmaster.v1.JobService/SubmitJob"), "SubmitJobRequest");
  EXPECT_EQ(RequestMessageOf("/ringmaster.v1.JobService/NoSuchMethod"), "");
  EXPECT_EQ(RequestMessageOf("/no.Such/Method"), "");
  EXPECT_EQ(RequestMessageOf("GetJob"), "");
  EXPECT_EQ(RequestMessageOf(""), "");
}

}  // namespace
}  // namespace ringmaster
