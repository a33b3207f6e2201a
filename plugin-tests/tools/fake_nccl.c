/* A stand-in for libnccl.so.2 whose ncclGetVersion answers
 * FAKE_NCCL_VERSION (default 22809, NCCL 2.28.9): the node check's NCCL
 * detection under test, whatever NCCL this machine has. */
#include <stdlib.h>

__attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  const char* text = getenv("FAKE_NCCL_VERSION");
  *version = text != NULL ? atoi(text) : 22809;
  return 0;
}
