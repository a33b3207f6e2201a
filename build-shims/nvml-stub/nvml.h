/*
 * Minimal stand-in for NVIDIA's nvml.h, for building libfabric's CUDA
 * support (src/hmem_cuda.c) with a CUDA toolkit that ships no NVML header.
 * scripts/lib/libfabric26.sh puts this directory on CPPFLAGS.
 *
 * libfabric is configured with --enable-cuda-dlopen, so it only needs the
 * type and the prototypes below: it looks the functions up in
 * libnvidia-ml.so.1 with dlsym at run time (and skips NVML when that library
 * is absent). Only NVML_SUCCESS is compared against; the values follow the
 * NVML ABI, where success is 0.
 */
#ifndef WEFT_NVML_STUB_H
#define WEFT_NVML_STUB_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
	NVML_SUCCESS = 0,
} nvmlReturn_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlShutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NVML_STUB_H */
