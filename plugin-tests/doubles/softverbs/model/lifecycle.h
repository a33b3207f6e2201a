// Opening and closing devices: the process's one NIC starts at the first
// open and stops at the last close, or when the library unloads.
#pragma once

#include <memory>

#include "context.h"
#include "device.h"

namespace softverbs {

// Opens `device` for this process. The context's verbs struct describes the
// device; its ops are the caller's to fill. nullptr (errno set) on failure.
Context* open_context(Device* device);
// Closes an open context and destroys its QPs; 0 or EINVAL.
int close_context(Context* context);
// The owning pointer of an open context (empty when it is not open).
std::shared_ptr<Context> shared_context(const Context* context);

// A second personality linked into the library (EFA) fills its own ops on
// each context ibv_open_device opens.
using ContextExtension = void (*)(Context* context);
void set_context_extension(ContextExtension extension);
ContextExtension context_extension();

}  // namespace softverbs
