// Port attributes, for ibv_query_port and verbs_context.query_port.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>

namespace softverbs {

// verbs_context.query_port: the whole ibv_port_attr, up to `len` bytes.
int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len);

}  // namespace softverbs
