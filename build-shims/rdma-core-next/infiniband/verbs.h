/*
 * Debian's rdma-core 44 verbs.h plus the ibv_query_qp_data_in_order flags
 * and capabilities that newer rdma-core declares (the function itself is in
 * 44's libibverbs). Lets libfabric's efa provider ask for 128-byte aligned
 * in-order delivery; see efadv.h beside this file.
 */
#ifndef WEFT_VERBS_NEXT_H
#define WEFT_VERBS_NEXT_H

#include_next <infiniband/verbs.h>

enum {
	IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS = 1 << 0,
};

enum {
	IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG = 1 << 0,
	IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES = 1 << 1,
};

#endif /* WEFT_VERBS_NEXT_H */
