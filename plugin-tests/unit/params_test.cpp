// The parameter table: defaults, strict parsing and error messages.
#include "weft/params.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "weft/param_parse.h"

namespace {

using weft::Params;
using weft::ParamSpec;
using weft::ParamType;

using Env = std::map<std::string, std::string>;

weft::EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// Loads with `env`; returns the error ("" on success).
std::string load(const Env& env, Params& params) {
  std::string error;
  const bool ok = weft::load_params(params, error, lookup(env));
  REQUIRE(ok == error.empty());
  return error;
}

Params load_ok(const Env& env) {
  Params params;
  REQUIRE(load(env, params) == "");
  return params;
}

std::string load_error(const Env& env) {
  Params params;
  return load(env, params);
}

const ParamSpec kBool{"flag", "WEFT_TEST_FLAG", ParamType::Bool, "0", nullptr, 0,
                      0,      "test",           nullptr};
const ParamSpec kWideSize{"bytes", "WEFT_TEST_BYTES", ParamType::Size, "0",    nullptr,
                          0,       UINT64_MAX,        "test",          nullptr};
const ParamSpec kSignedInt{
    "offset", "WEFT_TEST_OFFSET", ParamType::Int, "0", nullptr, -5, 5, "test", nullptr};

}  // namespace

TEST_CASE("defaults come from the table", "[unit][params]") {
  const Params p = load_ok({});
  CHECK(p.transport == "auto");
  CHECK(p.ofi_provider == "");
  CHECK(p.ofi_domain == "");
  CHECK(p.ofi_cq_read_count == 16);
  CHECK(p.ofi_cq_size == 8192);
  CHECK(p.close_timeout_ms == 2000);
  CHECK(p.max_p2p_bytes == 0);
  CHECK(p.debug == "WARN");
}

TEST_CASE("the table is well formed", "[unit][params]") {
  std::set<std::string> names;
  for (const ParamSpec& spec : weft::param_specs()) {
    INFO(spec.env_name);
    CHECK(std::string(spec.env_name).rfind("WEFT_", 0) == 0);
    CHECK(names.insert(spec.env_name).second);
    CHECK(std::string(spec.doc).size() > 10);
    CHECK((spec.type == ParamType::Enum) == (spec.choices != nullptr));
    if (spec.type == ParamType::Int || spec.type == ParamType::Size) {
      CHECK((spec.min_value <= 0 || static_cast<uint64_t>(spec.min_value) <= spec.max_value));
    }
  }
  CHECK(names.size() == weft::param_specs().size());
  for (const char* expected : {"WEFT_TRANSPORT", "WEFT_OFI_PROVIDER", "WEFT_OFI_DOMAIN",
                               "WEFT_CLOSE_TIMEOUT_MS", "WEFT_CONNECT_TIMEOUT_MS"}) {
    CHECK(names.count(expected) == 1);
  }
}

TEST_CASE("empty and unset values mean the default", "[unit][params]") {
  const Params p = load_ok({{"WEFT_OFI_CQ_READ_COUNT", ""}, {"WEFT_TRANSPORT", ""}});
  CHECK(p.ofi_cq_read_count == 16);
  CHECK(p.transport == "auto");
  const Env env{{"WEFT_OFI_CQ_READ_COUNT", ""}, {"WEFT_OFI_CQ_SIZE", "128"}};
  for (const ParamSpec& spec : weft::param_specs()) {
    const bool expected = std::string(spec.env_name) == "WEFT_OFI_CQ_SIZE";
    CHECK(weft::param_is_set_in_env(spec, lookup(env)) == expected);
  }
}

TEST_CASE("string values are taken as is", "[unit][params]") {
  const Params p =
      load_ok({{"WEFT_OFI_PROVIDER", "tcp;ofi_rxm"}, {"WEFT_OFI_DOMAIN", "^lo, eth0"}});
  CHECK(p.ofi_provider == "tcp;ofi_rxm");
  CHECK(p.ofi_domain == "^lo, eth0");
}

TEST_CASE("integers", "[unit][params]") {
  CHECK(load_ok({{"WEFT_OFI_CQ_READ_COUNT", "1"}}).ofi_cq_read_count == 1);
  CHECK(load_ok({{"WEFT_OFI_CQ_READ_COUNT", "256"}}).ofi_cq_read_count == 256);
  CHECK(load_ok({{"WEFT_OFI_CQ_READ_COUNT", "+32"}}).ofi_cq_read_count == 32);
  CHECK(load_ok({{"WEFT_CLOSE_TIMEOUT_MS", "0"}}).close_timeout_ms == 0);
  CHECK(load_ok({{"WEFT_OFI_CQ_SIZE", "1048576"}}).ofi_cq_size == 1048576);

  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "abc"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"abc\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "16x"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"16x\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", " 16"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\" 16\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "1.5"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"1.5\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "+"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"+\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "+-3"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"+-3\" is not an integer (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "0x10"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"0x10\" is not an integer (expected 1..256)");
}

