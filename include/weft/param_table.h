// The one table of weft's parameters. Every WEFT_* variable is declared
// here and nowhere else; docs/configuration.md is generated from it.
//
// WEFT_PARAM(member, ENV_NAME, type, default, min, max, doc)
//   type: Bool | Int | Size | String; min/max bound Int and Size (ignored otherwise)
// WEFT_PARAM_ENUM(member, ENV_NAME, default, "a|b|c", doc)
#pragma once

#define WEFT_PARAM_TABLE(WEFT_PARAM, WEFT_PARAM_ENUM)                                              \
  WEFT_PARAM_ENUM(transport, "WEFT_TRANSPORT", "auto", "auto|ofi|verbs",                           \
                  "Transport to use. auto prefers EFA through libfabric, then native verbs on "    \
                  "InfiniBand/RoCE devices, then other RDMA-class libfabric providers.")           \
  WEFT_PARAM(ofi_provider, "WEFT_OFI_PROVIDER", String, "", 0, 0,                                  \
             "libfabric provider to use (tcp, shm, udp, efa, verbs, cxi, psm3, ...). Empty: "      \
             "auto, RDMA-class providers only.")                                                   \
  WEFT_PARAM(ofi_domain, "WEFT_OFI_DOMAIN", String, "", 0, 0,                                      \
             "Comma-separated libfabric domain names to use (e.g. lo, eth0, efa_0); a leading "    \
             "^ excludes them instead. Empty: all.")                                               \
  WEFT_PARAM_ENUM(ofi_protocol, "WEFT_OFI_PROTOCOL", "auto", "auto|tagged|rdma",                   \
                  "Data protocol on libfabric. rdma: the receiver sends a clear-to-send and the "  \
                  "sender writes the data with fi_writedata (needs FI_RMA with remote CQ data); "  \
                  "tagged: two-sided tagged messages; auto: rdma on RDMA-class providers that "    \
                  "offer it (efa, verbs;ofi_rxm), tagged otherwise. Both sides must agree.")       \
  WEFT_PARAM_ENUM(                                                                                 \
      ofi_tag_matching, "WEFT_OFI_TAG_MATCHING", "auto", "auto|provider|weft",                     \
      "rdma protocol: who matches its connection, clear-to-send and eager messages. "              \
      "provider: libfabric's tagged messages; weft: plain messages with the tag in "               \
      "remote CQ data, matched by weft (what efa's efa-direct fabric needs: it has no "            \
      "FI_TAGGED); auto: weft on efa where libfabric offers efa-direct, provider "                 \
      "elsewhere. Both sides must agree.")                                                         \
  WEFT_PARAM(ofi_eager_size, "WEFT_OFI_EAGER_SIZE", Size, "8192", 0, 1048576,                      \
             "rdma protocol: messages up to this size go at once, without waiting for the "        \
             "receiver's clear-to-send, into its posted receive or, until that is posted, a "      \
             "bounce buffer (0: only empty messages).")                                            \
  WEFT_PARAM(ofi_eager_buffers, "WEFT_OFI_EAGER_BUFFERS", Int, "8", 1, 255,                        \
             "rdma protocol: bounce buffers a receive comm keeps posted for eager messages that "  \
             "come before their receive. It starts with 2 and takes the rest once eager "          \
             "messages fill every one at once.")                                                   \
  WEFT_PARAM(ofi_control_sends, "WEFT_OFI_CONTROL_SENDS", Int, "256", 64, 4096,                    \
             "rdma protocol, where the provider cannot inject them (tcp;ofi_rxm): "                \
             "clear-to-sends on their way at once per endpoint, all comms together. Each holds "   \
             "a registered copy, and the provider a send buffer, until it completes; more wait "   \
             "for a later call.")                                                                  \
  WEFT_PARAM_ENUM(rail_grouping, "WEFT_RAIL_GROUPING", "pci", "pci|all|off",                       \
                  "Which NICs weft reports to NCCL as one multi-rail device. pci: the ports "      \
                  "(PCI functions) of one card, as NCCL's NIC fusion does; all: every NIC of "     \
                  "one provider, up to 8 (software rails, tests); off: each NIC alone. NCCL "      \
                  "may merge devices further through makeVDevice.")                                \
  WEFT_PARAM(min_stripe_size, "WEFT_MIN_STRIPE_SIZE", Size, "131072", 1, 1073741824,               \
             "Multi-rail devices: a message is split across rails only into stripes of at "        \
             "least this many bytes; smaller messages take the rails in turn.")                    \
  WEFT_PARAM(ofi_test_reorder, "WEFT_OFI_TEST_REORDER", Int, "0", 0, 4096,                         \
             "Test aid: hold up to this many completions per endpoint and deliver them in a "      \
             "shuffled order, as EFA's unordered transport may (0: off).")                         \
  WEFT_PARAM(ofi_test_reorder_seed, "WEFT_OFI_TEST_REORDER_SEED", Int, "1", 1, 2147483647,         \
             "Seed of WEFT_OFI_TEST_REORDER's shuffle.")                                           \
  WEFT_PARAM(ofi_test_message_signals, "WEFT_OFI_TEST_MESSAGE_SIGNALS", Bool, "0", 0, 1,           \
             "Test aid: one-sided signals travel as messages, as on providers without remote "    \
             "atomics, even where the provider has them.")                                         \
  WEFT_PARAM(ofi_test_hold_injects, "WEFT_OFI_TEST_HOLD_INJECTS", Bool, "0", 0, 1,                 \
             "Test aid: hold an inject made while a send of the endpoint is in flight until the "  \
             "poll after the one that read that send's completion, as libfabric's tcp provider "   \
             "may; senders then inject nothing.")                                                  \
  WEFT_PARAM(ofi_test_hostile, "WEFT_OFI_TEST_HOSTILE", String, "", 0, 0,                          \
             "Test aid: play a hostile peer that changes one field of every message of one kind "  \
             "it sends on the data path (cts-slot, cts-sequence, cts-first-index, cts-rails, "     \
             "cts-count, cts-size, cts-key, cts-address, cts-tag, eager-index, eager-tag, "        \
             "write-slot, write-entry, write-segments, write-oversize, tagged-size). Never set "   \
             "it in a job: the peer fails the connection.")                                        \
  WEFT_PARAM(ofi_cq_read_count, "WEFT_OFI_CQ_READ_COUNT", Int, "16", 1, 256,                       \
             "Completions read from the completion queue per poll.")                               \
  WEFT_PARAM(ofi_cq_size, "WEFT_OFI_CQ_SIZE", Int, "8192", 64, 1048576,                            \
             "Completion queue depth per endpoint.")                                               \
  WEFT_PARAM(close_timeout_ms, "WEFT_CLOSE_TIMEOUT_MS", Int, "2000", 0, 600000,                    \
             "How long closing a comm waits for requests still in flight before it abandons "      \
             "them to the endpoint (ms).")                                                         \
  WEFT_PARAM(connect_timeout_ms, "WEFT_CONNECT_TIMEOUT_MS", Int, "300000", 1, 86400000,            \
             "How long connect waits for the listener's answer before it fails with an error "     \
             "naming the peer (ms).")                                                              \
  WEFT_PARAM(peer_timeout_ms, "WEFT_PEER_TIMEOUT_MS", Int, "10000", 0, 3600000,                    \
             "How long a peer's host may stay silent (TCP keepalive on the liveness link between " \
             "two weft processes, at least 3 s) before its comms fail; a peer process that dies "  \
             "is noticed within about a second whatever this says. Also how long (at least 3 s) "  \
             "rail 0 may take to carry the probe that an rdma-protocol send sends after waiting "  \
             "a second for its clear-to-send, so a rail that died idle fails the comm. 0: no "     \
             "keepalive, no liveness links (the verbs transport then keeps each comm's side "      \
             "channel open) and no probes.")                                                       \
  WEFT_PARAM(max_p2p_bytes, "WEFT_MAX_P2P_BYTES", Size, "0", 0, 1099511627776,                     \
             "Largest single message reported to NCCL (maxP2pBytes). 0: the provider's limit, "    \
             "capped at 1 TiB.")                                                                   \
  WEFT_PARAM(default_speed_mbps, "WEFT_DEFAULT_SPEED_MBPS", Int, "100000", 1, 100000000,           \
             "Speed reported to NCCL for devices whose link speed is unknown (lo, veth and "       \
             "other virtual interfaces), in Mbps.")                                                \
  WEFT_PARAM_ENUM(gpu, "WEFT_GPU", "auto", "auto|off",                                             \
                  "GPU memory support. auto: load the CUDA driver and register GPU buffers "       \
                  "where the provider can; off: host memory only.")                                \
  WEFT_PARAM(cuda_lib, "WEFT_CUDA_LIB", String, "libcuda.so.1", 0, 0,                              \
             "CUDA driver library loaded at run time (soname or path).")                           \
  WEFT_PARAM_ENUM(topo_file, "WEFT_TOPO_FILE", "auto", "auto|off",                                 \
                  "NCCL topology file. auto: at init, when NCCL_TOPO_FILE is unset, no GPU "       \
                  "shares a host bridge with weft's NICs and a row of the instance table "         \
                  "matches this node (docs/topology.md), write that row's layout to a memory "     \
                  "file and point NCCL_TOPO_FILE at it (logged at INFO); off: never.")             \
  WEFT_PARAM(sysfs_root, "WEFT_SYSFS_ROOT", String, "/sys", 0, 0,                                  \
             "Where the topology file's PCI tree, NUMA nodes and DMI identity are read: the "      \
             "host's sysfs mounted elsewhere in a container, or a recorded tree.")                 \
  WEFT_PARAM(dmabuf, "WEFT_DMABUF", Bool, "1", 0, 0,                                               \
             "Offer dma-buf registration of GPU memory (NCCL_PTR_DMABUF) where libfabric, the "    \
             "provider and the GPU support it.")                                                   \
  WEFT_PARAM(mr_cache, "WEFT_MR_CACHE", Bool, "1", 0, 0,                                           \
             "Share registrations of the same pages per domain (reference-counted). 0: every "     \
             "regMr registers anew.")                                                              \
  WEFT_PARAM(mr_cache_max_entries, "WEFT_MR_CACHE_MAX_ENTRIES", Int, "65536", 1, 16777216,         \
             "Most distinct registrations the cache holds per domain; beyond that regMr "          \
             "registers without caching.")                                                         \
  WEFT_PARAM_ENUM(gdr_flush, "WEFT_GDR_FLUSH", "auto", "auto|read|cuda|off",                       \
                  "How iflush makes GPU receives visible: read (a small fi_read from the "         \
                  "buffer), cuda (cuFlushGPUDirectRDMAWrites), auto (read where the provider "     \
                  "has RMA, else cuda), off (no flush). NCCL_GDR_FLUSH_DISABLE=1 means off.")      \
  WEFT_PARAM(force_flush, "WEFT_FORCE_FLUSH", Bool, "0", 0, 0,                                     \
             "Report forceFlush to NCCL (v9+), so it flushes every GPU receive even on GPUs "      \
             "where it normally would not.")                                                       \
  WEFT_PARAM(ibverbs_lib, "WEFT_IBVERBS_LIB", String, "libibverbs.so.1", 0, 0,                     \
             "verbs transport: the libibverbs library loaded at run time (soname or path).")       \
  WEFT_PARAM(ib_hca, "WEFT_IB_HCA", String, "", 0, 0,                                              \
             "verbs transport: devices and ports to use, in NCCL_IB_HCA syntax (mlx5_0:1,mlx5_1; " \
             "^ excludes; = matches names exactly). Empty: every active port.")                    \
  WEFT_PARAM(ib_gid_index, "WEFT_IB_GID_INDEX", Int, "-1", -1, 1023,                               \
             "verbs transport, RoCE: GID index to use. -1: choose by WEFT_IB_ROCE_VERSION_NUM, "   \
             "WEFT_IB_ADDR_FAMILY and WEFT_IB_ADDR_RANGE.")                                        \
  WEFT_PARAM_ENUM(ib_addr_family, "WEFT_IB_ADDR_FAMILY", "AF_INET", "AF_INET|AF_INET6",            \
                  "verbs transport, RoCE: address family of the GID chosen automatically.")        \
  WEFT_PARAM(ib_addr_range, "WEFT_IB_ADDR_RANGE", String, "", 0, 0,                                \
             "verbs transport, RoCE: only GIDs inside this subnet (10.1.0.0/16, fd00::/64). "      \
             "Empty: any.")                                                                        \
  WEFT_PARAM(ib_roce_version_num, "WEFT_IB_ROCE_VERSION_NUM", Int, "2", 1, 2,                      \
             "verbs transport, RoCE: GID type chosen automatically (1: RoCE v1, 2: RoCE v2).")     \
  WEFT_PARAM(ib_tc, "WEFT_IB_TC", Int, "0", 0, 255,                                                \
             "verbs transport: traffic class of the queue pairs (RoCE: DSCP << 2), unless the "    \
             "communicator's config sets one.")                                                    \
  WEFT_PARAM(ib_sl, "WEFT_IB_SL", Int, "0", 0, 15, "verbs transport: service level.")              \
  WEFT_PARAM(ib_timeout, "WEFT_IB_TIMEOUT", Int, "20", 1, 31,                                      \
             "verbs transport: queue pair ack timeout exponent (4.096 us x 2^n per try).")         \
  WEFT_PARAM(ib_retry_cnt, "WEFT_IB_RETRY_CNT", Int, "7", 0, 7,                                    \
             "verbs transport: retries before a lost packet fails the connection.")                \
  WEFT_PARAM(ib_qps_per_connection, "WEFT_IB_QPS_PER_CONNECTION", Int, "1", 1, 16,                 \
             "verbs transport: queue pairs per connection (more spread traffic over more paths "   \
             "and adaptive-routing lanes).")                                                       \
  WEFT_PARAM(ib_split_data_on_qps, "WEFT_IB_SPLIT_DATA_ON_QPS", Bool, "0", 0, 0,                   \
             "verbs transport: split every message over all queue pairs of the connection "        \
             "(128-byte aligned) instead of giving each message to the next one in turn.")         \
  WEFT_PARAM(ib_adaptive_routing, "WEFT_IB_ADAPTIVE_ROUTING", Int, "-1", -1, 1,                    \
             "verbs transport: adaptive-routing-safe sends (data by RDMA write, then a separate "  \
             "0-byte write with immediate). -1: on for InfiniBand, off for RoCE.")                 \
  WEFT_PARAM(ib_ar_threshold, "WEFT_IB_AR_THRESHOLD", Size, "8192", 0, 1099511627776,              \
             "verbs transport: with adaptive routing, messages of at least this size use the "     \
             "separate write with immediate.")                                                     \
  WEFT_PARAM(ib_pkey, "WEFT_IB_PKEY", Int, "0", 0, 65535,                                          \
             "verbs transport, InfiniBand: partition key index of the queue pairs.")               \
  WEFT_PARAM(ib_use_inline, "WEFT_IB_USE_INLINE", Bool, "0", 0, 0,                                 \
             "verbs transport: put messages that fit the queue pair's inline limit into the "      \
             "work request itself.")                                                               \
  WEFT_PARAM(ib_ece_enable, "WEFT_IB_ECE_ENABLE", Bool, "1", 0, 0,                                 \
             "verbs transport: negotiate Enhanced Connection Establishment options between the "   \
             "two queue pairs (ibv_query_ece/ibv_set_ece) where the device offers them.")          \
  WEFT_PARAM(ib_relaxed_ordering, "WEFT_IB_RELAXED_ORDERING", Bool, "1", 0, 0,                     \
             "verbs transport: register memory with PCIe relaxed ordering where rdma-core "        \
             "offers it (ibv_reg_mr_iova2).")                                                      \
  WEFT_PARAM(socket_ifname, "WEFT_SOCKET_IFNAME", String, "", 0, 0,                                \
             "Network interfaces for the verbs transport's connection side channel and the "       \
             "liveness links, in NCCL_SOCKET_IFNAME syntax (prefixes; ^ excludes; = exact). "      \
             "Empty: the first up, non-loopback interface.")                                       \
  WEFT_PARAM_ENUM(net_profiler, "WEFT_NET_PROFILER", "auto", "auto|on|off",                        \
                  "Network events for NCCL's profiler (net ABI v10+): each isend and each "        \
                  "receive of an irecv starts an event under NCCL's proxy step and stops it when " \
                  "test() reports it done (IB v1 \"Qp\" events, docs/profiler.md). auto: on when " \
                  "NCCL_PROFILER_PLUGIN names a profiler; off costs nothing per message.")         \
  WEFT_PARAM_ENUM(debug, "WEFT_DEBUG", "WARN", "NONE|WARN|INFO|TRACE",                             \
                  "Log level on stderr when weft runs outside NCCL (tools, tests). Inside NCCL, "  \
                  "NCCL_DEBUG decides.")
