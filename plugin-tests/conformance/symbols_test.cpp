// How NCCL finds the plugin, as far as it can be observed from outside:
// dlopen(RTLD_NOW | RTLD_LOCAL) succeeds, NCCL takes the newest of
// ncclNetPlugin_v12 (2.30+) or v11 (2.28) down to v6, each symbol is an
// extern "C" data object (the function table), every table carries the same
// non-empty name (NCCL_NET matches on it), and the functions NCCL calls
// without checking are set.
#include <dlfcn.h>
#include <link.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "net_ops.h"
#include "raw_calls.h"
#include "two_rank.h"

using namespace weft;
using namespace weft::ft;

namespace {

// The functions NCCL calls unconditionally. (regMrDmaBuf, iflush,
// getDeviceMr, irecvConsumed, makeVDevice, setNetAttr may be NULL.)
template <class T>
std::string missing_functions(const T* t) {
  std::string m;
  auto need = [&](const void* p, const char* name) {
    if (p == nullptr) m += std::string(" ") + name;
  };
  need(reinterpret_cast<const void*>(t->init), "init");
  need(reinterpret_cast<const void*>(t->devices), "devices");
  need(reinterpret_cast<const void*>(t->getProperties), "getProperties");
  need(reinterpret_cast<const void*>(t->listen), "listen");
  need(reinterpret_cast<const void*>(t->connect), "connect");
  need(reinterpret_cast<const void*>(t->accept), "accept");
  need(reinterpret_cast<const void*>(t->regMr), "regMr");
  need(reinterpret_cast<const void*>(t->deregMr), "deregMr");
  need(reinterpret_cast<const void*>(t->isend), "isend");
  need(reinterpret_cast<const void*>(t->irecv), "irecv");
  need(reinterpret_cast<const void*>(t->test), "test");
  need(reinterpret_cast<const void*>(t->closeSend), "closeSend");
  need(reinterpret_cast<const void*>(t->closeRecv), "closeRecv");
  need(reinterpret_cast<const void*>(t->closeListen), "closeListen");
  if constexpr (requires { t->finalize; })
    need(reinterpret_cast<const void*>(t->finalize), "finalize");
  return m;
}

}  // namespace

TEST_CASE("symbol lookup: versions, data objects, one name, mandatory functions", "[symbols]") {
  std::string error;
  const auto& versions = exported_versions(&error);
  INFO("plugin " << plugin_path());
  INFO(error);
  REQUIRE_FALSE(versions.empty());
  auto r = run_one([&](Rank&) {
    // As NCCL loads it: unresolved symbols fail here, not at first call.
    void* lib = ::dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    FT_REQUIRE(lib != nullptr, "dlopen(RTLD_NOW | RTLD_LOCAL) failed: " << ::dlerror());
    std::string first_name;
    int newest = 0, newest_228 = 0;
    for (int v = 12; v >= 6; --v) {
      const std::string sym = "ncclNetPlugin_v" + std::to_string(v);
      void* p = ::dlsym(lib, sym.c_str());
      if (p == nullptr) continue;
      if (newest == 0) newest = v;
      if (newest_228 == 0 && v <= 11) newest_228 = v;
      Dl_info info;
      void* entry = nullptr;
      FT_REQUIRE(::dladdr1(p, &info, &entry, RTLD_DL_SYMENT) != 0 && entry,
                 sym << ": dladdr1 finds no symbol entry");
      const auto* es = static_cast<const ElfW(Sym)*>(entry);
      FT_REQUIRE(ELF64_ST_TYPE(es->st_info) == STT_OBJECT,
                 sym << ": ELF symbol type " << int(ELF64_ST_TYPE(es->st_info))
                     << ", expected a data object (the function table)");
      // Every version's table starts with `const char* name`.
      const char* name = *static_cast<const char* const*>(p);
      FT_REQUIRE(name != nullptr && *name != '\0', sym << ": name is NULL or empty");
      if (first_name.empty()) first_name = name;
      FT_REQUIRE(first_name == name, sym << ": name '" << name
                                         << "' differs from the newer table's '" << first_name
                                         << "' (NCCL_NET would match one NCCL and not another)");
    }
    ::dlclose(lib);
    FT_REQUIRE(newest == versions.front(), "probe and dlsym disagree");
    std::fprintf(stderr, "[symbols] name '%s'; NCCL 2.30+ picks v%d, NCCL 2.28 picks %s\n",
                 first_name.c_str(), newest,
                 newest_228 ? ("v" + std::to_string(newest_228)).c_str() : "nothing (only v12)");
    // Each exported table, loaded the way NCCL uses it.
    for (int v : versions) {
      auto c = load_plugin(v);
      const std::string m = with_table(*c, [](auto* t) { return missing_functions(t); });
      FT_REQUIRE(m.empty(), "ncclNetPlugin_v" << v << " leaves NULL:" << m);
    }
  });
  REQUIRE_RANKS(r);
}