TEST_CASE("integer range limits", "[unit][params]") {
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "0"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"0\" is out of range (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "257"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"257\" is out of range (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_READ_COUNT", "-1"}}) ==
        "WEFT_OFI_CQ_READ_COUNT=\"-1\" is out of range (expected 1..256)");
  CHECK(load_error({{"WEFT_OFI_CQ_SIZE", "63"}}) ==
        "WEFT_OFI_CQ_SIZE=\"63\" is out of range (expected 64..1048576)");
  // Beyond int64 is reported as out of range, not wrapped.
  CHECK(load_error({{"WEFT_CLOSE_TIMEOUT_MS", "99999999999999999999"}}) ==
        "WEFT_CLOSE_TIMEOUT_MS=\"99999999999999999999\" is out of range (expected 0..600000)");
  CHECK(load_error({{"WEFT_CLOSE_TIMEOUT_MS", "-99999999999999999999"}}) ==
        "WEFT_CLOSE_TIMEOUT_MS=\"-99999999999999999999\" is out of range (expected 0..600000)");

  int64_t value = 0;
  std::string error;
  CHECK(weft::parse_int_param(kSignedInt, "-5", value, error));
  CHECK(value == -5);
  CHECK(weft::parse_int_param(kSignedInt, "+5", value, error));
  CHECK(value == 5);
  CHECK_FALSE(weft::parse_int_param(kSignedInt, "-6", value, error));
  CHECK(error == "WEFT_TEST_OFFSET=\"-6\" is out of range (expected -5..5)");
  CHECK(value == 5);  // untouched on error
}

TEST_CASE("sizes and suffixes", "[unit][params]") {
  const auto bytes = [](const char* text) {
    return load_ok({{"WEFT_MAX_P2P_BYTES", text}}).max_p2p_bytes;
  };
  CHECK(bytes("0") == 0);
  CHECK(bytes("4096") == 4096);
  CHECK(bytes("4096B") == 4096);
  CHECK(bytes("1K") == 1024);
  CHECK(bytes("1k") == 1024);
  CHECK(bytes("4M") == 4ull << 20);
  CHECK(bytes("4MiB") == 4ull << 20);
  CHECK(bytes("4mib") == 4ull << 20);
  CHECK(bytes("4MB") == 4ull << 20);
  CHECK(bytes("2G") == 2ull << 30);
  CHECK(bytes("1T") == 1ull << 40);
  CHECK(bytes("1TiB") == 1ull << 40);
  CHECK(bytes("1099511627776") == 1ull << 40);

  const std::string expected =
      " (expected 0..1T bytes; suffixes K, M, G, T are powers of 1024, e.g. 4M or 4MiB)";
  for (const char* bad : {"abc", "4X", "4 M", "M", "4iB", "4MiBs", "-1", "+4", "1.5G", "4KM"}) {
    INFO(bad);
    CHECK(load_error({{"WEFT_MAX_P2P_BYTES", bad}}) ==
          "WEFT_MAX_P2P_BYTES=\"" + std::string(bad) + "\" is not a size" + expected);
  }
  CHECK(load_error({{"WEFT_MAX_P2P_BYTES", "1099511627777"}}) ==
        "WEFT_MAX_P2P_BYTES=\"1099511627777\" is out of range" + expected);
  CHECK(load_error({{"WEFT_MAX_P2P_BYTES", "2T"}}) ==
        "WEFT_MAX_P2P_BYTES=\"2T\" is out of range" + expected);
  CHECK(load_error({{"WEFT_MAX_P2P_BYTES", "1025G"}}) ==
        "WEFT_MAX_P2P_BYTES=\"1025G\" is out of range" + expected);
}

