// Streams and events: bookkeeping only, since all work is synchronous.

#include "driver/streams.h"

#include <mutex>
#include <set>

#include "driver/api.h"
#include "driver/contexts.h"
#include "driver/ranges.h"
#include "driver/trace.h"

namespace softcuda {

namespace {

std::set<CUstream_st*> g_streams;
std::set<CUevent_st*> g_events;

bool valid_event(CUevent e) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_events.count(e) != 0;
}

}  // namespace

bool valid_stream(CUstream s) {
  if (s == nullptr) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_streams.count(s) != 0;
}

}  // namespace softcuda

using namespace softcuda;

SOFTCUDA_API CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  Trace t("cuStreamCreate", "flags=%u", flags);
  REQUIRE_INIT(t);
  if (stream == nullptr || flags > 1) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  auto* s = new CUstream_st{dev};
  std::lock_guard<std::mutex> lock(g_mu);
  g_streams.insert(s);
  *stream = s;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuStreamDestroy_v2(CUstream stream) {
  Trace t("cuStreamDestroy_v2", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_streams.erase(stream) == 0) return t(CUDA_ERROR_INVALID_HANDLE);
  delete stream;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuStreamDestroy(CUstream stream) {
  return cuStreamDestroy_v2(stream);
}

SOFTCUDA_API CUresult cuStreamSynchronize(CUstream stream) {
  Trace t("cuStreamSynchronize", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuStreamQuery(CUstream stream) {
  Trace t("cuStreamQuery", "stream=%p", static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  Trace t("cuEventCreate", "flags=%u", flags);
  REQUIRE_INIT(t);
  if (event == nullptr || flags > 0xf) return t(CUDA_ERROR_INVALID_VALUE);
  int dev = 0;
  CUresult r = current_device(&dev);
  if (r != CUDA_SUCCESS) return t(r);
  auto* e = new CUevent_st{dev};
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.insert(e);
  *event = e;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuEventDestroy_v2(CUevent event) {
  Trace t("cuEventDestroy_v2", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_events.erase(event) == 0) return t(CUDA_ERROR_INVALID_HANDLE);
  delete event;
  return t(CUDA_SUCCESS);
}

SOFTCUDA_API CUresult cuEventDestroy(CUevent event) {
  return cuEventDestroy_v2(event);
}

SOFTCUDA_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  Trace t("cuEventRecord", "event=%p, stream=%p", static_cast<void*>(event),
          static_cast<void*>(stream));
  REQUIRE_INIT(t);
  return t(valid_event(event) && valid_stream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventSynchronize(CUevent event) {
  Trace t("cuEventSynchronize", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  return t(valid_event(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

SOFTCUDA_API CUresult cuEventQuery(CUevent event) {
  Trace t("cuEventQuery", "event=%p", static_cast<void*>(event));
  REQUIRE_INIT(t);
  return t(valid_event(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}
