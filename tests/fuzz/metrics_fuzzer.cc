// The metrics exposition with label values of any bytes: every value is
// escaped so that Prometheus's text format reads it back unchanged, and a
// value cannot end its sample line or forge another sample.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "tests/fuzz/require.h"

namespace {

// The text format's label value unescaping (\\, \", \n).
bool Unescape(const std::string& text, size_t* pos, std::string* out) {
  while (*pos < text.size()) {
    const char c = text[(*pos)++];
    if (c == '"') return true;
    if (c == '\n') return false;
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (*pos >= text.size()) return false;
    const char e = text[(*pos)++];
    if (e == 'n') {
      out->push_back('\n');
    } else if (e == '\\' || e == '"') {
      out->push_back(e);
    } else {
      return false;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // Up to three label values, split at the first two NUL bytes.
  std::vector<std::string> values(1);
  for (char c : input) {
    if (c == '\0' && values.size() < 3) {
      values.emplace_back();
    } else {
      values.back().push_back(c);
    }
  }
  ringmaster::metrics::Registry registry;
  auto& family = registry.AddGauge("fuzz_gauge", "help with \\ and \n in it");
  for (size_t i = 0; i < values.size(); ++i) {
    family.Add({{"job_id", values[i]}, {"rank", std::to_string(i)}}).Set(1.5);
  }
  const std::string text = registry.Serialize();
  // Each sample line: fuzz_gauge{job_id="<escaped>",rank="<i>"} 1.5
  size_t samples = 0;
  size_t pos = 0;
  while ((pos = text.find("\nfuzz_gauge{job_id=\"", pos)) != std::string::npos) {
    pos += std::string("\nfuzz_gauge{job_id=\"").size();
    std::string value;
    ringmaster::Require(Unescape(text, &pos, &value), "a label value unescapes");
    bool known = false;
    for (const std::string& v : values) known |= v == value;
    ringmaster::Require(known, "a label value reads back as given");
    ringmaster::Require(text.compare(pos, 7, ",rank=\"") == 0,
                        "a label value ends where it should");
    const size_t end = text.find('\n', pos);
    pos = end == std::string::npos ? text.size() : end;
    ++samples;
  }
  ringmaster::Require(samples == values.size(), "one line per series, none forged");
  return 0;
}
