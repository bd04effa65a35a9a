// The HTTP/JSON API's routes: each REST path and verb maps to one method of
// JobService or ClusterService, as grpc-gateway's google.api.http rules
// would ("/api/v1/jobs/{job_id}:cancel" to CancelJob). A request's path
// parameters, query and body fill the method's request message; its
// response goes back in protobuf's canonical JSON mapping, and an error as
// a google.rpc.Status in JSON with the matching HTTP status.
#ifndef RINGMASTER_COORDINATOR_API_HTTP_ROUTES_H_
#define RINGMASTER_COORDINATOR_API_HTTP_ROUTES_H_

#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

struct HttpRoute {
  const char* verb;     // GET, POST, DELETE
  const char* pattern;  // "/api/v1/jobs/{job_id}:cancel"
  const char* method;   // its name in JobService or ClusterService: "CancelJob"
  // Which field the body fills: "" none, "*" the whole request (merged
  // with the path's), or one field ("spec", which takes YAML too).
  const char* body;
};

// Every route, unary methods and server streams (served as Server-Sent
// Events) alike.
const std::vector<HttpRoute>& HttpRoutes();

// The services whose methods the routes cover.
std::vector<const google::protobuf::ServiceDescriptor*> HttpServices();

struct MatchedRoute {
  const HttpRoute* route = nullptr;
  const google::protobuf::MethodDescriptor* method = nullptr;
  std::map<std::string, std::string> path;  // {job_id} -> its value
};

// The route for `verb` and `path` (without the query): NOT_FOUND when no
// pattern matches the path, UNIMPLEMENTED (405) when one does but not for
// this verb.
absl::StatusOr<MatchedRoute> MatchHttpRoute(absl::string_view verb, absl::string_view path);

// Fills `request` from the route's path parameters, the query string
// ("states=RUNNING&page_size=10"; a field by its proto or JSON name,
// `state` for `states`, repeated fields by repeating, maps as
// `labels.team=a`) and the body (JSON; YAML for a job spec). INVALID_ARGUMENT
// naming what is wrong.
absl::Status FillHttpRequest(const MatchedRoute& matched, absl::string_view query,
                             absl::string_view body, absl::string_view content_type,
                             google::protobuf::Message* request);

// The message in protobuf's canonical JSON mapping.
std::string ToJson(const google::protobuf::Message& message);

// The HTTP status grpc-gateway gives `code` (NOT_FOUND 404, PERMISSION_DENIED
// 403, ...).
int HttpStatusOf(absl::StatusCode code);

// {"code":5,"status":"NOT_FOUND","message":"..."}: google.rpc.Status's JSON
// with the code's name beside its number.
std::string ErrorJson(const absl::Status& status);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_HTTP_ROUTES_H_
