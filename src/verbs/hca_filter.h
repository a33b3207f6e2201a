// Which verbs devices and ports weft uses: WEFT_IB_HCA / NCCL_IB_HCA, in
// NCCL's syntax, so operators' existing settings keep their meaning.
//
//   mlx5_0:1,mlx5_1    prefix match on device names, optional port
//   =mlx5_0            exact names only
//   ^mlx5_3            every device except these
//   ^=mlx5_3:2         except exactly this port
#pragma once

#include <string>
#include <vector>

namespace weft::verbs {

class HcaFilter {
 public:
  // An empty spec keeps everything. On a malformed spec returns false and
  // says what is wrong in *error (the spec is named by the caller).
  static bool parse(const std::string& spec, HcaFilter* out, std::string* error);

  // Whether port `port` (1-based) of device `device` is selected.
  bool selects(const std::string& device, int port) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string name;
    int port = 0;  // 0: every port
  };
  bool matches(const Entry& entry, const std::string& device, int port) const;

  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace weft::verbs