TEST_CASE("parse_size reads sizes as the parameters do, without a range", "[unit][params]") {
  CHECK(weft::parse_size("0") == 0u);
  CHECK(weft::parse_size("4MiB") == (4ull << 20));
  CHECK(weft::parse_size("4mb") == (4ull << 20));
  CHECK(weft::parse_size("8B") == 8u);
  CHECK(weft::parse_size("16777215T") == (16777215ull << 40));
  CHECK_FALSE(weft::parse_size("16777216T"));
  CHECK_FALSE(weft::parse_size("18446744073709551616"));
  CHECK_FALSE(weft::parse_size(""));
  CHECK_FALSE(weft::parse_size("M"));
  CHECK_FALSE(weft::parse_size("1.5M"));
  CHECK_FALSE(weft::parse_size("-1"));
  CHECK_FALSE(weft::parse_size("4Mx"));
}

TEST_CASE("size overflow is detected", "[unit][params]") {
  uint64_t value = 7;
  std::string error;
  const std::string expected =
      " (expected 0..18446744073709551615 bytes; suffixes K, M, G, T are powers of 1024, e.g. 4M "
      "or 4MiB)";
  CHECK(weft::parse_size_param(kWideSize, "18446744073709551615", value, error));
  CHECK(value == UINT64_MAX);
  CHECK(weft::parse_size_param(kWideSize, "16777215T", value, error));
  CHECK(value == (16777215ull << 40));
  CHECK_FALSE(weft::parse_size_param(kWideSize, "18446744073709551616", value, error));
  CHECK(error == "WEFT_TEST_BYTES=\"18446744073709551616\" is too large" + expected);
  CHECK_FALSE(weft::parse_size_param(kWideSize, "16777216T", value, error));
  CHECK(error == "WEFT_TEST_BYTES=\"16777216T\" is too large" + expected);
  CHECK_FALSE(weft::parse_size_param(kWideSize, "17179869184G", value, error));
  CHECK(error == "WEFT_TEST_BYTES=\"17179869184G\" is too large" + expected);
  CHECK(value == (16777215ull << 40));  // untouched on error

  CHECK(load_error({{"WEFT_MAX_P2P_BYTES", "99999999999999999999999T"}}) ==
        "WEFT_MAX_P2P_BYTES=\"99999999999999999999999T\" is too large (expected 0..1T bytes; "
        "suffixes K, M, G, T are powers of 1024, e.g. 4M or 4MiB)");
}

TEST_CASE("booleans", "[unit][params]") {
  bool value = false;
  std::string error;
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"}) {
    INFO(yes);
    value = false;
    CHECK(weft::parse_bool_param(kBool, yes, value, error));
    CHECK(value);
  }
  for (const char* no : {"0", "false", "FALSE", "no", "No", "off", "OFF"}) {
    INFO(no);
    value = true;
    CHECK(weft::parse_bool_param(kBool, no, value, error));
    CHECK_FALSE(value);
  }
  for (const char* bad : {"2", "y", "n", "truee", " true", "enable", "-1", ""}) {
    INFO(bad);
    value = true;
    CHECK_FALSE(weft::parse_bool_param(kBool, bad, value, error));
    CHECK(value);
    CHECK(error == "WEFT_TEST_FLAG=\"" + std::string(bad) +
                       "\" is not a boolean (expected 0/1, true/false, yes/no or on/off)");
  }
}

TEST_CASE("enums are case-insensitive and stored as spelled in the table", "[unit][params]") {
  CHECK(load_ok({{"WEFT_TRANSPORT", "ofi"}}).transport == "ofi");
  CHECK(load_ok({{"WEFT_TRANSPORT", "OFI"}}).transport == "ofi");
  CHECK(load_ok({{"WEFT_TRANSPORT", "Verbs"}}).transport == "verbs");
  CHECK(load_ok({{"WEFT_DEBUG", "info"}}).debug == "INFO");
  CHECK(load_ok({{"WEFT_DEBUG", "Trace"}}).debug == "TRACE");
  CHECK(load_ok({{"WEFT_DEBUG", "none"}}).debug == "NONE");

  CHECK(load_error({{"WEFT_TRANSPORT", "ib"}}) ==
        "WEFT_TRANSPORT=\"ib\" is not a valid choice (expected one of auto, ofi, verbs)");
  CHECK(load_error({{"WEFT_TRANSPORT", "ofi "}}) ==
        "WEFT_TRANSPORT=\"ofi \" is not a valid choice (expected one of auto, ofi, verbs)");
  CHECK(load_error({{"WEFT_TRANSPORT", "auto|ofi"}}) ==
        "WEFT_TRANSPORT=\"auto|ofi\" is not a valid choice (expected one of auto, ofi, verbs)");
  CHECK(load_error({{"WEFT_DEBUG", "DEBUG"}}) ==
        "WEFT_DEBUG=\"DEBUG\" is not a valid choice (expected one of NONE, WARN, INFO, TRACE)");
}

