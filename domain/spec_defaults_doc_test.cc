// docs/reference.md's job spec tables against the code: a row for every
// field of JobSpec and of its trainer: section (fields of nested messages
// named `a.b`), no row for a field that does not exist, and each row's
// default what ApplyJobSpecDefaults gives a spec that leaves it unset.
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "domain/spec_validation.h"

namespace ringmaster {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Fields without a default (required), and defaults that depend on the
// rest of the spec, which the reference describes in words (checked below).
const std::map<std::string, std::string>& Described() {
  static const auto* described = new std::map<std::string, std::string>{
      {"name", ""},
      {"ranks", ""},
      {"min_ranks", "`ranks`"},
      {"hang_timeout_s", "600 for trainer jobs, off for commands"},
      {"working_dir", "the shipped code, else the worker's directory"},
      {"checkpoint_dir", "the coordinator's `--checkpoint-dir`"},
      {"resources.gpus", "`gpus_per_rank`"},
      {"code", "set by `submit`"},
      {"queue", "the coordinator's `default_queue`"},
      {"preflight", "the coordinator's `--preflight-default` (off)"},
      {"image_pull", "`if_not_present` with an `image`"},
      {"placement.mode", "`required` with a `pack`"},
  };
  return *described;
}

// Field name → the default column of its row, from the tables of the
// "## Job spec" section; the trainer: table's names get "trainer.".
std::map<std::string, std::string> DocumentedDefaults(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::map<std::string, std::string> rows;
  bool in_section = false;
  std::string prefix;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Job spec";
    if (!in_section) continue;
    if (line == "`trainer:`") prefix = "trainer.";
    if (!absl::StartsWith(line, "| `")) continue;
    // Cells between unescaped bars, trimmed.
    std::vector<std::string> cells = absl::StrSplit(
        absl::StrReplaceAll(absl::StripSuffix(absl::StripPrefix(line, "|"), "|"), {{"\\|", "/"}}),
        '|');
    if (cells.size() < 3) continue;
    for (std::string& cell : cells) cell = std::string(absl::StripAsciiWhitespace(cell));
    std::vector<std::string> names = absl::StrSplit(cells[0], ", ");
    std::vector<std::string> defaults = absl::StrSplit(cells[1], ", ");
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string name =
          std::string(absl::StripSuffix(absl::StripPrefix(names[i], "`"), "`"));
      const std::string value = defaults.size() == names.size() ? defaults[i] : cells[1];
      EXPECT_TRUE(rows.emplace(prefix + name, value).second) << name << " has two rows";
    }
  }
  return rows;
}

// How the reference writes a value: numbers as %g, strings in backticks;
// empty for a zero or empty value.
std::string Shown(const Message& message, const FieldDescriptor* field) {
  const auto* reflection = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const int32_t v = reflection->GetInt32(message, field);
      return v == 0 ? "" : absl::StrCat(v);
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = reflection->GetInt64(message, field);
      return v == 0 ? "" : absl::StrCat(v);
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = reflection->GetDouble(message, field);
      return v == 0 ? "" : absl::StrFormat("%g", v);
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string v = reflection->GetString(message, field);
      return v.empty() ? "" : absl::StrCat("`", v, "`");
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection->GetBool(message, field) ? "true" : "";
    default:
      return "?";
  }
}

bool HasRowsBelow(const std::map<std::string, std::string>& documented, const std::string& name) {
  auto it = documented.lower_bound(name + ".");
  return it != documented.end() && absl::StartsWith(it->first, name + ".");
}

// Every leaf field of `message` by its dotted name, with its value shown;
// a message field whose fields have no rows of their own is a leaf, and
// the others go to `messages`.
void Leaves(const Message& message, const std::string& prefix,
            const std::map<std::string, std::string>& documented,
            std::map<std::string, std::string>* out, std::set<std::string>* messages) {
  const auto* descriptor = message.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    const std::string name = prefix + field->name();
    if (field->is_repeated()) {
      (*out)[name] = "";
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (HasRowsBelow(documented, name)) {
        messages->insert(name);
        Leaves(message.GetReflection()->GetMessage(message, field), name + ".", documented, out,
               messages);
      } else {
        (*out)[name] = "";
      }
    } else {
      (*out)[name] = Shown(message, field);
    }
  }
}

