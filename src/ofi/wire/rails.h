// Rails: the physical NICs (libfabric domains) one NCCL device spans. A
// multi-rail comm opens an endpoint on each and spreads writes over them.
#pragma once

namespace weft::ofi {

// ncclNet v12 lets a virtual device hold 8 physical ones.
constexpr int kMaxRails = 8;

}  // namespace weft::ofi
