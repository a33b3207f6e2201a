// Writes the fuzz targets' seed corpora (plugin-tests/fuzz/corpus) from
// weft's own encoders: one valid input per format and variant, each with
// the selector byte its target reads first. Run it again after a wire
// format changes:
//   fuzz-seeds plugin-tests/fuzz/corpus
#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/handle_header.h"
#include "core/link_messages.h"
#include "core/peer_links.h"
#include "ofi/wire/connection_messages.h"
#include "ofi/wire/rdma_wire.h"
#include "verbs/wire.h"

using namespace weft;

namespace {

std::string root;

void write_seed(const std::string& target, const std::string& name, uint8_t selector,
                const uint8_t* bytes, size_t size) {
  const std::string dir = root + "/" + target;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(dir.c_str());
    std::exit(1);
  }
  const std::string path = dir + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fputc(selector, file);
  std::fwrite(bytes, 1, size, file);
  std::fclose(file);
}

SocketAddress sample_address() {
  in_addr address{};
  inet_pton(AF_INET, "10.1.2.3", &address);
  return SocketAddress::from_ipv4(address, 4567);
}

void handles() {
  ListenHandle handle;
  handle.transport = TransportId::Ofi;
  handle.fingerprint = 0x1234;
  handle.listen_id = 7;
  handle.secret = 0x0123456789abcdefull;
  // libfabric's payload: the address's size, then the address.
  handle.payload_size = 17;
  handle.payload[0] = 16;
  for (int i = 1; i <= 16; ++i) handle.payload[i] = static_cast<uint8_t>(i);
  uint8_t bytes[kHandleSize];
  encode_handle(handle, bytes);
  write_seed("fuzz_handle", "ofi", 0, bytes, sizeof(bytes));
  handle.transport = TransportId::Verbs;
  handle.payload_size = SocketAddress::kPackedSize;
  sample_address().pack(handle.payload);
  encode_handle(handle, bytes);
  write_seed("fuzz_handle", "verbs", 1, bytes, sizeof(bytes));
}

void connect_messages() {
  ofi::ConnectRequest request;
  request.listener_id = 4;
  request.connector_comm_id = 5;
  request.protocol = ofi::Protocol::Rdma;
  request.rails = 2;
  request.address_size = 16;
  std::memset(request.address, 0xab, 16);
  request.process.token = 0x1122334455667788ull;
  request.process.address = sample_address();
  request.link_key = 0x2122232425262728ull;
  uint8_t bytes[ofi::kConnectAckSize];
  ofi::encode_connect_request(request, bytes);
  write_seed("fuzz_connect_messages", "request", 0, bytes, ofi::kConnectRequestSize);
  ofi::ConnectAck ack;
  ack.recv_comm_id = 9;
  ack.protocol = ofi::Protocol::Rdma;
  ack.rails = 2;
  ack.write_target[0] = 1;
  ack.write_target[1] = 2;
  ack.eager_size = 8192;
  ack.address_size[1] = 16;
  std::memset(ack.address[1], 0xcd, 16);
  ack.process = request.process;
  ack.link_key = 0x3132333435363738ull;
  ofi::encode_connect_ack(ack, bytes);
  write_seed("fuzz_connect_messages", "ack", 1, bytes, ofi::kConnectAckSize);
  ofi::ListenPayload payload;
  payload.address_size = 16;
  std::memset(payload.address, 0xab, 16);
  payload.process = request.process;
  const size_t payload_size = ofi::encode_listen_payload(payload, bytes);
  write_seed("fuzz_connect_messages", "listen_payload", 2, bytes, payload_size);
}

void rdma_wire() {
  for (int rails : {1, 2}) {
    ofi::CtsMessage cts;
    cts.group_seq = 3;
    cts.first_index = 10;
    cts.slot = 4;
    cts.count = 2;
    cts.rails = static_cast<uint8_t>(rails);
    cts.skipped = 1;
    for (int i = 0; i < 2; ++i) {
      cts.entries[i].size = 4096;
      cts.entries[i].tag = i;
      for (int r = 0; r < rails; ++r) {
        cts.entries[i].address[r] = 0x100000 + 0x1000 * i;
        cts.entries[i].key[r] = 77 + r;
      }
    }
    uint8_t bytes[ofi::kCtsMaxSize];
    ofi::encode_cts(cts, bytes);
    // Selector: 0 mod 3 picks the clear-to-send, (selector >> 2) % 8 + 1 the rails.
    const uint8_t selector = static_cast<uint8_t>(((rails - 1) << 2) | 0);
    const uint8_t chosen = selector % 3 == 0 ? selector : static_cast<uint8_t>(selector + 3);
    write_seed("fuzz_rdma_wire", "cts-" + std::to_string(rails), chosen, bytes,
               ofi::cts_size(2, rails));
  }
  ofi::EagerHeader header;
  header.index = 12;
  header.tag = -3;
  header.size = 100;
  uint8_t eager[ofi::kEagerHeaderSize + 100] = {};
  ofi::encode_eager_header(header, eager);
  write_seed("fuzz_rdma_wire", "eager", 1, eager, sizeof(eager));
  header.size_notice = true;
  ofi::encode_eager_header(header, eager);
  write_seed("fuzz_rdma_wire", "notice", 1, eager, ofi::kEagerHeaderSize);
  ofi::WriteImmediate write;
  write.target = 3;
  write.slot = 5;
  write.entry = 1;
  write.segments = 4;
  write.segment = 2;
  uint32_t values[2] = {ofi::encode_immediate(write), 100};
  write_seed("fuzz_rdma_wire", "write-immediate", 2, reinterpret_cast<uint8_t*>(values), 8);
  values[0] = ofi::encode_eager_immediate(101, -7);
  write_seed("fuzz_rdma_wire", "eager-immediate", 2, reinterpret_cast<uint8_t*>(values), 8);
}