std::string ReferencePath() { return "docs/reference.md"; }

TEST(SpecDefaultsDocTest, EveryFieldHasARowWithTheDefaultTheCodeApplies) {
  const std::map<std::string, std::string> documented = DocumentedDefaults(ReferencePath());
  ASSERT_GT(documented.size(), 20u) << "the job spec tables were not found";
  v1::JobSpec spec;
  spec.set_name("defaults");
  spec.set_ranks(2);
  spec.mutable_trainer();
  ApplyJobSpecDefaults(&spec);
  std::map<std::string, std::string> code;
  std::set<std::string> messages;
  Leaves(spec, "", documented, &code, &messages);

  for (const auto& [name, shown] : code) {
    auto row = documented.find(name);
    if (row == documented.end()) {
      ADD_FAILURE() << name << " has no row in " << ReferencePath();
      continue;
    }
    if (auto described = Described().find(name); described != Described().end()) {
      EXPECT_EQ(row->second, described->second) << name;
      continue;
    }
    if (shown.empty()) {
      EXPECT_TRUE(row->second.empty() || row->second == "0")
          << name << ": the code leaves it unset, the reference says " << row->second;
    } else {
      EXPECT_EQ(row->second, shown) << name << ": the reference's default is not the code's";
    }
  }
  for (const auto& [name, value] : documented) {
    EXPECT_TRUE(code.count(name) == 1 || messages.count(name) == 1)
        << ReferencePath() << " documents " << name << ", which JobSpec does not have";
  }
}

// The defaults described in words, as the words say.
TEST(SpecDefaultsDocTest, DescribedDefaultsHold) {
  v1::JobSpec trainer;
  trainer.set_ranks(4);
  trainer.mutable_trainer();
  ApplyJobSpecDefaults(&trainer);
  EXPECT_EQ(trainer.min_ranks(), 4);
  EXPECT_EQ(trainer.hang_timeout_s(), 600);
  EXPECT_TRUE(trainer.working_dir().empty());
  EXPECT_TRUE(trainer.checkpoint_dir().empty());

  v1::JobSpec command;
  command.set_ranks(1);
  command.add_command("true");
  command.mutable_resources()->set_gpus(2);
  ApplyJobSpecDefaults(&command);
  EXPECT_EQ(command.hang_timeout_s(), 0);
  EXPECT_EQ(command.gpus_per_rank(), 2);
  EXPECT_TRUE(command.placement().mode().empty());

  v1::JobSpec packed = command;
  packed.mutable_placement()->set_pack("rack");
  ApplyJobSpecDefaults(&packed);
  EXPECT_EQ(packed.placement().mode(), "required");
}

// A value set, 0 included, is kept: unset and 0 differ for optional fields.
TEST(SpecDefaultsDocTest, AnExplicitZeroIsKept) {
  v1::JobSpec spec;
  spec.set_ranks(1);
  spec.set_max_restarts(0);
  spec.mutable_trainer()->set_checkpoint_every_s(0);
  spec.mutable_trainer()->set_snapshot_every_steps(0);
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.max_restarts(), 0);
  EXPECT_EQ(spec.trainer().checkpoint_every_s(), 0);
  EXPECT_EQ(spec.trainer().snapshot_every_steps(), 0);
  v1::JobSpec unset;
  unset.set_ranks(1);
  unset.mutable_trainer();
  ApplyJobSpecDefaults(&unset);
  EXPECT_EQ(unset.max_restarts(), 3);
  EXPECT_EQ(unset.trainer().checkpoint_every_s(), 300);
  EXPECT_EQ(unset.trainer().snapshot_every_steps(), 1);
}

}  // namespace
}  // namespace ringmaster
