#include <catch2/catch.hpp>
#include <vector>

#include "errors.h"
#include "options.h"

using namespace weft::perf;

namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "weft-perf");
  auto o = parse_options(static_cast<int>(args.size()), const_cast<char**>(args.data()), "p.so");
  REQUIRE(o.has_value());
  return *o;
}

}  // namespace

TEST_CASE("parse_size accepts plain numbers and binary suffixes") {
  CHECK(parse_size("8") == 8u);
  CHECK(parse_size("8B") == 8u);
  CHECK(parse_size("64K") == 65536u);
  CHECK(parse_size("64k") == 65536u);
  CHECK(parse_size("4M") == (size_t{4} << 20));
  CHECK(parse_size("4MiB") == (size_t{4} << 20));
  CHECK(parse_size("4MB") == (size_t{4} << 20));
  CHECK(parse_size("1G") == (size_t{1} << 30));
  CHECK(parse_size("2T") == (size_t{2} << 40));
  CHECK(parse_size("0") == 0u);
}

TEST_CASE("parse_size rejects garbage and overflow") {
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("K"));
  CHECK_FALSE(parse_size("12X"));
  CHECK_FALSE(parse_size("1.5M"));
  CHECK_FALSE(parse_size("-1"));
  CHECK_FALSE(parse_size("4Mx"));
  CHECK_FALSE(parse_size("99999999999999999999"));
  CHECK_FALSE(parse_size("20000000000T"));
}

TEST_CASE("size_sweep multiplies and includes both ends when reachable") {
  CHECK(size_sweep(8, 64, 2) == std::vector<size_t>{8, 16, 32, 64});
  CHECK(size_sweep(8, 100, 4) == std::vector<size_t>{8, 32});
  CHECK(size_sweep(1, 3, 1.1) == std::vector<size_t>{1, 2, 3});  // always advances
  CHECK(size_sweep(8, size_t{256} << 20, 2).size() == 26);
}

TEST_CASE("defaults match the documentation") {
  Options o = parse({});
  CHECK(o.role == Role::local);
  CHECK(o.plugin_path == "p.so");
  CHECK(o.abi == 0);
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == (size_t{256} << 20));
  CHECK(o.depth == 32);
  CHECK(o.timeout_s == 30);
  CHECK(o.check);
  CHECK(o.run_latency);
  CHECK(o.run_bw);
  CHECK(o.format == OutputFormat::table);
}

TEST_CASE("options parse in both spellings") {
  Options o = parse({"--client", "host1", "--port=1234", "--max-bytes", "1M", "--test=bw",
                     "--no-check", "--json", "--abi", "9", "--depth", "8"});
  CHECK(o.role == Role::client);
  CHECK(o.host == "host1");
  CHECK(o.port == 1234);
  CHECK(o.max_bytes == (size_t{1} << 20));
  CHECK_FALSE(o.run_latency);
  CHECK(o.run_bw);
  CHECK_FALSE(o.check);
  CHECK(o.format == OutputFormat::json);
  CHECK(o.abi == 9);
  CHECK(o.depth == 8);

  Options raw = parse({"--raw-ofi", "tcp;ofi_rxm", "--domain", "lo", "--server"});
  CHECK(raw.raw());
  CHECK(raw.raw_provider == "tcp;ofi_rxm");
  CHECK(raw.domain == "lo");
  CHECK(raw.role == Role::server);
}

TEST_CASE("bad command lines are usage errors") {
  auto bad = [](std::vector<const char*> args) {
    args.insert(args.begin(), "weft-perf");
    CHECK_THROWS_AS(
        parse_options(static_cast<int>(args.size()), const_cast<char**>(args.data()), "p.so"),
        UsageError);
  };
  bad({"--bogus"});
  bad({"--abi", "5"});
  bad({"--abi", "13"});
  bad({"--server", "--client", "h"});
  bad({"--min-bytes", "1M", "--max-bytes", "1K"});
  bad({"--min-bytes", "0"});
  bad({"--test", "rate"});
  bad({"--step-factor", "1"});
  bad({"--depth", "0"});
  bad({"--port"});
  bad({"--domain", "lo"});  // plugin mode: WEFT_OFI_DOMAIN instead
  bad({"--raw-ofi", "tcp", "--abi", "9"});
  bad({"--local=yes"});
}
