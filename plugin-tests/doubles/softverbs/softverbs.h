// softverbs: a software test double of rdma-core's libibverbs.so.1, for
// machines without an RDMA NIC. A fixture only, never installed.
//
// The build produces libibverbs.so.1 (SONAME libibverbs.so.1, the real
// library's symbol versions) in its own directory; CMake exposes its full path
// as the GLOBAL property WEFT_SOFTVERBS_LIB and the target as `softverbs`.
// Load it with dlopen (weft: WEFT_IBVERBS_LIB=<path>) or link it directly.
// ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are inline
// in <infiniband/verbs.h> and call through ibv_context.ops, which softverbs
// fills; everything else is an exported ibv_* function.
//
// Model. Each process that opens a device runs one "NIC" thread (started at
// the first ibv_open_device, joined at the last ibv_close_device). Traffic
// between processes travels over Unix stream sockets in the registry
// directory, so processes in different network namespaces can talk as long
// as they share the filesystem. Only RC queue pairs exist. The target NIC
// checks rkey, bounds and access flags, consumes posted receives in order,
// answers RNR NAKs, and reports errors as completions the way real devices
// do. A QP's operations execute at the target in posting order, and each
// requester completion follows the target's acknowledgement. Completions of
// one QP reach the CQ in order.
//
// Registry (SOFTVERBS_DIR, default /tmp/softverbs-<uid>, created on demand):
//   sysfs/class/infiniband_verbs/abi_version  softefa: what SYSFS_PATH names
//   qp-<qpn>               one per QP of every process using the directory
//                          (QP numbers are unique across them): owner pid,
//                          NIC socket, the device's port addresses (LID,
//                          GIDs). Files of dead pids are reclaimed.
//   nic-<pid>-<nonce>.sock the NIC socket of a process
//   sys-<pid>-<nonce>/<dev> the fake sysfs directory behind ibv_device's
//                          ibdev_path: node_guid, device -> PCI path (only
//                          when configured; softefa: always, to a fake
//                          devices/pci0000:00/<bdf> whose driver is
//                          bus/pci/drivers/efa), ports/<p>/{state,rate,
//                          link_layer,lid,gids/<i>,gid_attrs/types/<i>,
//                          gid_attrs/ndevs/<i>} (types: "IB/RoCE v1" or
//                          "RoCE v2"; files only for populated GIDs).
//
// Devices, read at ibv_get_device_list:
//   SOFTVERBS_DEVICES=N      devices softverbs0..N-1 (default 1, at most 16)
//   SOFTVERBS_PORTS=P        ports per device (default 1, at most 4)
//   SOFTVERBS_LINK=eth|ib    link layer (default eth: RoCE). eth GID table,
//                            like rxe's: 0 fe80::<guid> RoCE v1, 1 the same
//                            RoCE v2, then ::ffff:a.b.c.d v1/v2 for each IPv4
//                            address of the netdev, then each global IPv6
//                            address v1/v2. ib: 0 fe80::<port guid> (type IB)
//                            and a nonzero LID distinct per device and port.
//   SOFTVERBS_NETDEV=a[,b]   interface behind device i (default: the first
//                            non-loopback interface that is up with an IPv4
//                            address, else lo; the last name repeats)
//   SOFTVERBS_SPEED=code     ibv_port_attr.active_speed (default 32: EDR)
//   SOFTVERBS_WIDTH=code     active_width (default 2: 4x) -> 100 Gb/s
//   SOFTVERBS_MTU=bytes      active_mtu, 256..4096 (default 1024 on eth as
//                            rxe, 4096 on ib); max_mtu is 4096
//   SOFTVERBS_NODE_ID=s      mixed into the node GUIDs (default: the host
//                            name), for "hosts" that share a host name
//   SOFTVERBS_PCI_PATHS=p0,p1 or SOFTVERBS_PCI_PATH_<i>=p: target of
//                            <ibdev_path>/device (no such entry when unset)
//   SOFTVERBS_FORK=disabled  ibv_is_fork_initialized answers DISABLED (or
//                            enabled: ENABLED; default UNNEEDED)
//   SOFTVERBS_DMABUF=0       ibv_reg_dmabuf_mr fails with EOPNOTSUPP
//                            (default 1: fd -1 gives EBADF, as NCCL probes)
//   SOFTVERBS_ECE=options    Enhanced Connection Establishment: a QP created
//                            now offers these option bits (ibv_query_ece:
//                            vendor id SOFTVERBS_ECE_VENDOR_ID); ibv_set_ece
//                            takes a subset of them, from the same vendor,
//                            before RTR (EINVAL otherwise). Unset or 0: both
//                            return EOPNOTSUPP, as rxe does
//   SOFTVERBS_MAX_QP=N, SOFTVERBS_MAX_CQ=N, SOFTVERBS_MAX_MR=N
//                            lower the device's max_qp (default 131072),
//                            max_cq (65536) and max_mr (1048576): the object
//                            past one fails with ENOMEM (counted per process,
//                            read at each creation)
//   SOFTVERBS_MAX_CQE=N      lower max_cqe (default 1048576): a deeper CQ
//                            fails with EINVAL
//
// Behaviour, read when the first device of the process is opened (the NIC
// starts):
//   SOFTVERBS_RETRY_MS=M     how long an unreachable or vanished peer takes to
//                            fail a WR with IBV_WC_RETRY_EXC_ERR (default 200,
//                            standing in for timeout x retry_cnt)
//   SOFTVERBS_COUNTERS_FILE=path  append one JSON line of counters per process
//                            at the last ibv_close_device (or at exit)
//   SOFTVERBS_LOG=1          log to stderr ("softverbs[pid]: ...") device
//                            opens and closes, NIC starts and stops, error
//                            completions, and each request a target drops
//                            with the reason (QP not yet in RTR, ...)
// and when each device is opened:
//   SOFTVERBS_REORDER=W      completions of different QPs sharing a CQ leave
//                            it shuffled within windows of up to W entries
//                            (never within one QP); SOFTVERBS_REORDER_SEED=s
//
// Fault injection, read when the first device of the process is opened:
//   SOFTVERBS_FAULT_WC_ERROR=N[:status]  the Nth send WR posted in the process
//                            (from 1, all QPs) completes with that status
//                            (number, or rem_access, retry_exc, rnr_retry_exc,
//                            loc_prot, loc_len, rem_op, rem_inv_req, flush,
//                            fatal, general; default general), its QP goes to
//                            ERR and the WRs after it flush
//   SOFTVERBS_FAULT_RNR=N    the first N incoming receive-consuming operations
//                            get an RNR NAK even when a receive is posted
//   SOFTVERBS_FAULT_LINK_DOWN=N  posting send WR N+1 breaks every connection
//                            of the process: outstanding and later WRs fail
//                            with IBV_WC_RETRY_EXC_ERR after RETRY_MS, on both
//                            sides of each connection
// and when each device is opened:
//   SOFTVERBS_FAULT_PORT_DOWN_MS=M  M ms after the open, the device's ports
//                            go DOWN: ibv_query_port says IBV_PORT_DOWN, an
//                            IBV_EVENT_PORT_ERR async event per port is
//                            queued, the QPs on them fail their WRs with
//                            IBV_WC_RETRY_EXC_ERR and stop answering peers
//
// Not modelled: UD/UC/XRC QPs, SRQs, atomics, memory windows, extended CQs
// and QPs on RC devices (ibv_create_cq_ex, ibv_create_qp_ex beyond the basic
// attributes), multicast, packet-level PSN arithmetic (one PSN per WR).
// ibv_create_srq and ibv_attach_mcast exist (librdmacm binds them at load)
// and fail with EOPNOTSUPP. Address handles exist (numbered per PD, as EFA
// numbers them); RC QPs do not use them. A process that forks keeps its
// devices in the parent only.
//
// softefa, the EFA flavour (efa/, efa/README.md): the same library with the
// EFA personality linked in, built as efa-lib/libsoftefa.so.1 with
// libibverbs.so.1 and libefa.so.1 links beside it (GLOBAL property
// WEFT_SOFTEFA_DIR: the directory for LD_LIBRARY_PATH). Its devices are EFA
// devices softefa0..N-1 (SOFTVERBS_DEVICES, _PORTS, _NODE_ID, _RETRY_MS,
// _REORDER*, _FAULT_*, _LOG, _COUNTERS_FILE apply; _LINK, _MTU, _SPEED,
// _ECE do not) with SRD QPs only: connectionless (each WR names an AH, QP
// number and Q_Key), reliable, unordered. QP numbers are 16 bits, as EFA
// addresses hold them. Knobs, read at ibv_get_device_list:
//   SOFTEFA_MTU=bytes        max_msg_sz, the largest send (default 8928)
//   SOFTEFA_RDMA_READ=0|1    device caps (efadv_query_device): RDMA read
//   SOFTEFA_RDMA_WRITE=0|1   RDMA write and write with immediate
//   SOFTEFA_UNSOLICITED_WRITE_RECV=0|1  writes with immediate complete
//                            without a posted receive on QPs and CQs that ask
//   SOFTEFA_RNR_RETRY=0|1    the RNR retry count is settable (ibv_modify_qp)
//   SOFTEFA_CQ_WITH_SGID=0|1 efadv_create_cq takes EFADV_WC_EX_WITH_SGID
//                            (all default 1)
//   SOFTEFA_IN_ORDER_128=1   ibv_query_qp_data_in_order reports 128-byte
//                            aligned in-order placement for RDMA and sends
//                            (default 0)
//   SOFTEFA_MAX_RDMA_SIZE=n  largest RDMA read or write (default 1 GiB)
//   SOFTEFA_INLINE_SIZE=n    inline_buf_size (default 32, at most 256)
//   SOFTEFA_PART_ID=id       vendor_part_id (default 0xefa1)
//   SOFTEFA_RNR_BACKOFF_US=u between an RNR NAK and the retransmission
//                            (default 100)
//   SOFTEFA_SET_SYSFS_PATH=0 do not set SYSFS_PATH (by default, when it is
//                            unset and /sys has no class/infiniband_verbs,
//                            softefa sets it to <registry>/sysfs, which holds
//                            the abi_version file libfabric reads)
//   SOFTVERBS_LOG=2          also a line per SRD WR sent, received, and per
//                            batch of receives posted on an SRD QP
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Per process, cumulative since the library was loaded or the last
// softverbs_reset_counters. "Bytes" count successful operations, as
// requester; packets are NIC-to-NIC frames (requests, acknowledgements and
// responses).
struct softverbs_counters {
  uint64_t doorbells;           // ibv_post_send calls
  uint64_t send_wrs;            // send WRs posted
  uint64_t send_wrs_send;       // ... by opcode: IBV_WR_SEND
  uint64_t send_wrs_send_imm;   // IBV_WR_SEND_WITH_IMM
  uint64_t send_wrs_write;      // IBV_WR_RDMA_WRITE
  uint64_t send_wrs_write_imm;  // IBV_WR_RDMA_WRITE_WITH_IMM
  uint64_t send_wrs_read;       // IBV_WR_RDMA_READ
  uint64_t inline_wrs;          // with IBV_SEND_INLINE
  uint64_t signaled_wrs;        // with IBV_SEND_SIGNALED or sq_sig_all
  uint64_t recv_posts;          // ibv_post_recv calls
  uint64_t recv_wrs;            // receive WRs posted
  uint64_t poll_calls;          // ibv_poll_cq calls
  uint64_t completions;         // work completions returned by ibv_poll_cq
  uint64_t error_completions;   // ... of them with a status other than success
  uint64_t bytes_written;       // RDMA writes (with or without immediate)
  uint64_t bytes_read;          // RDMA reads
  uint64_t bytes_sent;          // sends
  uint64_t packets_sent;        // frames this NIC sent to a NIC (itself too)
  uint64_t packets_received;    // frames this NIC received
  uint64_t rnr_naks_sent;       // RNR NAKs this NIC answered as target
  uint64_t rnr_naks_received;   // RNR NAKs this NIC got as requester
  uint64_t retransmits;         // WRs sent again after an RNR NAK or a drop
  uint64_t ece_set;             // successful ibv_set_ece calls
};

#define SOFTVERBS_ECE_VENDOR_ID 0x5356u /* "SV" */

// Fills *out; returns 0 (-1 when out is NULL).
int softverbs_get_counters(struct softverbs_counters* out);
// Sets all counters to 0.
void softverbs_reset_counters(void);
// 1: the loaded libibverbs.so.1 is softverbs (the real one lacks the symbol).
int softverbs_present(void);

typedef int (*softverbs_get_counters_fn)(struct softverbs_counters* out);
typedef void (*softverbs_reset_counters_fn)(void);

#ifdef __cplusplus
}  // extern "C"
#endif
