#include "coordinator/api/http_routes.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "coordinator/api/openapi.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

// A method without a route cannot be called over HTTP: this fails when one
// is added to the services and not to the routes. A client stream
// (UploadCode) has none: `ringmaster submit` uploads code over gRPC.
TEST(HttpRoutesTest, EveryMethodButClientStreamsHasARoute) {
  for (const auto* service : HttpServices()) {
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      int routes = 0;
      for (const HttpRoute& route : HttpRoutes()) routes += method->name() == route.method;
      if (method->client_streaming()) {
        EXPECT_EQ(routes, 0) << method->full_name();
      } else {
        EXPECT_GE(routes, 1) << method->full_name() << " has no HTTP route";
      }
    }
  }
  for (const HttpRoute& route : HttpRoutes()) {
    absl::StatusOr<MatchedRoute> matched = MatchHttpRoute(
        route.verb,
        absl::StrReplaceAll(route.pattern,
                            {{"{job_id}", "j-1"}, {"{worker_id}", "w1"}, {"{sha256}", "ab"}}));
    ASSERT_OK(matched) << route.pattern;
    ASSERT_NE(matched->method, nullptr) << route.method << " is not a method of the services";
    EXPECT_EQ(matched->method->name(), route.method);
  }
}

TEST(HttpRoutesTest, PathsAndVerbsPickTheMethodAndItsParameters) {
  absl::StatusOr<MatchedRoute> get = MatchHttpRoute("GET", "/api/v1/jobs/train-7");
  ASSERT_OK(get);
  EXPECT_EQ(get->method->name(), "GetJob");
  EXPECT_EQ(get->path.at("job_id"), "train-7");
  absl::StatusOr<MatchedRoute> cancel = MatchHttpRoute("POST", "/api/v1/jobs/train-7:cancel");
  ASSERT_OK(cancel);
  EXPECT_EQ(cancel->method->name(), "CancelJob");
  EXPECT_EQ(cancel->path.at("job_id"), "train-7");
  absl::StatusOr<MatchedRoute> cordon = MatchHttpRoute("POST", "/api/v1/workers/gpu%2D3:cordon");
  ASSERT_OK(cordon);
  EXPECT_EQ(cordon->path.at("worker_id"), "gpu-3") << "percent-escapes decoded";
  absl::StatusOr<MatchedRoute> logs = MatchHttpRoute("GET", "/api/v1/jobs/train-7/logs");
  ASSERT_OK(logs);
  EXPECT_EQ(logs->method->name(), "StreamLogs");

  EXPECT_EQ(MatchHttpRoute("GET", "/api/v1/jobs/train-7:cancel").status().code(),
            absl::StatusCode::kUnimplemented)
      << "a path of the API, not with this verb";
  EXPECT_EQ(MatchHttpRoute("PUT", "/api/v1/jobs").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(MatchHttpRoute("GET", "/api/v1/jobs/train-7:explode").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MatchHttpRoute("GET", "/api/v2/jobs").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MatchHttpRoute("GET", "/api/v1/jobs/").status().code(), absl::StatusCode::kNotFound);
}

TEST(HttpRoutesTest, TheQueryFillsFieldsRepeatedFieldsAndMaps) {
  absl::StatusOr<MatchedRoute> list = MatchHttpRoute("GET", "/api/v1/jobs");
  ASSERT_OK(list);
  v1::ListJobsRequest request;
  ASSERT_OK(FillHttpRequest(*list,
                            "state=RUNNING&states=PENDING&pageSize=5&page_token=abc%3D&"
                            "labels.team=vision+2&name_prefix=",
                            "", "", &request));
  ASSERT_EQ(request.states_size(), 2);
  EXPECT_EQ(request.states(0), v1::RUNNING);
  EXPECT_EQ(request.states(1), v1::PENDING);
  EXPECT_EQ(request.page_size(), 5);
  EXPECT_EQ(request.page_token(), "abc=");
  EXPECT_EQ(request.labels().at("team"), "vision 2");

  v1::ListJobsRequest bad;
  EXPECT_THAT(std::string(FillHttpRequest(*list, "state=SLEEPING", "", "", &bad).message()),
              HasSubstr("query parameter states=\"SLEEPING\": expected a value of JobState"));
  EXPECT_THAT(std::string(FillHttpRequest(*list, "colour=red", "", "", &bad).message()),
              HasSubstr("query parameter \"colour\" is not a field of ListJobsRequest"));
  EXPECT_THAT(std::string(FillHttpRequest(*list, "page_size=many", "", "", &bad).message()),
              HasSubstr("expected an integer"));
  EXPECT_THAT(std::string(FillHttpRequest(*list, "labels=x", "", "", &bad).message()),
              HasSubstr("give it as labels.KEY=VALUE"));
  EXPECT_THAT(std::string(FillHttpRequest(*list, "page_token=%zz", "", "", &bad).message()),
              HasSubstr("bad percent-escape"));
}

TEST(HttpRoutesTest, ASubmittedSpecIsJsonOrYamlAndThePathWins) {
  absl::StatusOr<MatchedRoute> submit = MatchHttpRoute("POST", "/api/v1/jobs");
  ASSERT_OK(submit);
  v1::SubmitJobRequest json;
  ASSERT_OK(FillHttpRequest(*submit, "requestId=r1",
                            R"({"name": "train", "ranks": 2, "command": ["true"]})",
                            "application/json", &json));
  EXPECT_EQ(json.spec().name(), "train");
  EXPECT_EQ(json.spec().ranks(), 2);
  EXPECT_EQ(json.request_id(), "r1");
  v1::SubmitJobRequest yaml;
  ASSERT_OK(FillHttpRequest(*submit, "", "name: train\nranks: 3\ncommand: [\"true\"]\n",
                            "application/yaml", &yaml));
  EXPECT_EQ(yaml.spec().ranks(), 3);
  v1::SubmitJobRequest wrong;
  EXPECT_THAT(std::string(FillHttpRequest(*submit, "", R"({"name": "x", "rank": 2})",
                                          "application/json", &wrong)
                              .message()),
              HasSubstr("the body is not a JobSpec in JSON"));

  absl::StatusOr<MatchedRoute> cordon = MatchHttpRoute("POST", "/api/v1/workers/w1:cordon");
  ASSERT_OK(cordon);
  v1::CordonWorkerRequest request;
  ASSERT_OK(
      FillHttpRequest(*cordon, "", R"({"workerId": "w9", "reason": "new NIC"})", "", &request));
  EXPECT_EQ(request.worker_id(), "w1");
  EXPECT_EQ(request.reason(), "new NIC");
}

TEST(HttpRoutesTest, ErrorsCarryTheirCodeAndTheMatchingHttpStatus) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(ErrorJson(absl::NotFoundError("no job \"a\"\n\x01")),
            R"({"code":5,"status":"NOT_FOUND","message":"no job \"a\"\n\u0001"})");
}

