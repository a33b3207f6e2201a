#include "core/rma_record.h"

#include <cstdio>

#include "core/byte_codec.h"

namespace weft {
namespace {

constexpr uint32_t kRecordMagic = 0x414d5257;  // "WRMA"
constexpr uint8_t kRecordVersion = 1;

const char* kind_name(RmaRecordKind kind) {
  return kind == RmaRecordKind::Hello ? "hello" : "window";
}

bool refuse(std::string* error, const char* format, unsigned long long a, unsigned long long b) {
  char text[160];
  std::snprintf(text, sizeof(text), format, a, b);
  *error = text;
  return false;
}

}  // namespace

void encode_rma_record(const RmaRecord& record, uint8_t* out) {
  put_le32(out, kRecordMagic);
  out[4] = static_cast<uint8_t>(record.kind);
  out[5] = kRecordVersion;
  put_le16(out + 6, 0);
  put_le32(out + 8, record.rank);
  put_le32(out + 12, record.ranks);
  put_le32(out + 16, record.round);
  put_le32(out + 20, 0);
  bool hello = record.kind == RmaRecordKind::Hello;
  put_le64(out + 24, hello ? 0 : record.address);
  put_le64(out + 32, hello ? 0 : record.key);
  put_le64(out + 40, hello ? 0 : record.size);
}

bool decode_rma_record(const uint8_t* bytes, size_t size, const RmaRecord& expected, uint32_t self,
                       RmaRecord* out, std::string* error) {
  if (size != kRmaRecordSize) {
    return refuse(error, "%llu bytes, a record has %llu", size, kRmaRecordSize);
  }
  if (get_le32(bytes) != kRecordMagic) {
    return refuse(error, "magic 0x%08llx is not weft's one-sided record (0x%08llx)",
                  get_le32(bytes), kRecordMagic);
  }
  if (bytes[5] != kRecordVersion) {
    return refuse(error, "record version %llu, this weft speaks %llu", bytes[5], kRecordVersion);
  }
  if (get_le16(bytes + 6) != 0 || get_le32(bytes + 20) != 0) {
    return refuse(error, "reserved fields set (%llu, %llu)", get_le16(bytes + 6),
                  get_le32(bytes + 20));
  }
  out->kind = static_cast<RmaRecordKind>(bytes[4]);
  out->rank = get_le32(bytes + 8);
  out->ranks = get_le32(bytes + 12);
  out->round = get_le32(bytes + 16);
  out->address = get_le64(bytes + 24);
  out->key = get_le64(bytes + 32);
  out->size = get_le64(bytes + 40);
  if (out->kind != RmaRecordKind::Hello && out->kind != RmaRecordKind::Window) {
    return refuse(error, "unknown record kind %llu (hello %llu, window 2)", bytes[4],
                  static_cast<unsigned>(RmaRecordKind::Hello));
  }
  if (out->kind != expected.kind) {
    *error = std::string("a ") + kind_name(out->kind) + " record where a " +
             kind_name(expected.kind) +
             " was due: the ranks registered or connected in a different order";
    return false;
  }
  if (out->ranks != expected.ranks) {
    return refuse(error, "the sender counts %llu ranks, this rank %llu", out->ranks,
                  expected.ranks);
  }
  if (out->rank >= out->ranks || out->rank == self) {
    return refuse(error, "sender rank %llu is not another rank of %llu", out->rank, out->ranks);
  }
  if (out->round != expected.round) {
    return refuse(error,
                  "collective step %llu where %llu was due: the ranks registered in a "
                  "different order",
                  out->round, expected.round);
  }
  if (out->kind == RmaRecordKind::Hello && (out->address | out->key | out->size) != 0) {
    return refuse(error, "a hello record with a region (address 0x%llx, size %llu)", out->address,
                  out->size);
  }
  return true;
}

}  // namespace weft
