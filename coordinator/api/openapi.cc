#include "coordinator/api/openapi.h"

#include <set>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/api/http_routes.h"

namespace ringmaster {
namespace {

namespace pb = google::protobuf;

pb::Value String(const std::string& text) {
  pb::Value v;
  v.set_string_value(text);
  return v;
}

pb::Value Ref(const pb::Descriptor* message) {
  pb::Value v;
  (*v.mutable_struct_value()->mutable_fields())["$ref"] =
      String(absl::StrCat("#/components/schemas/", message->full_name()));
  return v;
}

pb::Value Object(std::vector<std::pair<std::string, pb::Value>> fields) {
  pb::Value v;
  auto& out = *v.mutable_struct_value()->mutable_fields();
  for (auto& [name, value] : fields) out[name] = std::move(value);
  return v;
}

// The schema of one value of `field` (not repeated), as the JSON mapping
// writes it; messages it names are added to `pending`.
pb::Value ScalarSchema(const pb::FieldDescriptor* field,
                       std::vector<const pb::Descriptor*>* pending) {
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      pending->push_back(field->message_type());
      return Ref(field->message_type());
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      pb::Value values;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        *values.mutable_list_value()->add_values() = String(field->enum_type()->value(i)->name());
      }
      return Object({{"type", String("string")}, {"enum", values}});
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return Object({{"type", String("boolean")}});
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return Object({{"type", String("integer")}, {"format", String("int32")}});
    case pb::FieldDescriptor::CPPTYPE_INT64:
    case pb::FieldDescriptor::CPPTYPE_UINT64:  // strings in the JSON mapping
      return Object({{"type", String("string")}, {"format", String("int64")}});
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return Object({{"type", String("number")}});
    default:
      return Object(
          {{"type", String("string")},
           {"format", String(field->type() == pb::FieldDescriptor::TYPE_BYTES ? "byte" : "")}});
  }
}

pb::Value FieldSchema(const pb::FieldDescriptor* field,
                      std::vector<const pb::Descriptor*>* pending) {
  if (field->is_map()) {
    return Object(
        {{"type", String("object")},
         {"additionalProperties", ScalarSchema(field->message_type()->map_value(), pending)}});
  }
  if (field->is_repeated()) {
    return Object({{"type", String("array")}, {"items", ScalarSchema(field, pending)}});
  }
  return ScalarSchema(field, pending);
}

// Every message `roots` reach, each a schema of its JSON fields.
pb::Value Schemas(std::vector<const pb::Descriptor*> pending) {
  pb::Value schemas;
  auto& out = *schemas.mutable_struct_value()->mutable_fields();
  std::set<std::string> done;
  while (!pending.empty()) {
    const pb::Descriptor* message = pending.back();
    pending.pop_back();
    if (!done.insert(message->full_name()).second) continue;
    pb::Value properties;
    auto& fields = *properties.mutable_struct_value()->mutable_fields();
    for (int i = 0; i < message->field_count(); ++i) {
      const pb::FieldDescriptor* field = message->field(i);
      fields[field->json_name()] = FieldSchema(field, &pending);
    }
    out[message->full_name()] = Object({{"type", String("object")}, {"properties", properties}});
  }
  return schemas;
}

pb::Value Json(const pb::Value& schema) {
  return Object({{"application/json", Object({{"schema", schema}})}});
}

// A route's operation: its parameters (the path's, and for a call without
// a whole-request body, the request's other scalar fields in the query),
// its body and its reply.
pb::Value Operation(const HttpRoute& route, const pb::MethodDescriptor* method,
                    std::vector<const pb::Descriptor*>* pending) {
  std::set<std::string> in_path;
  for (absl::string_view part : absl::StrSplit(route.pattern, '{', absl::SkipEmpty())) {
    const size_t close = part.find('}');
    if (close != absl::string_view::npos) in_path.emplace(part.substr(0, close));
  }
  pb::Value parameters;
  const pb::Descriptor* input = method->input_type();
  for (int i = 0; i < input->field_count(); ++i) {
    const pb::FieldDescriptor* field = input->field(i);
    const bool path = in_path.count(field->name()) > 0;
    if (!path && (std::string(route.body) == "*" || field->name() == route.body ||
                  field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)) {
      continue;
    }
    *parameters.mutable_list_value()->add_values() =
        Object({{"name", String(path ? field->name() : field->json_name())},
                {"in", String(path ? "path" : "query")},
                {"required",
                 [&] {
                   pb::Value v;
                   v.set_bool_value(path);
                   return v;
                 }()},
                {"schema", FieldSchema(field, pending)}});
  }
  std::vector<std::pair<std::string, pb::Value>> operation = {
      {"operationId", String(absl::StrCat(method->service()->name(), "_", method->name()))},
      {"parameters", parameters},
      {"responses",
       Object({{"200", Object({{"description", String(method->server_streaming()
                                                          ? "Server-Sent Events, each a message"
                                                          : "the reply")},
                               {"content", Json(Ref(method->output_type()))}})},
               {"default", Object({{"$ref", String("#/components/responses/Error")}})}})}};
  pending->push_back(method->output_type());
  const std::string body = route.body;
  if (!body.empty()) {
    const pb::Descriptor* message =
        body == "*" ? input : input->FindFieldByName(body)->message_type();
    pending->push_back(message);
    operation.emplace_back("requestBody", Object({{"content", Json(Ref(message))}}));
  }
  return Object(std::move(operation));
}

}  // namespace

std::string OpenApiDocument() {
  std::vector<const pb::Descriptor*> pending;
  pb::Value paths;
  auto& by_path = *paths.mutable_struct_value()->mutable_fields();
  for (const HttpRoute& route : HttpRoutes()) {
    const pb::MethodDescriptor* method = nullptr;
    for (const pb::ServiceDescriptor* service : HttpServices()) {
      if (const pb::MethodDescriptor* m = service->FindMethodByName(route.method)) method = m;
    }
    std::string verb = route.verb;
    for (char& c : verb) c = static_cast<char>(std::tolower(c));
    (*by_path[route.pattern].mutable_struct_value()->mutable_fields())[verb] =
        Operation(route, method, &pending);
  }
  const pb::Value error =
      Object({{"type", String("object")},
              {"properties", Object({{"code", Object({{"type", String("integer")}})},
                                     {"status", Object({{"type", String("string")}})},
                                     {"message", Object({{"type", String("string")}})}})}});
  pb::Value schemas = Schemas(std::move(pending));
  (*schemas.mutable_struct_value()->mutable_fields())["Error"] = error;
  pb::Value security;
  *security.mutable_list_value()->add_values() = Object({{"bearer", [] {
                                                            pb::Value v;
                                                            v.mutable_list_value();
                                                            return v;
                                                          }()}});
  const pb::Value document = Object(
      {{"openapi", String("3.0.3")},
       {"info", Object({{"title", String("Ringmaster")}, {"version", String("v1")}})},
       {"paths", paths},
       {"security", security},
       {"components",
        Object(
            {{"schemas", schemas},
             {"securitySchemes", Object({{"bearer", Object({{"type", String("http")},
                                                            {"scheme", String("bearer")}})}})},
             {"responses",
              Object({{"Error",
                       Object({{"description", String("google.rpc.Status, with its code's name")},
                               {"content",
                                Json(Object(
                                    {{"$ref", String("#/components/schemas/Error")}}))}})}})}})}});
  std::string json;
  (void)pb::util::MessageToJsonString(document, &json);
  return json;
}

}  // namespace ringmaster
