# Every flavour the suites run in, declared once: what a flavour is (the
# environment that selects a transport, a provider, a protocol, a test
# double), its labels beyond the suite's own, the launcher its ranks need,
# and the suites that run it. The suites (conformance/, functional/,
# verbs/, rma/, vm/) loop over these and add only what is theirs: rank
# deadlines, which of their groups a flavour runs.
#
# For each flavour F: WEFT_FLAVOUR_ENV_F, WEFT_FLAVOUR_LABELS_F (F itself
# first), WEFT_FLAVOUR_LAUNCHER_F (empty: none), WEFT_FLAVOUR_SUITES_F;
# families: WEFT_FLAVOURS_OFI (libfabric's software providers),
# WEFT_FLAVOURS_SOFTEFA (libfabric 2.x's efa on softefa), WEFT_FLAVOURS_SOFTVERBS
# and WEFT_FLAVOURS_SOFTVERBS_CONNECT (the native verbs transport on
# softverbs: data path, and how comms connect), WEFT_FLAVOURS_VM (a real
# RDMA stack, in the Soft-RoCE VM). weft_flavours_for(SUITE VAR) lists the
# flavours a suite runs, in the order declared here.
# Included by plugin-tests/CMakeLists.txt after the doubles (softverbs'
# library path is theirs).

set(WEFT_FLAVOURS_ALL "")
macro(weft_flavour name)
  cmake_parse_arguments(_weft_flavour "" "FAMILY;LAUNCHER" "ENV;LABELS;SUITES" ${ARGN})
  set(WEFT_FLAVOUR_ENV_${name} "${_weft_flavour_ENV}")
  set(WEFT_FLAVOUR_LABELS_${name} ${name} ${_weft_flavour_LABELS})
  set(WEFT_FLAVOUR_LAUNCHER_${name} "${_weft_flavour_LAUNCHER}")
  set(WEFT_FLAVOUR_SUITES_${name} "${_weft_flavour_SUITES}")
  list(APPEND WEFT_FLAVOURS_${_weft_flavour_FAMILY} ${name})
  list(APPEND WEFT_FLAVOURS_ALL ${name})
endmacro()

function(weft_flavours_for suite out)
  set(found "")
  foreach(flavour IN LISTS WEFT_FLAVOURS_ALL)
    if(suite IN_LIST WEFT_FLAVOUR_SUITES_${flavour})
      list(APPEND found ${flavour})
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

set(in_netns ${PROJECT_SOURCE_DIR}/plugin-tests/conformance/in-netns.sh)

# libfabric's software providers (Debian's 1.17, or 2.6 in the fabric26
# build). tcp-rdma and shm-rdma run the RDMA protocol (tcp;ofi_rxm and shm
# offer FI_RMA with remote CQ data); shm-rdma also shuffles completions
# within a window, as EFA's unordered transport may deliver them. tcp-weft
# and shm-weft run the RDMA protocol with weft matching its control messages
# over plain messages (WEFT_OFI_TAG_MATCHING=weft), as it must on efa's
# efa-direct fabric, which has no FI_TAGGED; shm-weft also shuffles.
# libfabric's shm (1.17 and 2.6) never completes a truncated receive above
# its 4 KiB inject size: the harness sends no larger truncated message
# there (WEFT_TEST_TRUNC_MAX_SEND).
# libfabric before 1.19's shm loses unexpected messages past a few hundred
# (ofiwg/libfabric#9143, docs/scale.md): under the rdma protocol, eager
# messages beyond the receiver's 512 pool buffers arrive unexpected, so
# comms1024 posts its eager round 256 comms at a time there
# (WEFT_TEST_EAGER_WAVE; 1,024 at once stalled one CI run).
set(shm_eager_wave "")
if(LIBFABRIC_VERSION VERSION_LESS 1.19)
  set(shm_eager_wave WEFT_TEST_EAGER_WAVE=256)
endif()
weft_flavour(tcp FAMILY OFI SUITES conformance functional rma
  ENV WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo WEFT_OFI_PROTOCOL=tagged)
