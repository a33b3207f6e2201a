// The one table of weft's parameters. Every WEFT_* variable is declared
// here and nowhere else; docs/configuration.md is generated from it.
//
// WEFT_PARAM(member, ENV_NAME, type, default, min, max, doc)
//   type: Bool | Int | Size | String; min/max bound Int and Size (ignored otherwise)
// WEFT_PARAM_ENUM(member, ENV_NAME, default, "a|b|c", doc)
#pragma once

#define WEFT_PARAM_TABLE(WEFT_PARAM, WEFT_PARAM_ENUM)                                             \
  WEFT_PARAM_ENUM(transport, "WEFT_TRANSPORT", "auto", "auto|ofi|verbs",                          \
                  "Transport to use. auto prefers EFA through libfabric, then other RDMA-class "  \
                  "libfabric providers.")                                                         \
  WEFT_PARAM(ofi_provider, "WEFT_OFI_PROVIDER", String, "", 0, 0,                                 \
             "libfabric provider to use (tcp, shm, udp, efa, verbs, cxi, psm3, ...). Empty: "     \
             "auto, RDMA-class providers only.")                                                  \
  WEFT_PARAM(ofi_domain, "WEFT_OFI_DOMAIN", String, "", 0, 0,                                     \
             "Comma-separated libfabric domain names to use (e.g. lo, eth0, efa_0); a leading "   \
             "^ excludes them instead. Empty: all.")                                              \
  WEFT_PARAM(ofi_cq_read_count, "WEFT_OFI_CQ_READ_COUNT", Int, "16", 1, 256,                      \
             "Completions read from the completion queue per poll.")                              \
  WEFT_PARAM(ofi_cq_size, "WEFT_OFI_CQ_SIZE", Int, "8192", 64, 1048576,                           \
             "Completion queue depth per endpoint.")                                              \
  WEFT_PARAM(close_timeout_ms, "WEFT_CLOSE_TIMEOUT_MS", Int, "2000", 0, 600000,                   \
             "How long closing a comm waits for requests still in flight before it abandons "     \
             "them to the endpoint (ms).")                                                        \
  WEFT_PARAM(connect_timeout_ms, "WEFT_CONNECT_TIMEOUT_MS", Int, "300000", 1, 86400000,           \
             "How long connect waits for the listener's answer before it fails with an error "    \
             "naming the peer (ms).")                                                             \
  WEFT_PARAM(max_p2p_bytes, "WEFT_MAX_P2P_BYTES", Size, "0", 0, 1099511627776,                    \
             "Largest single message reported to NCCL (maxP2pBytes). 0: the provider's limit, "   \
             "capped at 1 TiB.")                                                                  \
  WEFT_PARAM_ENUM(debug, "WEFT_DEBUG", "WARN", "NONE|WARN|INFO|TRACE",                            \
                  "Log level on stderr when weft runs outside NCCL (tools, tests). Inside NCCL, " \
                  "NCCL_DEBUG decides.")
