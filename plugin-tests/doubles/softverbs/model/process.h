// This process's identity among the processes that share a registry
// directory, and the helpers that keep that directory tidy.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace softverbs {

pid_t self_pid();
// Per-process random tag: names of this process's files in the registry.
uint64_t process_nonce();
// SOFTVERBS_DIR or /tmp/softverbs-<uid>, created on demand ("" on failure).
std::string registry_dir();
// The directory was removed behind our back: the next registry_dir() makes it.
void forget_registry_dir();
bool pid_alive(pid_t pid);
// Removes a directory tree (best effort).
void remove_tree(const std::string& path);

}  // namespace softverbs