weft_flavour(shm FAMILY OFI SUITES conformance functional
  ENV WEFT_OFI_PROVIDER=shm WEFT_TEST_TRUNC_MAX_SEND=4096 WEFT_OFI_PROTOCOL=tagged)
weft_flavour(tcp-rdma FAMILY OFI SUITES conformance functional
  ENV WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo WEFT_OFI_PROTOCOL=rdma)
weft_flavour(shm-rdma FAMILY OFI SUITES conformance functional rma
  ENV WEFT_OFI_PROVIDER=shm WEFT_OFI_PROTOCOL=rdma WEFT_OFI_TEST_REORDER=16
      WEFT_OFI_TEST_REORDER_SEED=7 ${shm_eager_wave})
# tcp;ofi_rxm cannot inject clear-to-sends: with the fewest copies allowed
# (WEFT_OFI_CONTROL_SENDS=64), comms1024's bursts wait for copies to come back.
weft_flavour(tcp-weft FAMILY OFI SUITES conformance functional
  ENV WEFT_OFI_PROVIDER=tcp WEFT_OFI_DOMAIN=lo WEFT_OFI_PROTOCOL=rdma WEFT_OFI_TAG_MATCHING=weft
      WEFT_OFI_CONTROL_SENDS=64)
weft_flavour(shm-weft FAMILY OFI SUITES conformance functional
  ENV WEFT_OFI_PROVIDER=shm WEFT_OFI_PROTOCOL=rdma WEFT_OFI_TAG_MATCHING=weft
      WEFT_OFI_TEST_REORDER=16 WEFT_OFI_TEST_REORDER_SEED=11 ${shm_eager_wave})
# udp;ofi_rxd only over Debian's 1.17: scripts/build-libfabric26.sh builds
# the providers weft targets (tcp, shm, rxm, verbs, efa), not udp/rxd.
# comms1024's 32 KiB round in one wave (WEFT_TEST_WAVE): in waves of 256
# comms, rxd lost a message arriving as its receive was posted in about 1
# run in 5 under load, the sender's request never completing (1.17;
# docs/known-issues.md). Slow for large messages: 64 MiB in v12 only.
if(LIBFABRIC_VERSION VERSION_LESS 2.0)
  weft_flavour(udp FAMILY OFI SUITES conformance functional rma
    ENV WEFT_OFI_PROVIDER=udp WEFT_OFI_DOMAIN=lo WEFT_TEST_LARGE_VERSIONS=12 WEFT_TEST_WAVE=1024)
endif()
# One-sided signals as messages (as on providers without remote atomics,
# libfabric 2.x's tcp among them) where the provider has atomics.
weft_flavour(tcp-message FAMILY ONE_SIDED SUITES rma
  ENV ${WEFT_FLAVOUR_ENV_tcp} WEFT_OFI_TEST_MESSAGE_SIGNALS=1)
weft_flavour(shm-message FAMILY ONE_SIDED SUITES rma
  ENV ${WEFT_FLAVOUR_ENV_shm-rdma} WEFT_OFI_TEST_MESSAGE_SIGNALS=1)

# efa, efa-rdma and efa-auto: libfabric 2.6's efa provider (fabric26 build
# only: built with --enable-efa) on softefa, the software EFA device of
# doubles/softverbs (efa/README.md), with SRD's completion shuffling on.
# Same-host peers would otherwise go through libfabric's shm provider
# (FI_EFA_ENABLE_SHM_TRANSFER). scripts/lib/libfabric26.sh builds libfabric
# with build-shims/rdma-core-next's declarations, so the device's RDMA write
# reaches the provider: efa-direct offers FI_RMA and the efa fabric writes
# natively. efa: the tagged protocol on the efa fabric. efa-rdma: the RDMA
# protocol on the efa fabric (the provider matches its messages), with the
# 128-byte in-order options accepted. efa-auto: weft's own choice, which is
# the RDMA protocol on efa-direct with weft's matching, in-order options
# refused (so NCCL_PROTO=Simple). WEFT_SOFTEFA_DEVICE_ENV: the device alone
# (what auto mode sees).
set(WEFT_FLAVOURS_SOFTEFA "")
set(WEFT_SOFTEFA_DEVICE_ENV "")
if(NOT DEFINED WEFT_HAVE_EFADV_HEADERS)
  include(CheckIncludeFileCXX)
  check_include_file_cxx(infiniband/efadv.h WEFT_HAVE_EFADV_HEADERS)
