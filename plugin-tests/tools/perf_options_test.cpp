#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "errors.h"
#include "options.h"
#include "weft/param_parse.h"

using namespace weft::perf;
using weft::parse_size;

namespace {

const char* no_env(const char*) {
  return nullptr;
}

// A fake environment for launcher detection.
std::map<std::string, std::string> g_env;
const char* fake_env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

Options parse(std::vector<const char*> args, EnvLookup env = no_env) {
  args.insert(args.begin(), "weft-perf");
  auto o =
      parse_options(static_cast<int>(args.size()), const_cast<char**>(args.data()), "p.so", env);
  REQUIRE(o.has_value());
  return *o;
}

void bad(std::vector<const char*> args, EnvLookup env = no_env) {
  args.insert(args.begin(), "weft-perf");
  INFO(args[1]);
  CHECK_THROWS_AS(
      parse_options(static_cast<int>(args.size()), const_cast<char**>(args.data()), "p.so", env),
      UsageError);
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
  CHECK(o.tests == std::vector<TestKind>{TestKind::latency, TestKind::bw});
  CHECK(o.comms == 1);
  CHECK(o.threads == 1);
  CHECK(o.group == 0);
  CHECK(o.raw_op == RawOp::tagged);
  CHECK(o.rate_max_bytes == 65536);
  CHECK(o.format == OutputFormat::table);
  CHECK(o.mem == MemType::host);
  CHECK(o.cuda_lib == "libcuda.so.1");
  CHECK_FALSE(o.dmabuf);
  CHECK(o.reg_min_bytes == 4096);
  CHECK(o.reg_max_bytes == (size_t{1} << 30));
  CHECK(o.reg_step_factor == 4.0);
}

TEST_CASE("options parse in both spellings") {
  Options o = parse({"--client", "host1", "--port=1234", "--max-bytes", "1M", "--test=bw",
                     "--no-check", "--json", "--abi", "9", "--depth", "8"});
  CHECK(o.role == Role::client);
  CHECK(o.host == "host1");
  CHECK(o.port == 1234);
  CHECK(o.max_bytes == (size_t{1} << 20));
  CHECK(o.tests == std::vector<TestKind>{TestKind::bw});
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

TEST_CASE("test lists, comms, threads, groups and raw operations") {
  CHECK(parse({"--test", "grouped,latency,bw,latency"}).tests ==
        std::vector<TestKind>{TestKind::latency, TestKind::bw, TestKind::grouped});
  CHECK(parse({"--test", "all"}).tests.size() == 5);
  Options o = parse({"--comms", "8", "--threads", "4", "--group", "2", "--rate-max-bytes", "4K",
                     "--min-bytes", "0"});
  CHECK(o.comms == 8);
  CHECK(o.threads == 4);
  CHECK(o.group == 2);
  CHECK(o.rate_max_bytes == 4096);
  CHECK(o.min_bytes == 0);
  CHECK(o.idle_comms == 0);
  CHECK(parse({"--idle-comms", "10000"}).idle_comms == 10000);
  CHECK(parse({"--mem", "host"}).role == Role::local);
  Options w = parse({"--raw-ofi", "shm", "--raw-op", "write"});
  CHECK(w.raw_op == RawOp::write);
  Options v = parse({"--vs-raw", "tcp", "--domain", "lo", "--raw-op", "write"});
  CHECK(v.vs_raw_provider == "tcp");
  CHECK_FALSE(v.raw());
  Options f = parse({"--vs-raw", "efa", "--fabric", "efa-direct", "--raw-op", "write"});
  CHECK(f.fabric == "efa-direct");
}

TEST_CASE("one-sided tests: selection and what they refuse") {
  CHECK(parse({"--test", "one-sided"}).tests ==
        std::vector<TestKind>{TestKind::put, TestKind::get, TestKind::signal});
  Options o = parse({"--test", "signal,put", "--rma-table", "gin13", "--vs-raw", "tcp"});
  CHECK(o.tests == std::vector<TestKind>{TestKind::put, TestKind::signal});
  CHECK(o.rma_table == "gin13");
  CHECK(o.runs_one_sided());
  CHECK_FALSE(o.runs_transfers());
  CHECK(parse({}).rma_table == "rma14");
  auto refused = [](std::vector<const char*> args, const char* text) {
    INFO(text);
    CHECK_THROWS_WITH(parse(args), Catch::Contains(text));
  };
  refused({"--test", "put,bw"}, "--test bw and the one-sided tests");
  refused({"--test", "get,reg"}, "--test reg and the one-sided tests");
  refused({"--test", "put", "--mem", "cuda"}, "host memory only");
  refused({"--test", "put", "--comms", "2"}, "one context");
  refused({"--test", "get", "--rma-table", "gin11"}, "ncclGinPlugin_v11 has no iget");
  refused({"--rma-table", "rma13"}, "--rma-table applies to the one-sided tests");
  refused({"--test", "put", "--vs-raw", "tcp", "--raw-op", "write"}, "choose their own raw");
}

TEST_CASE("bad command lines are usage errors") {
  bad({"--bogus"});
  bad({"--abi", "5"});
  bad({"--abi", "13"});
  bad({"--idle-comms", "-1"});
  bad({"--idle-comms", "100001"});
  bad({"--server", "--client", "h"});
  bad({"--min-bytes", "1M", "--max-bytes", "1K"});
  bad({"--test", "rates"});
  bad({"--test", "bw,"});
  bad({"--step-factor", "1"});
  bad({"--depth", "0"});
  bad({"--port"});
  bad({"--domain", "lo"});     // plugin mode: WEFT_OFI_DOMAIN instead
  bad({"--raw-op", "write"});  // only for raw runs
  bad({"--fabric", "efa"});    // likewise
  bad({"--raw-ofi", "efa", "--fabric", ""});
  bad({"--raw-ofi", "tcp", "--raw-op", "read"});
  bad({"--raw-ofi", "tcp", "--abi", "9"});
  bad({"--raw-ofi", "tcp", "--vs-raw", "tcp"});
  bad({"--comms", "2", "--threads", "3"});
  bad({"--raw-ofi", "tcp", "--raw-op", "write", "--test", "grouped"});
  bad({"--group", "0"});
  bad({"--mem", "gpu"});
  bad({"--test", "reg", "--max-bytes", "0"});
  bad({"--local=yes"});
}

TEST_CASE("mpirun and srun variables pick the role") {
  g_env = {{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "2"},
           {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}};
  Options server = parse({}, fake_env);
  CHECK(server.role == Role::server);
  CHECK(server.launcher == "mpirun (Open MPI)");

  g_env["OMPI_COMM_WORLD_RANK"] = "1";
  bad({}, fake_env);  // across hosts, nobody said where rank 0 is
  g_env["WEFT_PERF_SERVER"] = "node1";
  Options client = parse({}, fake_env);
  CHECK(client.role == Role::client);
  CHECK(client.host == "node1");

  g_env = {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}};
  Options local = parse({}, fake_env);
  CHECK(local.role == Role::client);
  CHECK(local.host == "127.0.0.1");

  g_env = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "gpu-[017-018]"}};
  Options srun = parse({}, fake_env);
  CHECK(srun.role == Role::client);
  CHECK(srun.host == "gpu-017");
  CHECK(srun.launcher == "srun");

  // Explicit roles win over the launcher.
  CHECK(parse({"--local"}, fake_env).role == Role::local);

  g_env = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}};
  bad({}, fake_env);  // exactly two ranks
  g_env = {{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}};
  bad({}, fake_env);
  g_env.clear();
}

