#include "abi/string_pool.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace weft::abi {

char* intern_string(const std::string& text) {
  static std::mutex mutex;
  // Never freed: NCCL may keep these pointers past finalize.
  static auto* pool = new std::unordered_map<std::string, std::unique_ptr<char[]>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = pool->find(text);
  if (it == pool->end()) {
    auto copy = std::make_unique<char[]>(text.size() + 1);
    text.copy(copy.get(), text.size());
    copy[text.size()] = '\0';
    it = pool->emplace(text, std::move(copy)).first;
  }
  return it->second.get();
}

}  // namespace weft::abi