endif()
if(WEFT_LIBFABRIC_PREFIX AND LIBFABRIC_VERSION VERSION_GREATER_EQUAL 2.0 AND WEFT_HAVE_EFADV_HEADERS)
  # doubles/softverbs builds softefa there (GLOBAL WEFT_SOFTEFA_DIR).
  set(softefa_dir ${PROJECT_BINARY_DIR}/plugin-tests/doubles/softverbs/efa-lib)
  set(WEFT_SOFTEFA_DEVICE_ENV "LD_LIBRARY_PATH=${softefa_dir}:${LIBFABRIC_PREFIX}/lib"
      "SOFTVERBS_DIR=${PROJECT_BINARY_DIR}/plugin-tests/conformance/softefa-registry"
      "SOFTVERBS_REORDER=16" "SOFTVERBS_REORDER_SEED=7" "FI_EFA_ENABLE_SHM_TRANSFER=0")
  set(softefa_env ${WEFT_SOFTEFA_DEVICE_ENV} WEFT_OFI_PROVIDER=efa)
  weft_flavour(efa FAMILY SOFTEFA LABELS softefa SUITES conformance functional rma
    ENV ${softefa_env} WEFT_OFI_PROTOCOL=tagged)
  weft_flavour(efa-rdma FAMILY SOFTEFA LABELS softefa SUITES conformance functional rma
    ENV ${softefa_env} WEFT_OFI_PROTOCOL=rdma WEFT_OFI_TAG_MATCHING=provider SOFTEFA_IN_ORDER_128=1)
  # What weft chooses there, for tests that depend on it (hostile).
  weft_flavour(efa-auto FAMILY SOFTEFA LABELS softefa SUITES conformance functional rma
    ENV ${softefa_env} WEFT_TEST_PROTOCOL=rdma)
endif()

# The native verbs transport (src/verbs) on softverbs, our software
# libibverbs: weft loads it through WEFT_IBVERBS_LIB, and each rank's
# process runs its own software NIC; ranks exchange traffic over Unix
# sockets. Labelled ibv, the native verbs transport's; not "verbs", which
# the VM gives libfabric's verbs;ofi_rxm provider.
#   softverbs      one device, one queue pair per connection
#   softverbs-qp4  4 queue pairs, every message split over them, adaptive-routing
#                  writes (data, then a 0-byte write with immediate)
#   softverbs-ib   InfiniBand link layer, two devices (the tests use the second),
#                  4 queue pairs taken in turn, completions of different queue
#                  pairs shuffled
#   softverbs-netns  as softverbs, each rank in its own network namespace
#                  (veth pair between them; conformance/in-netns.sh): GIDs
#                  from each namespace's address, side channel over the veth
#   softverbs-nolinks  without liveness links (WEFT_PEER_TIMEOUT_MS=0): each
#                  comm sets up over a TCP connection of its own to the
#                  listener hub, kept open to watch the peer
#   softverbs-links0, -links1  only rank 0 (1) has links: comms connect
#                  over their own TCP connections both ways
set(WEFT_FLAVOURS_SOFTVERBS "")
set(WEFT_FLAVOURS_SOFTVERBS_CONNECT "")
get_property(softverbs_lib GLOBAL PROPERTY WEFT_SOFTVERBS_LIB)
if(softverbs_lib)
  set(softverbs_env WEFT_TRANSPORT=verbs WEFT_IBVERBS_LIB=${softverbs_lib})
  weft_flavour(softverbs FAMILY SOFTVERBS LABELS softverbs ibv SUITES verbs rma
    ENV ${softverbs_env})
  weft_flavour(softverbs-qp4 FAMILY SOFTVERBS LABELS softverbs ibv SUITES verbs
    ENV ${softverbs_env} WEFT_IB_QPS_PER_CONNECTION=4 WEFT_IB_SPLIT_DATA_ON_QPS=1
        WEFT_IB_ADAPTIVE_ROUTING=1 WEFT_IB_AR_THRESHOLD=4096)
  weft_flavour(softverbs-ib FAMILY SOFTVERBS LABELS softverbs ibv SUITES verbs
    ENV ${softverbs_env} SOFTVERBS_LINK=ib SOFTVERBS_DEVICES=2 WEFT_TEST_DEV=1
        WEFT_IB_QPS_PER_CONNECTION=4 SOFTVERBS_REORDER=8)
  weft_flavour(softverbs-netns FAMILY SOFTVERBS LABELS softverbs ibv netns SUITES verbs rma
    LAUNCHER ${in_netns} ENV ${softverbs_env})
  weft_flavour(softverbs-nolinks FAMILY SOFTVERBS_CONNECT LABELS softverbs ibv SUITES verbs
    ENV ${softverbs_env} WEFT_PEER_TIMEOUT_MS=0)
  weft_flavour(softverbs-links0 FAMILY SOFTVERBS_CONNECT LABELS softverbs ibv SUITES verbs
    ENV ${softverbs_env} WEFT_TEST_RANK_ENV=1:WEFT_PEER_TIMEOUT_MS=0)
  weft_flavour(softverbs-links1 FAMILY SOFTVERBS_CONNECT LABELS softverbs ibv SUITES verbs
    ENV ${softverbs_env} WEFT_TEST_RANK_ENV=0:WEFT_PEER_TIMEOUT_MS=0)
