#include "tools/ncu_metrics.h"

#include "support/error.h"

#include <llvm/ADT/StringRef.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace kiln::cli {

namespace {

// One CSV line of quoted fields ("a","b,c",...); unquoted fields are taken as they are.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false, in_field = false;
  for (char c : line) {
    if (quoted) {
      if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"') {
      quoted = in_field = true;
    } else if (c == ',') {
      fields.push_back(cur);
      cur.clear();
      in_field = false;
    } else if (c != '\r') {
      cur += c;
      in_field = true;
    }
  }
  if (in_field || !cur.empty() || (!line.empty() && line.back() == ','))
    fields.push_back(cur);
  return fields;
}

} // namespace

std::vector<std::string> ncu_arguments(const std::vector<std::string>& metrics, const std::string& kernel_regex,
                                       const std::vector<std::string>& command) {
  std::string list;
  for (const std::string& m : metrics)
    list += (list.empty() ? "" : ",") + m;
  std::vector<std::string> args = {"--csv", "--metrics", list, "--kernel-name", "regex:" + kernel_regex,
                                   "--launch-count", "1"};
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::map<std::string, double> parse_ncu_csv(const std::string& csv, const std::vector<std::string>& metrics) {
  std::istringstream lines(csv);
  std::string line;
  int name_col = -1, value_col = -1, id_col = -1;
  std::string first_id;
  std::map<std::string, double> values;
  while (std::getline(lines, line)) {
    const std::vector<std::string> f = csv_fields(line);
    if (name_col < 0) { // the header: "ID","Process ID",...,"Metric Name","Metric Unit","Metric Value"
      auto col = [&](const char* name) {
        auto it = std::find(f.begin(), f.end(), name);
        return it == f.end() ? -1 : static_cast<int>(it - f.begin());
      };
      name_col = col("Metric Name");
      value_col = col("Metric Value");
      id_col = col("ID");
      if (name_col < 0 || value_col < 0)
        name_col = value_col = -1;
      continue;
    }
    if (static_cast<int>(f.size()) <= std::max(name_col, value_col))
      continue;
    if (id_col >= 0) { // the first profiled kernel only
      if (first_id.empty())
        first_id = f[id_col];
      else if (f[id_col] != first_id)
        break;
    }
    std::string value = f[value_col];
    value.erase(std::remove(value.begin(), value.end(), ','), value.end());
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (std::find(metrics.begin(), metrics.end(), f[name_col]) == metrics.end())
      continue;
    if (value.empty() || end != value.c_str() + value.size())
      fail("ncu reported '{}' for {}, not a number", f[value_col], f[name_col]);
    values[f[name_col]] = v;
  }
  if (name_col < 0)
    fail("ncu printed no metric table (expected CSV with 'Metric Name' and 'Metric Value' columns); it "
         "printed:\n{}",
         csv.substr(0, 2000));
  for (const std::string& m : metrics)
    if (!values.count(m))
      fail("ncu's output has no value for {} (the kernel was not profiled, or the metric does not exist on "
           "this GPU)",
           m);
  return values;
}

} // namespace kiln::cli
