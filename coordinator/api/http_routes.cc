#include "coordinator/api/http_routes.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "domain/job_spec_yaml.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {
namespace {

namespace pb = google::protobuf;

// "%2F" and, in a query, "+" decoded.
absl::StatusOr<std::string> Unescape(absl::string_view text, bool query) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && query) {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      int value = 0;
      if (i + 2 >= text.size() || !absl::ascii_isxdigit(text[i + 1]) ||
          !absl::ascii_isxdigit(text[i + 2])) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad percent-escape in \"", std::string(text), "\""));
      }
      for (int k = 1; k <= 2; ++k) {
        const char h = absl::ascii_tolower(text[i + k]);
        value = value * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
      }
      out.push_back(static_cast<char>(value));
      i += 2;
    }
  }
  return out;
}

// Matches one pattern segment ("jobs", "{job_id}", "{job_id}:cancel").
bool MatchSegment(absl::string_view pattern, absl::string_view segment,
                  std::map<std::string, std::string>* path) {
  if (pattern.empty() || pattern[0] != '{') return pattern == segment;
  const size_t close = pattern.find('}');
  const absl::string_view name = pattern.substr(1, close - 1);
  const absl::string_view verb = pattern.substr(close + 1);  // ":cancel" or ""
  absl::string_view value = segment;
  if (!verb.empty()) {
    if (!absl::ConsumeSuffix(&value, verb)) return false;
  } else if (absl::StrContains(value, ':')) {
    return false;  // a custom verb no route of this pattern has
  }
  absl::StatusOr<std::string> decoded = Unescape(value, false);
  if (value.empty() || !decoded.ok()) return false;
  (*path)[std::string(name)] = *std::move(decoded);
  return true;
}

bool MatchPattern(absl::string_view pattern, absl::string_view path,
                  std::map<std::string, std::string>* params) {
  const std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  const std::vector<absl::string_view> got = absl::StrSplit(path, '/');
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!MatchSegment(want[i], got[i], params)) return false;
  }
  return true;
}

absl::Status Bad(const pb::FieldDescriptor* field, absl::string_view value,
                 absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("query parameter ", field->name(), "=\"",
                                                 std::string(value), "\": expected ", want));
}

// Sets (or, repeated, adds) the scalar `field` of `message` from `value`.
absl::Status SetScalar(pb::Message* message, const pb::FieldDescriptor* field,
                       absl::string_view value) {
  const pb::Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  const std::string text(value);
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      repeated ? r->AddString(message, field, text) : r->SetString(message, field, text);
      return absl::OkStatus();
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool b = false;
      if (!absl::SimpleAtob(value, &b)) return Bad(field, value, "true or false");
      repeated ? r->AddBool(message, field, b) : r->SetBool(message, field, b);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t n = 0;
      if (!absl::SimpleAtoi(value, &n)) return Bad(field, value, "an integer");
      repeated ? r->AddInt32(message, field, n) : r->SetInt32(message, field, n);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(value, &n)) return Bad(field, value, "an integer");
      repeated ? r->AddInt64(message, field, n) : r->SetInt64(message, field, n);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* e = field->enum_type()->FindValueByName(text);
      if (e == nullptr) {
        return Bad(field, value, absl::StrCat("a value of ", field->enum_type()->name()));
      }
      repeated ? r->AddEnum(message, field, e) : r->SetEnum(message, field, e);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("query parameter ", field->name(), " cannot be given in a query"));
  }
}

const pb::FieldDescriptor* FieldNamed(const pb::Descriptor* d, const std::string& name) {
  if (const pb::FieldDescriptor* f = d->FindFieldByName(name)) return f;
  if (const pb::FieldDescriptor* f = d->FindFieldByCamelcaseName(name)) return f;
  // ?state=RUNNING for ListJobsRequest.states, as its CLI flag says it.
  if (const pb::FieldDescriptor* f = d->FindFieldByName(name + "s"); f && f->is_repeated()) {
    return f;
  }
  return nullptr;
}

// One query parameter: a field, or a map's entry ("labels.team").
absl::Status SetQueryParameter(pb::Message* message, const std::string& key,
                               const std::string& value) {
  const pb::Descriptor* d = message->GetDescriptor();
  const size_t dot = key.find('.');
  const pb::FieldDescriptor* field = FieldNamed(d, key.substr(0, dot));
  if (field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter \"", key, "\" is not a field of ", d->name()));
  }
  if (field->is_map()) {
    if (dot == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("query parameter ", field->name(),
                                                     " is a map: give it as ", field->name(),
                                                     ".KEY=VALUE"));
    }
    pb::Message* entry = message->GetReflection()->AddMessage(message, field);
    RETURN_IF_ERROR(SetScalar(entry, entry->GetDescriptor()->map_key(), key.substr(dot + 1)));
    return SetScalar(entry, entry->GetDescriptor()->map_value(), value);
  }
  if (dot != std::string::npos || field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter \"", key, "\" cannot be given in a query"));
  }
  return SetScalar(message, field, value);
}