// The OpenAPI document has every route, with its method's reply and the
// schemas it refers to.
TEST(HttpRoutesTest, TheOpenApiDocumentHasEveryRouteAndItsSchemas) {
  google::protobuf::Struct document;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(OpenApiDocument(), &document).ok());
  const auto& paths = document.fields().at("paths").struct_value().fields();
  const auto& schemas =
      document.fields().at("components").struct_value().fields().at("schemas").struct_value();
  for (const HttpRoute& route : HttpRoutes()) {
    ASSERT_EQ(paths.count(route.pattern), 1u) << route.pattern;
    std::string verb = route.verb;
    for (char& c : verb) c = static_cast<char>(std::tolower(c));
    const auto& operations = paths.at(route.pattern).struct_value().fields();
    ASSERT_EQ(operations.count(verb), 1u) << route.verb << " " << route.pattern;
    const auto& op = operations.at(verb).struct_value().fields();
    EXPECT_THAT(op.at("operationId").string_value(), ::testing::EndsWith(route.method));
  }
  const auto& cancel = paths.at("/api/v1/jobs/{job_id}:cancel").struct_value().fields();
  const auto& parameter =
      cancel.at("post").struct_value().fields().at("parameters").list_value().values(0);
  EXPECT_EQ(parameter.struct_value().fields().at("in").string_value(), "path");
  const auto& job = schemas.fields().at("ringmaster.v1.Job").struct_value().fields();
  const auto& state = job.at("properties").struct_value().fields().at("state");
  EXPECT_EQ(state.struct_value().fields().at("type").string_value(), "string");
  EXPECT_EQ(schemas.fields().count("ringmaster.v1.JobSpec"), 1u) << "reached through Job";
  const auto& list = paths.at("/api/v1/jobs").struct_value().fields().at("get").struct_value();
  std::vector<std::string> query;
  for (const auto& p : list.fields().at("parameters").list_value().values()) {
    query.push_back(p.struct_value().fields().at("name").string_value());
  }
  EXPECT_THAT(query, ::testing::Contains("states"));
  EXPECT_THAT(query, ::testing::Contains("pageToken"));
}

}  // namespace
}  // namespace ringmaster
