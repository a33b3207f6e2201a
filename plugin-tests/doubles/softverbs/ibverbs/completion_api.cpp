// Completion queues, completion channels and their events.

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "ibverbs/api.h"
#include "model/completion.h"
#include "model/context.h"
#include "model/device.h"
#include "model/limits.h"

using namespace softverbs;

SOFTVERBS_API ibv_comp_channel* ibv_create_comp_channel(ibv_context* verbs_ctx) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* channel = new Channel();
  channel->handle.owner = channel;
  channel->handle.verbs.context = verbs_ctx;
  channel->handle.verbs.fd = fd;
  return &channel->handle.verbs;
}

SOFTVERBS_API int ibv_destroy_comp_channel(ibv_comp_channel* verbs_channel) {
  Channel* channel = owner_of<Channel>(verbs_channel);
  if (channel == nullptr) return EINVAL;
  if (channel->users.load() > 0) return EBUSY;
  delete channel;
  return 0;
}

SOFTVERBS_API ibv_cq* ibv_create_cq(ibv_context* verbs_ctx, int cqe, void* cq_context,
                                    ibv_comp_channel* verbs_channel, int comp_vector) {
  Context* context = context_of(verbs_ctx);
  if (context == nullptr || cqe < 1 || cqe > device_limits().max_cqe || comp_vector < 0 ||
      comp_vector >= verbs_ctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  if (!take_object(LimitedObject::kCq)) return nullptr;
  auto* cq = new Cq();
  cq->counted = true;
  cq->handle.owner = cq;
  cq->context = context;
  cq->channel = owner_of<Channel>(verbs_channel);
  if (cq->channel != nullptr) cq->channel->users.fetch_add(1);
  cq->depth = cqe;
  cq->reorder_window = context->reorder_window;
  cq->rng.seed(context->reorder_seed);
  ibv_cq& v = *cq->verbs();
  v.context = verbs_ctx;
  v.channel = verbs_channel;
  v.cq_context = cq_context;
  v.handle = next_handle();
  v.cqe = cqe;
  pthread_mutex_init(&v.mutex, nullptr);
  pthread_cond_init(&v.cond, nullptr);
  return &v;
}

SOFTVERBS_API int ibv_destroy_cq(ibv_cq* verbs_cq) {
  Cq* cq = cq_of(verbs_cq);
  if (cq == nullptr) return EINVAL;
  if (cq->users.load() > 0) return EBUSY;
  if (cq->channel != nullptr) cq->channel->users.fetch_sub(1);
  if (cq->counted) release_object(LimitedObject::kCq);
  pthread_mutex_destroy(&verbs_cq->mutex);
  pthread_cond_destroy(&verbs_cq->cond);
  delete cq;
  return 0;
}

SOFTVERBS_API int ibv_get_cq_event(ibv_comp_channel* verbs_channel, ibv_cq** cq,
                                   void** cq_context) {
  Channel* channel = owner_of<Channel>(verbs_channel);
  uint64_t v = 0;
  if (read(verbs_channel->fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
  std::lock_guard<std::mutex> lock(channel->mu);
  if (channel->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  Cq* c = channel->events.front();
  channel->events.pop_front();
  *cq = c->verbs();
  *cq_context = c->verbs()->cq_context;
  return 0;
}

SOFTVERBS_API void ibv_ack_cq_events(ibv_cq* /*cq*/, unsigned int /*nevents*/) {}
