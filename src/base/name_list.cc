#include "base/name_list.h"

#include <strings.h>

#include <algorithm>
#include <sstream>

namespace lanes {
namespace {

bool sameName(const std::string& a, const std::string& b) {
  return a.size() == b.size() && strncasecmp(a.c_str(), b.c_str(), a.size()) == 0;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

Status NameList::parse(const std::string& text, const std::vector<std::string>& known,
                       NameList* out) {
  NameList list;
  list.text_ = text;
  std::string body = trim(text);
  if (body.empty()) {
    *out = list;
    return Status::ok();
  }
  list.set_ = true;
  if (body[0] == '^') {
    list.exclude_ = true;
    body = body.substr(1);
  }
  std::stringstream in(body);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item);
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const std::string& k) { return sameName(k, item); });
    if (it == known.end()) {
      std::string valid;
      for (const auto& k : known) valid += (valid.empty() ? "" : ", ") + k;
      return invalidArgument("\"" + item + "\" is not one of " + valid +
                             " (a comma-separated list; ^ first to exclude)");
    }
    list.names_.push_back(*it);
  }
  if (list.names_.empty() && !list.exclude_)
    return invalidArgument("the list names nothing (a comma-separated list; ^ first to exclude)");
  *out = list;
  return Status::ok();
}

bool NameList::allows(const std::string& name, bool onByDefault) const {
  const bool listed = std::any_of(names_.begin(), names_.end(),
                                  [&](const std::string& n) { return sameName(n, name); });
  if (!set_) return onByDefault;
  if (exclude_) return onByDefault && !listed;
  return listed;
}

}  // namespace lanes