void verbs_wire() {
  verbs::ConnectionInfo info;
  info.role = verbs::Role::Sender;
  info.qp_count = 2;
  info.mtu = 5;
  info.lid = 1;
  info.listen_id = 3;
  info.qpn[0] = 0x100;
  info.qpn[1] = 0x101;
  info.fifo_address = 0x7f0000001000ull;
  info.fifo_rkey = 0x42;
  uint8_t bytes[verbs::kConnectionInfoSize];
  verbs::encode_connection_info(info, bytes);
  write_seed("fuzz_verbs_wire", "sender", 0, bytes, sizeof(bytes));
  info.role = verbs::Role::Receiver;
  // With a liveness identity (the sender's seed has none).
  info.process.token = 0x0123456789abcdefull;
  in_addr address{};
  address.s_addr = htonl(0x0a000001);
  info.process.address = SocketAddress::from_ipv4(address, 40000);
  info.link_key = 0x4142434445464748ull;
  verbs::encode_connection_info(info, bytes);
  write_seed("fuzz_verbs_wire", "receiver", 1, bytes, sizeof(bytes));
  struct {
    uint32_t sequence;
    verbs::FifoEntry entries[kMaxRecvs];
  } fifo{};
  fifo.sequence = 6;
  for (int i = 0; i < 2; ++i) {
    fifo.entries[i] =
        verbs::FifoEntry{0x1000u + 0x100u * i, 256, 9, i, 7, 2, static_cast<uint8_t>(i), 0};
  }
  write_seed("fuzz_verbs_wire", "fifo", 2, reinterpret_cast<uint8_t*>(&fifo), sizeof(fifo));
  // A listen handle's payload with the listener's link identity and mailbox.
  ListenHandle handle;
  verbs::encode_listen_payload(info.process.address, info.process, 5, &handle);
  std::vector<uint8_t> payload(1 + handle.payload_size);
  payload[0] = handle.payload_size;
  std::memcpy(payload.data() + 1, handle.payload, handle.payload_size);
  write_seed("fuzz_verbs_wire", "listen-payload", 3, payload.data(), payload.size());
}

void peer_identity() {
  PeerIdentity identity;
  identity.token = 0x0102030405060708ull;
  identity.address = sample_address();
  uint8_t bytes[PeerIdentity::kPackedSize];
  identity.pack(bytes);
  write_seed("fuzz_peer_identity", "identity", 0, bytes, sizeof(bytes));
  uint8_t hello[kLinkHelloSize];
  encode_link_hello(LinkHello{identity.token, 0x1112131415161718ull}, hello);
  write_seed("fuzz_peer_identity", "hello", 1, hello, sizeof(hello));
  identity.address.pack(bytes);
  write_seed("fuzz_peer_identity", "socket-address", 2, bytes, SocketAddress::kPackedSize);
  const char shm[] = "fi_shm://1234:0:0:7";
  write_seed("fuzz_peer_identity", "shm-address", 3, reinterpret_cast<const uint8_t*>(shm),
             sizeof(shm));
  LinkFrameHeader header;
  header.kind = 1;
  header.length = 168;
  header.to = 7;
  header.from = 9;
  uint8_t frame[kLinkFrameHeaderSize];
  encode_link_frame_header(header, frame);
  write_seed("fuzz_peer_identity", "link-message", 4, frame, sizeof(frame));
}

void params() {
  const char* texts[][2] = {{"0", "4096"},
                            {"0", "64K"},
                            {"4", "true"},
                            {"8", "auto"},
                            {"1", "^docker,eth0"},
                            {"1", "=ib0"},
                            {"2", "mlx5_0:1,mlx5_1"},
                            {"2", "^=mlx5_2"},
                            {"3", "fd00::/64"},
                            {"3", "10.0.0.0/8"}};
  int n = 0;
  for (auto& entry : texts) {
    const uint8_t selector = static_cast<uint8_t>(std::atoi(entry[0]));
    write_seed("fuzz_params", "text-" + std::to_string(n++), selector,
               reinterpret_cast<const uint8_t*>(entry[1]), std::strlen(entry[1]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  root = argv[1];
  mkdir(root.c_str(), 0755);
  handles();
  connect_messages();
  rdma_wire();
  verbs_wire();
  peer_identity();
  params();
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
