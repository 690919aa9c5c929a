// Two network namespaces joined by a veth pair: two "hosts" on one machine
// for tests that need a network between ranks they can cut. All traffic stays
// on the pair inside namespaces this object creates (and deletes).
#pragma once

#include <optional>
#include <string>

namespace lanes::test {

class VethNamespaces {
 public:
  // `tag` keeps names apart from other tests' namespaces.
  explicit VethNamespaces(const std::string& tag);
  ~VethNamespaces();
  VethNamespaces(const VethNamespaces&) = delete;
  VethNamespaces& operator=(const VethNamespaces&) = delete;

  // Builds both namespaces and the pair; on failure says why (callers skip).
  bool create(std::string* why);
  // Takes B's end of the pair down (or up again): packets between the
  // namespaces are dropped without any reset, a silent stall.
  bool setLinkB(bool up, std::string* why);

  std::string nsA, nsB, ifA, ifB, addrA, addrB;

 private:
  std::optional<std::string> ip_;
  bool createdA_ = false;
  bool createdB_ = false;
};

// Moves the calling thread into network namespace `name`; "" on success.
std::string enterNetworkNamespace(const std::string& name);

}  // namespace lanes::test
