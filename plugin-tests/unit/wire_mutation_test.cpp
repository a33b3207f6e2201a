// WEFT_OFI_TEST_HOSTILE's fields: every name parses to its own mutation, the
// parameter's documentation lists them all, and the clear-to-send fields
// it changes are ones the sender's decoder refuses (the live test,
// functional.<flavour>.hostile, covers the rest).
#include "ofi/test_aids/wire_mutation.h"

#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>

#include "weft/param_spec.h"

using namespace weft::ofi;

TEST_CASE("every hostile field name parses to its own mutation and is documented",
          "[unit][wire_mutation]") {
  std::string doc;
  for (const weft::ParamSpec& spec : weft::param_specs()) {
    if (std::string(spec.env_name) == "WEFT_OFI_TEST_HOSTILE") doc = spec.doc;
  }
  REQUIRE(!doc.empty());
  std::set<WireMutation> seen;
  std::istringstream names(wire_mutation_names());
  std::string name;
  while (names >> name) {
    INFO(name);
    WireMutation m = WireMutation::kNone;
    REQUIRE(parse_wire_mutation(name, &m));
    CHECK(m != WireMutation::kNone);
    CHECK(seen.insert(m).second);
    CHECK(doc.find(name) != std::string::npos);
  }
  CHECK(seen.size() == 16);
  WireMutation m = WireMutation::kCtsSlot;
  CHECK(parse_wire_mutation("", &m));
  CHECK(m == WireMutation::kNone);
  CHECK_FALSE(parse_wire_mutation("cts-bogus", &m));
}

TEST_CASE("mutated clear-to-send fields are refused by the decoder", "[unit][wire_mutation]") {
  for (WireMutation mutation :
       {WireMutation::kCtsSlot, WireMutation::kCtsRails, WireMutation::kCtsCount}) {
    CtsMessage cts;
    cts.count = 1;
    cts.entries[0].size = 100;
    mutate_cts(mutation, &cts);
    uint8_t bytes[kCtsMaxSize] = {};
    encode_cts(cts, bytes);
    CtsMessage decoded;
    std::string error;
    CHECK_FALSE(decode_cts(bytes, cts_size(cts.count, cts.rails), 1, &decoded, &error));
    CHECK(!error.empty());
  }
  CtsMessage untouched;
  untouched.count = 1;
  mutate_cts(WireMutation::kNone, &untouched);
  CHECK(untouched.slot == 0);
  CHECK(untouched.rails == 1);
  CHECK(untouched.count == 1);
}
