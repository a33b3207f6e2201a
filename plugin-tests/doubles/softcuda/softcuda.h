// softcuda: a test double of the CUDA driver (libcuda.so.1) and runtime
// (libcudart.so) for machines without a GPU. A fixture only, never installed.
//
// Tests put the softcuda build directory (CMake: ${WEFT_SOFTCUDA_DIR}, also
// the GLOBAL property WEFT_SOFTCUDA_DIR) first on LD_LIBRARY_PATH, so that
// dlopen("libcuda.so.1"), dlopen("libcudart.so") and dlopen("libcudart.so.13")
// load the doubles instead of a real toolkit or driver. libcudart.so links
// libcuda.so.1 from its own directory ($ORIGIN), so the runtime and the driver
// always share one state.
//
// "Device memory" is host memory: one memfd per allocation, mmap'd MAP_SHARED
// and rounded up to whole pages. Its dma-buf handle is a dup of that memfd,
// and a CUDA IPC handle names the exporting process's pid and memfd number,
// which another process opens through /proc/<pid>/fd/<n>.
//
// Environment, read at each call (so a test may setenv between calls):
//   SOFTCUDA_DEVICES=N        devices (default 1, at most 16). 0: the driver
//                             is present but cuInit fails with
//                             CUDA_ERROR_NO_DEVICE and cudaGetDeviceCount with
//                             cudaErrorNoDevice, as on a machine without GPU.
//   SOFTCUDA_GDR=0|1          CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
//                             (default 1); 0 also clears the flush options.
//   SOFTCUDA_DMABUF=0|1       CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (default
//                             1); 0 makes cuMemGetHandleForAddressRange fail
//                             with CUDA_ERROR_NOT_SUPPORTED.
//   SOFTCUDA_DMABUF_PCIE=0|1  whether CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
//                             is accepted (default 1); 0 returns
//                             CUDA_ERROR_NOT_SUPPORTED for that flag, as older
//                             drivers do (libfabric then retries with flags 0).
//   SOFTCUDA_SYNC_MEMOPS=0|1  whether cuPointerSetAttribute(SYNC_MEMOPS) is
//                             allowed (default 1); 0 returns
//                             CUDA_ERROR_NOT_SUPPORTED, as a real driver does
//                             for memory mapped with cuMemCreate/cuMemMap
//                             (NCCL's own buffers).
//   SOFTCUDA_P2P=0|1          cuDeviceCanAccessPeer between distinct devices
//                             (default 1). With 2+ devices and 0, libfabric
//                             2.6 turns CUDA IPC off (shm then copies through
//                             host bounce buffers).
//   SOFTCUDA_RDMA_ORDERING=N  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING
//                             (default 0 = NONE, so consumers need to flush).
//   SOFTCUDA_DRIVER_VERSION=N cuDriverGetVersion (default 13000).
//   SOFTCUDA_PCI_BUS_IDS=a,b  PCI bus ids of devices 0,1,... ("0000:18:00.0");
//                             default 0000:(0x18+4*ordinal):00.0.
//   SOFTCUDA_PROTECT=1        new device allocations are PROT_NONE for the host
//                             (the driver copies through a second mapping), so
//                             a host dereference of a device pointer faults as
//                             on real hardware. Default 0: host-accessible.
//   SOFTCUDA_IPC_SAME_PROCESS=1  let cudaIpcOpenMemHandle/cuIpcOpenMemHandle
//                             open a handle exported by the same process (the
//                             real driver refuses: invalid device context).
//   SOFTCUDA_LOG=1            log every CUDA call, its arguments and result to
//                             stderr ("softcuda: ...").
//
// Counters and controls, exported by libcuda.so.1 with C linkage. Link the
// softcuda_cuda target, or dlsym() them from the dlopen("libcuda.so.1")
// handle (the typedefs below help).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// 1 when the loaded libcuda.so.1 is softcuda (a real driver lacks the symbol).
int softcuda_present(void);

// Successful cuFlushGPUDirectRDMAWrites calls.
unsigned long long softcuda_flush_count(void);
// Device allocations (cuMemAlloc / cudaMalloc) not yet freed.
unsigned long long softcuda_live_allocations(void);
// Device allocations made, ever (not reset by softcuda_reset_counters).
unsigned long long softcuda_total_allocations(void);
// Successful cuMemGetHandleForAddressRange calls (dma-buf fds handed out).
unsigned long long softcuda_dmabuf_exports(void);
// Successful cuIpcGetMemHandle / cudaIpcGetMemHandle calls.
unsigned long long softcuda_ipc_exports(void);
// Successful cuIpcOpenMemHandle / cudaIpcOpenMemHandle calls (including
// reference-counted reopens), and mappings currently open.
unsigned long long softcuda_ipc_opens(void);
unsigned long long softcuda_live_ipc_mappings(void);
// Copies (cuMemcpy*, cudaMemcpy, ...) and the bytes they moved; memsets are
// not counted.
unsigned long long softcuda_memcpy_count(void);
unsigned long long softcuda_memcpy_bytes(void);
// Host ranges registered (cuMemHostRegister / cudaHostRegister) or allocated
// pinned (cuMemHostAlloc / cudaHostAlloc / cudaMallocHost), not yet released.
unsigned long long softcuda_live_host_registrations(void);
// Resets the cumulative counters (flush, dmabuf, ipc exports/opens, memcpy
// count/bytes) to 0. Live counts are untouched.
void softcuda_reset_counters(void);

// The memfd behind the device allocation containing ptr (the fd itself, not a
// dup: do not close it), or -1 when ptr is not in a device allocation.
int softcuda_allocation_fd(unsigned long long ptr);

typedef int (*softcuda_present_fn)(void);
typedef unsigned long long (*softcuda_counter_fn)(void);
typedef void (*softcuda_reset_counters_fn)(void);
typedef int (*softcuda_allocation_fd_fn)(unsigned long long ptr);

#ifdef __cplusplus
}  // extern "C"
#endif
