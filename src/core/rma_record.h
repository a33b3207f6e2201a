// What the ranks of a one-sided comm tell each other while setting up
// (SymmetricComm's windows on demand): an ask for a rank's copy of a
// region and the window that answers, where the copy is and its key; and
// on verbs the hellos that open a connection between two ranks
// (rma_peer_links.h). 56 bytes, little-endian, every byte checked by the
// decoder (a corrupt or foreign record is refused by name):
//
//   0 magic u32 "WRMA"  4 kind u8  5 version u8  6 reserved u16 (0)
//   8 rank u32  12 ranks u32  16 round u32  20 reserved u32 (0)
//   24 address u64  32 key u64  40 size u64 (hello, ask: all three 0;
//      a window of size 0: the sender holds no copy of that region)
//   48 proof u64: the sender rank's listen secret (version 2)
//
// Version 3 adds the ask (kind 3); an ask's and its answer's round is the
// collective step that registered the region asked for.
//
// Every rank of the comm was handed every rank's handle, so each knows
// each one's secret, and nobody else does (docs/security.md): a record
// whose proof is not the secret of the rank it names is not from the comm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace weft {

enum class RmaRecordKind : uint8_t { Hello = 1, Window = 2, WindowAsk = 3 };

constexpr size_t kRmaRecordSize = 56;

struct RmaRecord {
  RmaRecordKind kind = RmaRecordKind::Hello;
  uint32_t rank = 0;
  uint32_t ranks = 0;
  uint32_t round = 0;  // the comm's collective step this record belongs to
  uint64_t address = 0;
  uint64_t key = 0;
  uint64_t size = 0;
  uint64_t proof = 0;  // the sender's listen secret
};

void encode_rma_record(const RmaRecord& record, uint8_t* out);
// Whether `bytes` prove they come from a rank of the comm: the rank they
// name has, in `secrets` (rank r's listen secret at r, from the handles),
// the proof they carry, compared in constant time. Looked at before
// anything else: what fails it is not the comm's (an impostor, a rank of
// another job) and is dropped, not taken for a rank's error.
bool rma_record_proven(const uint8_t* bytes, size_t size, std::span<const uint64_t> secrets);
// Checks the bytes against what this rank expects of them: the same kind,
// round and rank count, a sender other than itself; explains a refusal.
bool decode_rma_record(const uint8_t* bytes, size_t size, const RmaRecord& expected, uint32_t self,
                       RmaRecord* out, std::string* error);
// An ask or a window that arrived out of any collective step (windows on
// demand): from another of `ranks` ranks, an ask with no region fields.
bool decode_rma_on_demand_record(const uint8_t* bytes, size_t size, uint32_t ranks, uint32_t self,
                                 RmaRecord* out, std::string* error);

// A signal sent as a message, where the provider has no remote atomics:
// the target's progress adds `value` to the word at `offset` of its copy of
// the region registered in collective step `region`. 32 bytes:
//
//   0 magic u32 "WSIG"  4 version u8  5 reserved u8[3] (0)
//   8 region u32  12 sender rank u32  16 offset u64  24 value u64
constexpr size_t kRmaSignalSize = 32;

struct RmaSignal {
  uint32_t region = 0;
  uint32_t sender = 0;
  uint64_t offset = 0;
  uint64_t value = 0;
};

void encode_rma_signal(const RmaSignal& signal, uint8_t* out);
// Refuses (and explains) bytes that are not a signal from another of
// `ranks` ranks; the region and offset are the caller's to check.
bool decode_rma_signal(const uint8_t* bytes, size_t size, uint32_t ranks, RmaSignal* out,
                       std::string* error);

}  // namespace weft
