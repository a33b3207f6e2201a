#include "rma_session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/idle_backoff.h"
#include "plugin_under_test.h"

namespace weft::rt {

void log_sink(ncclDebugLogLevel level, unsigned long, const char*, int, const char* format, ...) {
  static const int wanted = [] {
    const char* value = std::getenv("WEFT_TEST_RMA_LOG");
    return value != nullptr ? std::atoi(value) : 0;
  }();
  if (wanted == 0 || (wanted == 1 && level != NCCL_LOG_WARN)) return;
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  std::fprintf(stderr, "[pid %d] %s\n", static_cast<int>(::getpid()), line);
}

std::string table_under_test() {
  const char* value = std::getenv("WEFT_TEST_RMA_TABLE");
  return value != nullptr && value[0] != 0 ? value : "rma14";
}

size_t largest_transfer() {
  const char* value = std::getenv("WEFT_TEST_RMA_MAX");
  return value != nullptr ? std::strtoull(value, nullptr, 0) : (64u << 20);
}

namespace {

// pattern_byte(i) is base + 13 * (i % 512) + i / 512 (mod 256), as 13 * 512
// is 0 mod 256: every 512-byte block is one of 256 rows, told apart by
// base + block. Filling and checking copy and compare whole rows (64 MiB
// puts byte by byte took a fifth of the suite's CPU).
constexpr size_t kRowBytes = 512;

const uint8_t* pattern_row(uint8_t start) {
  static const std::vector<uint8_t> rows = [] {
    std::vector<uint8_t> all(256 * kRowBytes);
    for (size_t row = 0; row < 256; ++row)
      for (size_t j = 0; j < kRowBytes; ++j)
        all[row * kRowBytes + j] = static_cast<uint8_t>(row + j * 13);
    return all;
  }();
  return rows.data() + start * kRowBytes;
}

// The row that holds bytes [block * 512, block * 512 + 512).
const uint8_t* block_row(int sender, int target, size_t block, uint32_t salt) {
  return pattern_row(pattern_byte(sender, target, block * kRowBytes, salt));
}

}  // namespace

void fill_pattern(uint8_t* out, size_t size, int sender, int target, uint32_t salt) {
  for (size_t at = 0; at < size; at += kRowBytes) {
    std::memcpy(out + at, block_row(sender, target, at / kRowBytes, salt),
                std::min(kRowBytes, size - at));
  }
}

std::string check_pattern(const uint8_t* in, size_t size, int sender, int target, uint32_t salt) {
  size_t at = 0;
  for (; at < size; at += kRowBytes) {
    const size_t n = std::min(kRowBytes, size - at);
    if (std::memcmp(in + at, block_row(sender, target, at / kRowBytes, salt), n) != 0) break;
  }
  for (size_t i = at; i < size; ++i) {
    uint8_t expected = pattern_byte(sender, target, i, salt);
    if (in[i] == expected) continue;
    char text[200];
    std::snprintf(text, sizeof(text), "byte %zu of %zu from rank %d is 0x%02x, expected 0x%02x", i,
                  size, sender, in[i], expected);
    return text;
  }
  return "";
}

std::string failed_call(const char* what, ncclResult_t result) {
  return std::string(what) + " returned " + std::to_string(static_cast<int>(result));
}

Session::~Session() {
  close();
}

std::string Session::open(const std::function<void()>& before_connect) {
  std::string error;
  if (!table_.load(ft::plugin_path(), table_under_test(), &error)) return error;
  if (ncclResult_t r = table_.init(&context_, log_sink); r != ncclSuccess)
    return failed_call("init", r);
  int devices = 0;
  if (ncclResult_t r = table_.devices(&devices); r != ncclSuccess) {
    return failed_call("devices", r);
  }
  if (devices < 1) return "devices reports " + std::to_string(devices) + " one-sided devices";
  int type = 0;
  int max_recvs = 0;
  int ptr_support = 0;
  if (ncclResult_t r = table_.properties(0, &type, &max_recvs, &ptr_support); r != ncclSuccess) {
    return failed_call("getProperties", r);
  }
  if (type != 2)
    return "getProperties: netDeviceType " + std::to_string(type) + ", not GIN proxy (2)";
  if (max_recvs < 1 || (max_recvs & (max_recvs - 1)) != 0) {
    return "getProperties: maxRecvs " + std::to_string(max_recvs) +
           " is not a power of two (NCCL's proxy queue masks with it)";
  }
  if ((ptr_support & NCCL_PTR_HOST) == 0) return "getProperties: no host memory";
  ptr_support_ = ptr_support;
  if (ncclResult_t r = table_.listen(context_, 0, team_.handle(team_.rank()), &listen_);
      r != ncclSuccess) {
    return failed_call("listen", r);
  }
  if (!team_.barrier()) return "barrier after listen timed out";
  if (before_connect) before_connect();
  std::vector<void*> handles(static_cast<size_t>(team_.size()));
  for (int r = 0; r < team_.size(); ++r) handles[r] = team_.handle(r);
  ncclResult_t r =
      table_.connect(context_, handles.data(), team_.size(), team_.rank(), listen_, &comm_);
  if (r != ncclSuccess) return failed_call("connect", r);
  if (comm_ == nullptr) return "connect returned success and no comm";
  r = table_.close_listen(listen_);
  listen_ = nullptr;
  if (r != ncclSuccess) return failed_call("closeListen", r);
  return "";
}

std::string Session::close() {
  std::string error;
  if (listen_ != nullptr) table_.close_listen(listen_);
  listen_ = nullptr;
  if (comm_ != nullptr) {
    if (ncclResult_t r = table_.close_coll(comm_); r != ncclSuccess) {
      error = failed_call("closeColl", r);
    }
  }
  comm_ = nullptr;
  if (context_ != nullptr) table_.finalize(context_);
  context_ = nullptr;
  return error;
}

std::string Session::make_target(int contexts, RmaTarget* target) {
  ncclResult_t r = table_.create_context(comm_, contexts, team_.size(), target);
  if (r != ncclSuccess) return failed_call("createContext", r);
  if (table_.has_contexts() && target->context == nullptr) return "createContext gave no context";
  return "";
}

std::string Session::register_region(void* data, size_t size, void** mhandle, int type) {
  ncclResult_t r = table_.reg(comm_, data, size, type, 0, mhandle);
  if (r != ncclSuccess) return failed_call("regMrSym", r);
  if (*mhandle == nullptr) return "regMrSym returned success and a NULL handle";
  return "";
}

// WEFT_TEST_RMA_WAIT_S, when set, bounds every wait (fixtures fail fast).
int wait_limit(int timeout_s) {
  const char* value = std::getenv("WEFT_TEST_RMA_WAIT_S");
  return value != nullptr ? std::atoi(value) : timeout_s;
}

std::string Session::barrier(const RmaTarget& target, int timeout_s) {
  timeout_s = wait_limit(timeout_s) * 2;
  int generation = team_.arrive();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  IdleBackoff backoff;
  while (!team_.passed(generation)) {
    if (ncclResult_t r = table_.progress(target); r != ncclSuccess) {
      return failed_call("progress", r);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return "barrier: not every rank arrived within " + std::to_string(timeout_s) + " s";
    }
    backoff.pause();
  }
  return "";
}

std::string Session::wait(const RmaTarget& target, void* request, const char* what, int timeout_s) {
  timeout_s = wait_limit(timeout_s);
  if (request == nullptr) return std::string(what) + " returned success and a NULL request";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  IdleBackoff backoff;
  for (;;) {
    int done = 0;
    if (ncclResult_t r = table_.test(comm_, request, &done); r != ncclSuccess) {
      return failed_call((std::string("test of ") + what).c_str(), r);
    }
    if (done) return "";
    if (ncclResult_t r = table_.progress(target); r != ncclSuccess) {
      return failed_call("progress", r);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return std::string(what) + " not done after " + std::to_string(timeout_s) + " s";
    }
    backoff.pause();
  }
}

std::string Session::wait_signal(const RmaTarget& target, const void* word, uint64_t value,
                                 const char* what, int timeout_s) {
  timeout_s = wait_limit(timeout_s);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  IdleBackoff backoff;
  while (load_signal(word) < value) {
    if (ncclResult_t r = table_.progress(target); r != ncclSuccess) {
      return failed_call("progress", r);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return std::string(what) + ": signal at " + std::to_string(load_signal(word)) + " after " +
             std::to_string(timeout_s) + " s, waiting for " + std::to_string(value);
    }
    backoff.pause();
  }
  return "";
}

}  // namespace weft::rt
