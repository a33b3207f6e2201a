// The data path a comm chose during connection setup: the tagged
// protocol's or the rdma protocol's. Built once per connection; a call is
// one branch on which was chosen: no virtual call, no allocation per message.
#pragma once

#include <concepts>
#include <memory>
#include <utility>
#include <variant>

#include "nccl/types.h"

namespace weft::ofi {

// What every data path offers its comm, besides isend or irecv.
template <typename Path>
concept DataPath = requires(Path& path) {
  { path.progress() } -> std::same_as<ncclResult_t>;
  { path.in_flight() } -> std::same_as<bool>;
  path.cancel_receives();
};

template <DataPath TaggedPath, DataPath RdmaPath>
class ChosenPath {
 public:
  template <typename Path, typename... Args>
  Path& choose(Args&&... args) {
    auto path = std::make_unique<Path>(std::forward<Args>(args)...);
    Path& chosen = *path;
    path_ = std::move(path);
    return chosen;
  }
  bool chosen() const { return path_.index() != 0; }
  // The chosen path if it is a `Path`, else null.
  template <typename Path>
  Path* get() {
    auto* path = std::get_if<std::unique_ptr<Path>>(&path_);
    return path != nullptr ? path->get() : nullptr;
  }

  // `call(path)` on the chosen path. Before the choice: a value-initialised
  // result (ncclSuccess, false), or nothing.
  template <typename Call>
  auto apply(Call&& call) {
    using Result = decltype(call(std::declval<TaggedPath&>()));
    if (auto* tagged = get<TaggedPath>()) return call(*tagged);
    if (auto* rdma = get<RdmaPath>()) return call(*rdma);
    return Result();
  }

 private:
  std::variant<std::monostate, std::unique_ptr<TaggedPath>, std::unique_ptr<RdmaPath>> path_;
};

}  // namespace weft::ofi
