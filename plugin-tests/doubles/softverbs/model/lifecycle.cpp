// Opening and closing devices: the process's one NIC starts at the first
// open and stops at the last close, or when the library unloads.

#include "lifecycle.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <vector>

#include "counters.h"
#include "env.h"
#include "nic.h"
#include "registry.h"

namespace softverbs {

namespace {

struct Global {
  std::mutex mu;
  std::vector<std::shared_ptr<Context>> contexts;
  std::unique_ptr<Nic> nic;
  pid_t nic_pid = 0;
  // QPs a closed device still had: kept so that stale pointers stay valid.
  std::vector<std::shared_ptr<Qp>> orphans;
};

Global& global() {
  static Global* g = new Global();  // never destroyed: used at exit
  return *g;
}

// Runs at exit or unload: no NIC thread, socket or file may outlive the
// library.
struct Finalizer {
  Finalizer() = default;
  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;
  ~Finalizer() {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.nic && g.nic_pid == getpid()) {
      log("unloaded with %zu devices open", g.contexts.size());
      write_counters_file();
      for (auto& context : g.contexts) {
        std::lock_guard<std::mutex> clock(context->mu);
        if (!context->closed && context->async_fd >= 0) close(context->async_fd);
        context->closed = true;
        context->async_fd = -1;
      }
      // Stopped but kept: a later static destructor elsewhere may still call
      // ibv_destroy_qp or ibv_close_device on what it holds.
      g.nic->shutdown();
      (void)g.nic.release();
    }
    remove_sysfs();
  }
};

Finalizer g_finalizer;

std::atomic<ContextExtension> g_extension{nullptr};

}  // namespace

void set_context_extension(ContextExtension extension) {
  g_extension = extension;
}

ContextExtension context_extension() {
  return g_extension;
}

Context* open_context(Device* device) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.nic && g.nic_pid != getpid()) {
    // Inherited through fork: the parent's NIC thread does not exist here.
    (void)g.nic.release();
    (void)new std::vector<std::shared_ptr<Context>>(std::move(g.contexts));
    g.contexts.clear();
  }
  if (!g.nic) {
    g.nic = Nic::start();
    if (!g.nic) {
      if (errno == 0) errno = EIO;
      return nullptr;
    }
    g.nic_pid = getpid();
  }
  auto context = std::make_shared<Context>();
  context->handle.owner = context.get();
  context->device = device;
  context->nic = g.nic.get();
  context->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (context->async_fd < 0) {
    if (g.contexts.empty()) g.nic.reset();  // nothing else keeps the NIC
    return nullptr;
  }
  context->port_down = std::make_unique<std::atomic<bool>[]>(device->info.ports.size());
  context->reorder_window = static_cast<int>(std::max(0L, env_long("SOFTVERBS_REORDER", 0)));
  context->reorder_seed = static_cast<uint64_t>(env_long("SOFTVERBS_REORDER_SEED", 1));
  verbs_context& vctx = context->handle.verbs;
  vctx.sz = sizeof(verbs_context);
  ibv_context& c = vctx.context;
  c.device = &device->handle.verbs;
  c.cmd_fd = -1;
  c.async_fd = context->async_fd;
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  long port_down_ms = env_long("SOFTVERBS_FAULT_PORT_DOWN_MS", 0);
  if (port_down_ms > 0) g.nic->port_down_after(context, port_down_ms);
  g.contexts.push_back(context);
  log("open %s: context %p, %zu open", device->info.name.c_str(), static_cast<void*>(&c),
      g.contexts.size());
  return context.get();
}

int close_context(Context* context) {
  if (context == nullptr) return EINVAL;
  Global& g = global();
  std::unique_ptr<Nic> stopped;
  std::shared_ptr<Context> keep;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = std::find_if(g.contexts.begin(), g.contexts.end(),
                           [&](const std::shared_ptr<Context>& c) { return c.get() == context; });
    if (it == g.contexts.end()) return EINVAL;
    keep = *it;
    g.contexts.erase(it);
    // Inherited through fork, or already stopped at exit: nothing to stop.
    if (!g.nic || g.nic_pid != getpid()) return 0;
    for (auto& qp : g.nic->all_qps()) {
      if (qp->context.get() != context) continue;
      {
        std::lock_guard<std::mutex> qlock(qp->mu);
        qp->destroyed = true;
        qp->sq.clear();
        qp->rq.clear();
      }
      registry_remove_qp(qp->qpn);
      g.nic->remove_qp(qp->qpn);
      g.orphans.push_back(qp);
    }
    {
      std::lock_guard<std::mutex> clock(context->mu);
      close(context->async_fd);
      context->async_fd = -1;
      context->closed = true;
      pthread_mutex_destroy(&context->handle.verbs.context.mutex);
    }
    log("close %s: context %p, %zu open", context->info().name.c_str(),
        static_cast<void*>(context->verbs()), g.contexts.size());
    if (g.contexts.empty()) {
      write_counters_file();
      stopped = std::move(g.nic);
    }
  }
  stopped.reset();  // joins the NIC thread, closes its sockets
  return 0;
}

std::shared_ptr<Context> shared_context(const Context* context) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& c : g.contexts) {
    if (c.get() == context) return c;
  }
  return nullptr;
}

}  // namespace softverbs
