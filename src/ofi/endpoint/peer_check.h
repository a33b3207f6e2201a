// Whether a peer's address (from a listen handle or a connect request) can
// be handed to the provider's fi_av_insert without harming this process.
//
// libfabric's shm provider takes an address "fi_shm://NAME", opens
// /dev/shm/NAME and maps it as the peer's region, trusting the header it
// finds there: a file that is not a region of this libfabric (a forged or
// corrupt handle, a peer running another libfabric) makes it map a size
// read from that file (the failed mmap's MAP_FAILED is then dereferenced)
// or follow offsets from it. It also remembers the names of this process's
// own closed endpoints with their unmapped regions, so a handle of a
// closed listener of this process crashes it too. Both crash inside
// fi_av_insert with 1.17, at the first send with 2.6. A closed endpoint's
// region is unlinked, so a missing file catches that case; a region whose
// owner is dead only hangs the connect, but is refused as well, by name.
// Other providers only resolve socket addresses and never touch memory
// named by the peer, so their addresses pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::ofi {

// `provider` is the fi_info provider name ("shm", "tcp;ofi_rxm", ...).
// Returns false and says what is wrong, and the likely cause, in `problem`.
// Cheap enough for once per connect/accept: a few system calls, no locks.
bool peer_address_usable(const std::string& provider, const uint8_t* address, size_t size,
                         std::string* problem);

// The pieces, exposed for tests.
namespace shm_check {

constexpr const char* kRegionDir = "/dev/shm/";  // libfabric's SMR_DIR, glibc's shm_open
constexpr size_t kNameMax = 255;                 // SMR_NAME_MAX less the NUL; NAME_MAX

// The region name in an shm address: the text after "://" up to the NUL
// that must end it within `size`. False when it is not a safe file name in
// kRegionDir (empty, too long, '/', ".", "..", not printable).
bool region_name(const uint8_t* address, size_t size, std::string* name, std::string* problem);

// The region header version (libfabric's SMR_VERSION) that the libfabric
// loaded in this process writes and reads, or 0 when its layout is not one
// weft knows (then only the checks that need no layout are made).
int loaded_region_version();

// Checks kRegionDir + name as a region of `version` (0: layout unknown).
bool region_usable(const std::string& name, int version, std::string* problem);

}  // namespace shm_check
}  // namespace weft::ofi