TEST_CASE("first host of a Slurm hostlist") {
  CHECK(first_slurm_host("node1") == "node1");
  CHECK(first_slurm_host("node1,node2") == "node1");
  CHECK(first_slurm_host("node[07-09,12],gpu1") == "node07");
  CHECK(first_slurm_host("rack[1-2]-n[3-4]") == "rack1-n3");
  CHECK(first_slurm_host("bad[1-2") == "");
  CHECK(first_slurm_host("") == "");
}

TEST_CASE("reg is a test of its own, left out of all") {
  CHECK(parse({"--test", "reg"}).tests == std::vector<TestKind>{TestKind::reg});
  CHECK(parse({"--test", "reg,latency"}).tests ==
        std::vector<TestKind>{TestKind::latency, TestKind::reg});
  Options all = parse({"--test", "all"});
  CHECK_FALSE(all.runs(TestKind::reg));
  CHECK(all.runs_transfers());
  Options both = parse({"--test", "all,reg"});
  CHECK(both.tests.size() == 6);
  CHECK(both.tests.back() == TestKind::reg);
  CHECK_FALSE(parse({"--test", "reg"}).runs_transfers());
  CHECK(is_transfer_test(TestKind::grouped));
  CHECK_FALSE(is_transfer_test(TestKind::reg));
  CHECK(std::string(test_name(TestKind::reg)) == "reg");
}

TEST_CASE("reg sweeps 4K..1G by 4 unless the sweep options are given") {
  Options d = parse({"--test", "reg"});
  CHECK(size_sweep(d.reg_min_bytes, d.reg_max_bytes, d.reg_step_factor).size() == 10);
  // Transfer sizes keep their own defaults.
  CHECK(d.min_bytes == 8);
  CHECK(d.max_bytes == (size_t{256} << 20));
  Options o =
      parse({"--test", "reg", "--min-bytes", "8K", "--max-bytes", "1M", "--step-factor", "2"});
  CHECK(o.reg_min_bytes == 8192);
  CHECK(o.reg_max_bytes == (size_t{1} << 20));
  CHECK(o.reg_step_factor == 2.0);
  // Only the largest given: the default smallest, unless that is larger.
  CHECK(parse({"--test", "reg", "--max-bytes", "64K"}).reg_min_bytes == 4096);
  CHECK(parse({"--test", "reg", "--max-bytes", "1K"}).reg_min_bytes == 1024);
  CHECK(parse({"--test", "reg", "--min-bytes", "1M"}).reg_max_bytes == (size_t{1} << 30));
}

