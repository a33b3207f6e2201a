// What weft does about particular providers' behaviour when it opens and
// closes an endpoint, each with the provider code that calls for it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <string>

namespace weft::ofi {

// fi_enable failed with `rc`: on verbs;ofi_rxm, logs the likely cause (its
// completion queue sizes) and the variables that fix it.
void explain_enable_failure(const std::string& device, const fi_info* info, int rc);

// shm names an endpoint's shared-memory region after the process id and a
// counter that restarts with every load of libfabric: a process that loads
// the plugin again while an abandoned endpoint of the last load is still
// open, or that got the pid of a killed process whose regions are still in
// /dev/shm, fails fi_enable with EBUSY. On shm this names the endpoint
// "fi_shm://weft-<pid>-<random>-<n>" instead, unique per endpoint (before
// fi_enable); elsewhere it does nothing. False, with the provider's error
// logged, if the provider refused the name.
bool name_endpoint_uniquely(const std::string& device, const std::string& provider, fid_ep* ep);

// rxm sends a tagged message above its eager limit (16 KiB) in segments
// (SAR) up to FI_OFI_RXM_SAR_LIMIT; on verbs;ofi_rxm one larger than the
// receive posted for it crashes the receiver inside fi_cq_read (1.17 every
// time, 2.6 sometimes), where its rendezvous protocol reports the
// truncation. NCCL never truncates, but a crash is no way to say that a
// peer did. On verbs;ofi_rxm under the tagged protocol, unless the job set
// it, this sets FI_OFI_RXM_SAR_LIMIT=0 (read when an endpoint opens):
// larger messages go by rendezvous, an RDMA read by the receiver. The rdma
// protocol sends no tagged message above the eager size.
void avoid_segmented_truncation(const std::string& device, const std::string& provider,
                                bool tagged);

// libfabric's tcp provider (1.x's tcpx under rxm, 2.x's xnet) copies a
// send of up to FI_TCP_STAGING_SBUF_SIZE bytes (9000) that meets a full
// socket into a buffer of its own and reports it done at once; the bytes
// reach the kernel only at a later call into the provider. NCCL stops
// calling test() once its requests are done, so such a message can stay in
// the sender while its peer waits for it: measured on 1.17 under the rdma
// protocol, the size notice right behind a 64 MiB write (done, as was the
// write) stranded in about one run of conformance.tcp-rdma.xfer in 60
// beside other tests, until the 30 s deadline. Where `provider` (what the
// job named) is tcp, unless the job set the variable, this sets
// FI_TCP_STAGING_SBUF_SIZE=0 ("0 disables", tcp's own help): such a send
// then waits in the provider's queue, not done, so the sender keeps
// calling until the kernel has it. Staging only coalesced sends that met
// a full socket. Before libfabric's first fi_getinfo: tcp reads it when
// it loads.
void send_nothing_from_staging(const std::string& provider);

// libfabric before 1.19 keeps shm's unexpected messages (ones that arrive
// before a receive matches them) in limited buffers of its own: measured
// on 1.17, past a few hundred at once the rest never arrive, even once
// receives are posted (ofiwg/libfabric#9143; 1.19 buffers them, #9187).
// The rdma protocol's control messages come in bursts (a connect request
// per comm, a clear-to-send per receive): connects are capped
// (kMaxConnectsInFlight), but a receive or an eager send on each of a
// thousand comms at once can still stall such a shm (eager messages past
// the receiver's 512 pool buffers arrive unexpected). The warning to give when
// the rdma protocol runs on `provider` under libfabric `version`
// (FI_VERSION), empty where none is due.
std::string unexpected_message_limit_warning(const std::string& provider, uint32_t version);

// Drives rxm's progress through `cq` for a bounded time before the endpoint
// closes, dropping what it reads (see the definition for the crash it avoids).
void drain_before_close(fid_cq* cq);

// True where the provider resends a message that met receiver-not-ready
// only while the sender keeps calling into it (efa's RDM protocol): accept
// then holds a new comm back until its acknowledgement completed. Elsewhere
// accept hands it over at once: udp;ofi_rxd, made to wait, posted its
// receives late enough under load that its own retransmission backed off
// past a 30 s test deadline (conformance.udp.pairs64).
bool resends_only_while_progressed(const std::string& provider);

// True where an inject is done when the call returns: shm writes it into
// the peer's region or answers EAGAIN. Elsewhere weft never injects, for
// two reasons. An accepted inject may wait inside the provider until a
// later call (tcp queues it behind a send still leaving the socket; rxd
// and efa's RDM protocol queue what the peer is not ready for), while NCCL
// stops calling once its requests are done: the message is stranded. And
// an inject that fails later (its peer just closed: EFA says unreachable)
// comes back without a context, naming no connection, so every connection
// of the endpoint would have to fail; a tracked send's failure names its
// own (a clear-to-send the closed peer no longer needed is then ignored).
bool injects_done_on_return(const fi_info* info);

// True where a send completes once its bytes are in a socket, not in the
// peer (2.x's tcp, and 1.x's rxm over tcp). If this process then closes its endpoint while the peer
// still sends to it (under the rdma protocol, the clear-to-send of a
// receive posted while an eager message was on its way), the peer's kernel
// gets a reset and its provider drops what it had not read from the
// socket: a message reported sent never arrives. There a send comm that
// closes while its eager messages still expect clear-to-sends
// (RdmaSendPath::awaits_clear_to_send) has its endpoint, when that closes,
// read completions a moment longer (Endpoint::expect_late_messages): once
// per endpoint, not per comm, which ten thousand comms could not afford.
// Until then the peer's messages to a closed comm land in the endpoint's
// message pool and are dropped. Asking for delivery
// completion instead made every send wait for an acknowledgement: twice
// the 8-byte latency on tcp.
bool completes_before_delivery(const std::string& provider);

// How to raise `provider`'s receive queue, which every receive posted to
// the provider takes an entry of (fi_info -e names the variables): e.g.
// "FI_SHM_RX_SIZE (not set: 1024)". Empty for a provider
// whose variable weft does not know.
std::string receive_queue_hint(const std::string& provider);
// " (the provider's receive queue is full: ...; its size: <hint>)" to append
// to an error, or empty where the hint is.
std::string receive_queue_full_note(const std::string& provider);

}  // namespace weft::ofi