absl::Status FromJson(absl::string_view body, pb::Message* message) {
  pb::util::JsonParseOptions options;
  const auto status = pb::util::JsonStringToMessage(std::string(body), message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the body is not a ",
                                                   message->GetDescriptor()->name(),
                                                   " in JSON: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

// The body into the route's field: a job spec may be YAML, as a spec file.
absl::Status FillBody(const MatchedRoute& matched, absl::string_view body,
                      absl::string_view content_type, pb::Message* request) {
  const absl::string_view field_name = matched.route->body;
  if (field_name.empty() || absl::StripAsciiWhitespace(body).empty()) return absl::OkStatus();
  if (field_name == "*") return FromJson(body, request);
  const pb::FieldDescriptor* field =
      request->GetDescriptor()->FindFieldByName(std::string(field_name));
  pb::Message* target = request->GetReflection()->MutableMessage(request, field);
  const bool json = absl::StrContains(content_type, "json") ||
                    absl::StartsWith(absl::StripLeadingAsciiWhitespace(body), "{");
  if (json || target->GetDescriptor() != v1::JobSpec::descriptor()) return FromJson(body, target);
  ASSIGN_OR_RETURN(v1::JobSpec spec, ParseJobSpecYaml(std::string(body)));
  target->CopyFrom(spec);
  return absl::OkStatus();
}

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

const std::vector<HttpRoute>& HttpRoutes() {
  static const auto* routes = new std::vector<HttpRoute>{
      {"GET", "/api/v1/jobs", "ListJobs", ""},
      {"POST", "/api/v1/jobs", "SubmitJob", "spec"},
      {"GET", "/api/v1/jobs:watch", "WatchJobs", ""},
      {"GET", "/api/v1/jobs/{job_id}", "GetJob", ""},
      {"DELETE", "/api/v1/jobs/{job_id}", "DeleteJob", ""},
      {"POST", "/api/v1/jobs/{job_id}:cancel", "CancelJob", ""},
      {"POST", "/api/v1/jobs/{job_id}:hold", "HoldJob", ""},
      {"POST", "/api/v1/jobs/{job_id}:release", "ReleaseJob", ""},
      {"POST", "/api/v1/jobs/{job_id}:setPriority", "SetJobPriority", "*"},
      {"POST", "/api/v1/jobs/{job_id}:requeue", "RequeueJob", ""},
      {"POST", "/api/v1/jobs/{job_id}:dumpStacks", "DumpStacks", ""},
      {"GET", "/api/v1/jobs/{job_id}:watch", "WatchJob", ""},
      {"GET", "/api/v1/jobs/{job_id}/logs", "StreamLogs", ""},
      {"GET", "/api/v1/jobs/{job_id}/progress", "GetJobProgress", ""},
      {"GET", "/api/v1/code/{sha256}", "StatCode", ""},
      {"GET", "/api/v1/workers", "ListWorkers", ""},
      {"POST", "/api/v1/workers/{worker_id}:cordon", "CordonWorker", "*"},
      {"POST", "/api/v1/workers/{worker_id}:uncordon", "UncordonWorker", ""},
      {"POST", "/api/v1/workers/{worker_id}:drain", "DrainWorker", "*"},
      {"GET", "/api/v1/queues", "ListQueues", ""},
      {"POST", "/api/v1/console/logins", "CreateConsoleLogin", ""},
  };
  return *routes;
}

std::vector<const pb::ServiceDescriptor*> HttpServices() {
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  return {pool->FindServiceByName("ringmaster.v1.JobService"),
          pool->FindServiceByName("ringmaster.v1.ClusterService")};
}

absl::StatusOr<MatchedRoute> MatchHttpRoute(absl::string_view verb, absl::string_view path) {
  bool path_known = false;
  for (const HttpRoute& route : HttpRoutes()) {
    MatchedRoute matched;
    if (!MatchPattern(route.pattern, path, &matched.path)) continue;
    path_known = true;
    if (verb != route.verb) continue;
    matched.route = &route;
    for (const pb::ServiceDescriptor* service : HttpServices()) {
      if (const pb::MethodDescriptor* m = service->FindMethodByName(route.method)) {
        matched.method = m;
      }
    }
    return matched;
  }
  if (path_known) {
    return absl::UnimplementedError(
        absl::StrCat(std::string(verb), " is not a method of ", std::string(path)));
  }
  return absl::NotFoundError(absl::StrCat("no API route ", std::string(path)));
}

absl::Status FillHttpRequest(const MatchedRoute& matched, absl::string_view query,
                             absl::string_view body, absl::string_view content_type,
                             pb::Message* request) {
  RETURN_IF_ERROR(FillBody(matched, body, content_type, request));
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string key, Unescape(pair.substr(0, eq), true));
    ASSIGN_OR_RETURN(std::string value,
                     Unescape(eq == absl::string_view::npos ? "" : pair.substr(eq + 1), true));
    RETURN_IF_ERROR(SetQueryParameter(request, key, value));
  }
  // The path's parameters win over the body's and the query's.
  for (const auto& [name, value] : matched.path) {
    const pb::FieldDescriptor* field = request->GetDescriptor()->FindFieldByName(name);
    request->GetReflection()->SetString(request, field, value);
  }
  return absl::OkStatus();
}

std::string ToJson(const pb::Message& message) {
  std::string json;
  pb::util::JsonPrintOptions options;
  (void)pb::util::MessageToJsonString(message, &json, options);  // only fails on Any
  return json;
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status) {
  std::string json = absl::StrCat("{\"code\":", static_cast<int>(status.code()), ",\"status\":");
  AppendJsonString(absl::StatusCodeToString(status.code()), &json);
  json += ",\"message\":";
  AppendJsonString(status.message(), &json);
  json += "}";
  return json;
}

}  // namespace ringmaster
