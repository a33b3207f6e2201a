// Address handles: a destination GID, numbered per PD as EFA does (the number
// is what efadv_query_ah reports and what an SRD receive completion names
// its sender by). RC QPs take their address at RTR and use none.

#include <cerrno>

#include "ibverbs/api.h"
#include "model/context.h"
#include "model/memory.h"

using namespace softverbs;

SOFTVERBS_API ibv_ah* ibv_create_ah(ibv_pd* verbs_pd, ibv_ah_attr* attr) {
  Pd* pd = owner_of<Pd>(verbs_pd);
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  const DeviceInfo& info = pd->context->info();
  uint8_t port = attr->port_num == 0 ? 1 : attr->port_num;
  // Without a LID fabric the address is the GID: a GRH is mandatory.
  if (port > info.ports.size() || (attr->is_global == 0 && !info.ib)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* ah = new Ah();
  ah->handle.owner = ah;
  ah->pd = pd;
  ah->gid = attr->grh.dgid;
  ah->ahn = pd->add_ah(ah->gid);
  ibv_ah& v = ah->handle.verbs;
  v.context = verbs_pd->context;
  v.pd = verbs_pd;
  v.handle = next_handle();
  pd->users.fetch_add(1);
  return &v;
}

SOFTVERBS_API int ibv_destroy_ah(ibv_ah* verbs_ah) {
  Ah* ah = owner_of<Ah>(verbs_ah);
  if (ah == nullptr) return EINVAL;
  ah->pd->remove_ah(ah->ahn);
  ah->pd->users.fetch_sub(1);
  delete ah;
  return 0;
}