endif()

# A real RDMA stack: libfabric's verbs;ofi_rxm (verbs: weft's tagged
# protocol, verbs-rdma: its RDMA protocol, what auto chooses on verbs) and
# weft's native verbs transport (ibv; ibv-qp4 splits messages over 4 queue
# pairs with the adaptive-routing write pattern) on the kernel's Soft-RoCE
# (rdma_rxe) inside a VM (vm/run-in-vm.sh, scripts/vm-test.sh), or over a
# real RDMA NIC. Each test skips (exit 77) where no RDMA device exists.
# FI_UNIVERSE_SIZE: rxm sizes its verbs completion queue as
# (msg tx size + msg rx size) * universe size = 256 * 256 (1.17) or
# 256 * 1024 (2.x) entries, and rxe allows 32767 (ibv_devinfo max_cqe):
# fi_enable fails with EINVAL. 64 fits; real NICs allow millions.
# WEFT_TEST_TIMEOUT: the VM emulates its CPUs (TCG), ~10x slower.
set(vm_guard ${PROJECT_SOURCE_DIR}/plugin-tests/vm/verbs-test.sh)
set(vm_common WEFT_TEST_TIMEOUT=300 WEFT_TEST_COMM_CYCLES=50)
weft_flavour(verbs FAMILY VM LABELS vm SUITES vm LAUNCHER ${vm_guard}
  ENV WEFT_OFI_PROVIDER=verbs FI_UNIVERSE_SIZE=64 ${vm_common} WEFT_OFI_PROTOCOL=tagged)
weft_flavour(verbs-rdma FAMILY VM LABELS vm SUITES vm LAUNCHER ${vm_guard}
  ENV WEFT_OFI_PROVIDER=verbs FI_UNIVERSE_SIZE=64 ${vm_common} WEFT_OFI_PROTOCOL=rdma)
weft_flavour(ibv FAMILY VM LABELS vm SUITES vm LAUNCHER ${vm_guard}
  ENV WEFT_TRANSPORT=verbs ${vm_common})
weft_flavour(ibv-qp4 FAMILY VM LABELS vm SUITES vm LAUNCHER ${vm_guard}
  ENV WEFT_TRANSPORT=verbs WEFT_IB_QPS_PER_CONNECTION=4 WEFT_IB_SPLIT_DATA_ON_QPS=1
      WEFT_IB_ADAPTIVE_ROUTING=1 ${vm_common})