TEST_CASE("GPU memory options: mem cuda with cuda-lib and dmabuf") {
  Options c = parse({"--mem", "cuda"});
  CHECK(c.mem == MemType::cuda);
  CHECK(c.cuda_lib == "libcuda.so.1");
  CHECK_FALSE(c.dmabuf);
  Options d = parse(
      {"--mem=cuda", "--cuda-lib", "/opt/softcuda/libcuda.so.1", "--dmabuf", "--test", "reg,bw"});
  CHECK(d.mem == MemType::cuda);
  CHECK(d.cuda_lib == "/opt/softcuda/libcuda.so.1");
  CHECK(d.dmabuf);
  CHECK(parse({"--mem", "cuda", "--mem", "host"}).mem == MemType::host);

  bad({"--dmabuf"});  // host memory has no dma-buf
  bad({"--mem", "host", "--dmabuf"});
  bad({"--cuda-lib", "libcuda.so.1"});   // only with --mem cuda
  bad({"--mem", "cuda", "--cuda-lib"});  // needs a value
  bad({"--mem", "cuda", "--cuda-lib="});
  bad({"--mem", "cuda", "--dmabuf=yes"});
  bad({"--mem", "cuda", "--raw-ofi", "tcp"});  // raw runs: host memory only
  bad({"--mem", "cuda", "--vs-raw", "tcp"});
  bad({"--raw-ofi", "tcp", "--test", "reg"});  // reg measures a plugin
  bad({"--vs-raw", "tcp", "--test", "reg"});   // nothing to compare
  CHECK(parse({"--vs-raw", "tcp", "--test", "bw,reg"}).runs(TestKind::reg));
}

TEST_CASE("jobs: patterns, ranks from --local, --server/--client or a launcher") {
  Options local = parse({"--job", "ring,alltoall", "--ranks", "16", "--channels", "8"});
  CHECK(local.job());
  CHECK(local.jobs == std::vector<JobPattern>{JobPattern::ring, JobPattern::alltoall});
  CHECK(local.role == Role::local);
  CHECK(local.ranks == 16);
  CHECK(local.channels == 8);
  CHECK(local.job_bytes == (size_t{256} << 10));
  CHECK(local.job_iters == 20);
  Options sized = parse({"--job", "tree", "--max-bytes", "4K", "--iters", "3", "--max-kib-per-comm",
                         "32", "--max-fds-per-peer", "2.5"});
  CHECK(sized.job_bytes == 4096);
  CHECK(sized.job_iters == 3);
  CHECK(sized.job_max_kib_per_comm == 32);
  CHECK(sized.job_max_fds_per_peer == 2.5);
  Options client = parse({"--job", "ring", "--client", "h", "--rank", "3", "--ranks", "4"});
  CHECK(client.rank == 3);
  CHECK(parse({"--job", "ring", "--server", "--ranks", "4"}).rank == 0);

  bad({"--job", "mesh"});
  bad({"--job", ""});
  bad({"--job", "ring", "--test", "bw"});
  bad({"--job", "ring", "--comms", "2"});
  bad({"--job", "ring", "--raw-ofi", "tcp"});
  bad({"--job", "ring", "--server"});                       // no --ranks
  bad({"--job", "ring", "--client", "h", "--ranks", "4"});  // no --rank
  bad({"--job", "ring", "--client", "h", "--rank", "4", "--ranks", "4"});
  bad({"--job", "ring", "--rank", "1"});  // --local has none
  bad({"--ranks", "4"});                  // not a job
  bad({"--channels", "4"});
  bad({"--max-kib-per-comm", "32"});

  g_env = {{"WEFT_JOB_RANK", "5"}, {"WEFT_JOB_SIZE", "16"}, {"WEFT_PERF_SERVER", "10.0.0.1"}};
  Options launched = parse({"--job", "alltoall"}, fake_env);
  CHECK(launched.launcher == "weft-job");
  CHECK(launched.role == Role::client);
  CHECK(launched.rank == 5);
  CHECK(launched.ranks == 16);
  CHECK(launched.host == "10.0.0.1");
  bad({"--job", "alltoall", "--ranks", "16"}, fake_env);  // the launcher says
  bad({}, fake_env);                                      // the two-rank tests still need exactly 2
  g_env = {{"WEFT_JOB_RANK", "0"}, {"WEFT_JOB_SIZE", "16"}};
  CHECK(parse({"--job", "ring"}, fake_env).role == Role::server);
  g_env.clear();
}
