#include "domain/job_spec_yaml.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
}

std::string Join(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

// "line L, column C: " of a node, for errors about where it stands.
std::string Where(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, ": ");
}

std::string Describe(const YAML::Node& node);

// INVALID_ARGUMENT at a key that is not a plain value (a list or a mapping
// would read as ""), or at the second of two equal keys of one mapping:
// YAML says keys are unique, and keeping the last would drop the first
// unseen.
absl::Status CheckKeys(const YAML::Node& map, const std::string& path) {
  std::map<std::string, int> first_line;
  for (const auto& item : map) {
    if (!item.first.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(item.first), path.empty() ? "" : path + ": ",
                       "a key must be a plain value, got ", Describe(item.first)));
    }
    const std::string& key = item.first.Scalar();
    auto [it, inserted] = first_line.emplace(key, item.first.Mark().line + 1);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(item.first), Join(path, key), ": duplicate key (first at line ", it->second, ")"));
    }
  }
  return absl::OkStatus();
}

std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("\"", node.Scalar(), "\"");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

absl::Status SetMessage(const YAML::Node& node, Message* message, const std::string& path);

// Sets one scalar value of `field` (repeated fields add it).
absl::Status SetScalar(const YAML::Node& node, const FieldDescriptor* field, Message* message,
                       const std::string& path) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    Message* child = repeated ? r->AddMessage(message, field) : r->MutableMessage(message, field);
    return SetMessage(node, child, path);
  }
  if (!node.IsScalar()) return Bad(path, absl::StrCat("expected a value, got ", Describe(node)));
  const std::string& text = node.Scalar();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      repeated ? r->AddString(message, field, text) : r->SetString(message, field, text);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(text, &v)) {
        return Bad(path, absl::StrCat("expected an integer, got \"", text, "\""));
      }
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        if (v < INT32_MIN || v > INT32_MAX) return Bad(path, "integer out of range");
        repeated ? r->AddInt32(message, field, static_cast<int32_t>(v))
                 : r->SetInt32(message, field, static_cast<int32_t>(v));
      } else {
        repeated ? r->AddInt64(message, field, v) : r->SetInt64(message, field, v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(text, &v)) {
        return Bad(path, absl::StrCat("expected a number, got \"", text, "\""));
      }
      repeated ? r->AddDouble(message, field, v) : r->SetDouble(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(text, &v)) {
        return Bad(path, absl::StrCat("expected true or false, got \"", text, "\""));
      }
      repeated ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      return absl::OkStatus();
    }
    default:
      return Bad(path, "unsupported field type");
  }
}

absl::Status SetMap(const YAML::Node& node, const FieldDescriptor* field, Message* message,
                    const std::string& path) {
  if (!node.IsMap()) return Bad(path, absl::StrCat("expected a mapping, got ", Describe(node)));
  RETURN_IF_ERROR(CheckKeys(node, path));
  const FieldDescriptor* key_field = field->message_type()->map_key();
  const FieldDescriptor* value_field = field->message_type()->map_value();
  for (const auto& item : node) {
    const std::string key = item.first.Scalar();
    const std::string item_path = Join(path, key);
    if (!item.second.IsScalar()) {
      return Bad(item_path, absl::StrCat("expected a value, got ", Describe(item.second)));
    }
    Message* entry = message->GetReflection()->AddMessage(message, field);
    entry->GetReflection()->SetString(entry, key_field, key);
    entry->GetReflection()->SetString(entry, value_field, item.second.Scalar());
  }
  return absl::OkStatus();
}

absl::Status SetMessage(const YAML::Node& node, Message* message, const std::string& path) {
  if (!node.IsMap()) {
    return Bad(path.empty() ? "job spec" : path,
               absl::StrCat("expected a mapping, got ", Describe(node)));
  }
  RETURN_IF_ERROR(CheckKeys(node, path));
  const auto* descriptor = message->GetDescriptor();
  for (const auto& item : node) {
    const std::string name = item.first.Scalar();
    const std::string field_path = Join(path, name);
    const FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr) return Bad(field_path, "unknown field");
    const YAML::Node& value = item.second;
    if (value.IsNull()) continue;
    if (field->is_map()) {
      RETURN_IF_ERROR(SetMap(value, field, message, field_path));
    } else if (field->is_repeated()) {
      if (!value.IsSequence()) {
        return Bad(field_path, absl::StrCat("expected a list, got ", Describe(value)));
      }
      for (size_t i = 0; i < value.size(); ++i) {
        RETURN_IF_ERROR(SetScalar(value[i], field, message, absl::StrCat(field_path, "[", i, "]")));
      }
    } else {
      RETURN_IF_ERROR(SetScalar(value, field, message, field_path));
    }
  }
  return absl::OkStatus();
}

// Whether `node`, with each alias read as often as it is named, holds at
// most `*budget` bytes (a byte a node, and its value's): an alias of an
// alias of a long value (a "billion laughs") may stand for gigabytes in a
// spec of a few. Stops as soon as the budget is spent.
bool WithinExpandedSize(const YAML::Node& node, int64_t* budget) {
  *budget -= 1 + (node.IsScalar() ? static_cast<int64_t>(node.Scalar().size()) : 0);
  if (*budget < 0) return false;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!WithinExpandedSize(item, budget)) return false;
    }
  } else if (node.IsMap()) {
    for (const auto& item : node) {
      if (!WithinExpandedSize(item.first, budget) || !WithinExpandedSize(item.second, budget)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& text) {
  if (static_cast<int64_t>(text.size()) > kDefaultMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the job spec is ", text.size(),
                                                   " bytes; the limit is ", kDefaultMaxSpecBytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ", column ",
                                                   e.mark.column + 1, ": nested too deep"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  int64_t budget = 2 * kDefaultMaxSpecBytes;
  if (!WithinExpandedSize(root, &budget)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job spec stands for more than ", 2 * kDefaultMaxSpecBytes,
        " bytes once its YAML aliases are read (an alias names its anchor's whole value)"));
  }
  v1::JobSpec spec;
  RETURN_IF_ERROR(SetMessage(root, &spec, ""));
  return spec;
}

}  // namespace ringmaster
