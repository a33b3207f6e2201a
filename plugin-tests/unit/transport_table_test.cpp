// abi/transport_table.h: one entry per transport, each reachable by its
// WEFT_TRANSPORT value, with wire ids of its own.
#include "abi/transport_table.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <string_view>

#include "core/transport_id.h"
#include "weft/param_spec.h"

namespace {

std::set<std::string> transport_choices() {
  for (const weft::ParamSpec& spec : weft::param_specs()) {
    if (std::string_view(spec.env_name) != "WEFT_TRANSPORT") continue;
    std::set<std::string> choices;
    std::string_view rest = spec.choices;
    while (!rest.empty()) {
      size_t bar = rest.find('|');
      choices.emplace(rest.substr(0, bar));
      rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    }
    return choices;
  }
  return {};
}

}  // namespace

TEST_CASE("every transport of the table is a WEFT_TRANSPORT value with wire ids of its own",
          "[unit][transport-table]") {
  const std::set<std::string> choices = transport_choices();
  REQUIRE(choices.count("auto") == 1);
  std::set<std::string> names;
  std::set<int> wire_ids;
  for (const weft::TransportEntry& entry : weft::transport_table()) {
    INFO(entry.name);
    CHECK(choices.count(entry.name) == 1);
    CHECK(names.insert(entry.name).second);
    CHECK(wire_ids.insert(static_cast<int>(entry.net_wire_id)).second);
    CHECK(wire_ids.insert(static_cast<int>(entry.one_sided_wire_id)).second);
    CHECK(std::string(weft::transport_id_name(entry.net_wire_id)) != "unknown");
    CHECK(std::string(weft::transport_id_name(entry.one_sided_wire_id)) != "unknown");
    // Built, or it says what to install.
    CHECK(((entry.create != nullptr && entry.auto_choice != nullptr) ||
           std::string(entry.not_built).size() > 0));
  }
  // Every value but auto names a transport of the table.
  CHECK(names.size() + 1 == choices.size());
}

TEST_CASE("the last transport in auto's order takes what the others declined",
          "[unit][transport-table]") {
  auto table = weft::transport_table();
  REQUIRE(!table.empty());
  const weft::TransportEntry& last = table.back();
  REQUIRE(last.auto_choice != nullptr);
  weft::Params params;
  params.transport = "auto";
  weft::AutoChoice choice = last.auto_choice(params);
  CHECK(choice.use);
  CHECK_FALSE(choice.reason.empty());
}
