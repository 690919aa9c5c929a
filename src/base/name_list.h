// A list of names in NCCL's syntax (NCCL_ALGO, NCCL_PROTO): "a,b" allows
// those, "^a,b" all but those.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace lanes {

// Empty or unset allows every name that is on by default. Names are matched
// without case.
class NameList {
 public:
  NameList() = default;
  // Fails on a name that is not an entry of `known`, naming the valid ones.
  static Status parse(const std::string& text, const std::vector<std::string>& known,
                      NameList* out);
  bool set() const { return set_; }
  // Whether `name` may be chosen; `onByDefault` applies when the list is unset
  // or excludes with ^.
  bool allows(const std::string& name, bool onByDefault) const;
  const std::string& text() const { return text_; }

 private:
  bool set_ = false;
  bool exclude_ = false;
  std::vector<std::string> names_;
  std::string text_;
};

}  // namespace lanes
