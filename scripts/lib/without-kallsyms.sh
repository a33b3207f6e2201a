# shellcheck shell=bash
# weft_without_kallsyms COMMAND [ARGS...]: runs COMMAND where
# /proc/kallsyms reads empty, in a private mount namespace, when this
# shell may make one (root, unshare); otherwise runs it as it is.
#
# Why: libfabric's verbs provider reads all of /proc/kallsyms (about
# 120,000 lines the kernel formats on every read: 60 ms of CPU) in every
# process that calls fi_getinfo, looking for two symbols (peer-memory and
# dma-buf support). The suites start thousands of rank processes: on 2
# cores that was half the CPU of a conformance check such as abi. No test
# here uses libfabric's verbs provider (it needs an RDMA device; the
# Soft-RoCE VM's guest, which has one, is not masked), and nothing else
# reads the file. Sourced by scripts/test.sh.

_weft_kallsyms_mask=unknown

_weft_can_mask_kallsyms() {
  if [[ $_weft_kallsyms_mask == unknown ]]; then
    _weft_kallsyms_mask=no
    if [[ $EUID -eq 0 && -r /proc/kallsyms ]] && command -v unshare >/dev/null &&
      unshare -m --propagation private sh -c 'mount --bind /dev/null /proc/kallsyms' 2>/dev/null; then
      _weft_kallsyms_mask=yes
    fi
  fi
  [[ $_weft_kallsyms_mask == yes ]]
}

weft_without_kallsyms() {
  if _weft_can_mask_kallsyms; then
    unshare -m --propagation private sh -c 'mount --bind /dev/null /proc/kallsyms && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