TEST_CASE("every bad variable is reported and the output is left alone", "[unit][params]") {
  Params params;
  params.ofi_cq_read_count = 77;
  const std::string error = load(
      {{"WEFT_OFI_CQ_READ_COUNT", "many"}, {"WEFT_DEBUG", "loud"}, {"WEFT_OFI_CQ_SIZE", "128"}},
      params);
  CHECK(error ==
        "WEFT_OFI_CQ_READ_COUNT=\"many\" is not an integer (expected 1..256)\n"
        "WEFT_DEBUG=\"loud\" is not a valid choice (expected one of NONE, WARN, INFO, TRACE)");
  CHECK(params.ofi_cq_read_count == 77);
  CHECK(params.ofi_cq_size == 0);
}

TEST_CASE("sizes are formatted with the largest exact unit", "[unit][params]") {
  CHECK(weft::format_size(0) == "0");
  CHECK(weft::format_size(1000) == "1000");
  CHECK(weft::format_size(1024) == "1K");
  CHECK(weft::format_size(4097) == "4097");
  CHECK(weft::format_size(3ull << 20) == "3M");
  CHECK(weft::format_size(1536ull << 20) == "1536M");
  CHECK(weft::format_size(1ull << 40) == "1T");
}

TEST_CASE("NCCL's variables fill the verbs parameters; WEFT_ ones win", "[unit][params]") {
  const Params defaults = load_ok({});
  CHECK(defaults.ib_hca == "");
  CHECK(defaults.ib_gid_index == -1);
  CHECK(defaults.ib_qps_per_connection == 1);
  CHECK(defaults.ibverbs_lib == "libibverbs.so.1");
  const Params nccl = load_ok({{"NCCL_IB_HCA", "mlx5_0:1"},
                               {"NCCL_IB_GID_INDEX", "3"},
                               {"NCCL_IB_ADDR_FAMILY", "AF_INET6"},
                               {"NCCL_IB_TC", "106"},
                               {"NCCL_IB_QPS_PER_CONNECTION", "4"},
                               {"NCCL_IB_SPLIT_DATA_ON_QPS", "1"},
                               {"NCCL_IB_AR_THRESHOLD", "16K"},
                               {"NCCL_SOCKET_IFNAME", "=eth0"}});
  CHECK(nccl.ib_hca == "mlx5_0:1");
  CHECK(nccl.ib_gid_index == 3);
  CHECK(nccl.ib_addr_family == "AF_INET6");
  CHECK(nccl.ib_tc == 106);
  CHECK(nccl.ib_qps_per_connection == 4);
  CHECK(nccl.ib_split_data_on_qps);
  CHECK(nccl.ib_ar_threshold == 16384);
  CHECK(nccl.socket_ifname == "=eth0");
  const Params both = load_ok({{"NCCL_IB_HCA", "mlx5_0"}, {"WEFT_IB_HCA", "^mlx5_1"}});
  CHECK(both.ib_hca == "^mlx5_1");
  // An empty WEFT_ variable counts as unset, so NCCL's still applies.
  CHECK(load_ok({{"NCCL_IB_SL", "3"}, {"WEFT_IB_SL", ""}}).ib_sl == 3);
  CHECK(load_error({{"NCCL_IB_TIMEOUT", "40"}}) ==
        "WEFT_IB_TIMEOUT=\"40\" is out of range (expected 1..31) (value taken from "
        "NCCL_IB_TIMEOUT, which WEFT_IB_TIMEOUT would override)");
  // Not every variable has an NCCL twin.
  CHECK(load_ok({{"NCCL_OFI_PROVIDER", "tcp"}}).ofi_provider == "");
}

TEST_CASE("NCCL_GDR_FLUSH_DISABLE turns the flush off unless WEFT_GDR_FLUSH says otherwise",
          "[unit][params]") {
  CHECK(load_ok({}).gdr_flush == "auto");
  CHECK(load_ok({{"NCCL_GDR_FLUSH_DISABLE", "1"}}).gdr_flush == "off");
  CHECK(load_ok({{"NCCL_GDR_FLUSH_DISABLE", "0"}}).gdr_flush == "auto");
  CHECK(load_ok({{"NCCL_GDR_FLUSH_DISABLE", "1"}, {"WEFT_GDR_FLUSH", "read"}}).gdr_flush == "read");
}
