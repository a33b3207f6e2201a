# shellcheck shell=sh
# weft_quiet_port SEED: prints a TCP port below the kernel's ephemeral
# range (net.ipv4.ip_local_port_range), picked by SEED (a number: $$,
# $RANDOM). A test that listens on a port of its own choosing must not
# pick one the kernel may hand, at the same moment, to one of the
# thousands of connections the suites beside it open: tools.perf.tcp's
# "peer dies" check once failed to bind 39904 (Address already in use)
# in the middle of a ctest -j6 run. POSIX sh: sourced by sh and bash
# scripts alike.
weft_quiet_port() {
  # Not sh's read: dash reads /proc files a byte at a time, and got "3".
  _weft_low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  case $_weft_low in '' | *[!0-9]*) _weft_low=32768 ;; esac
  if [ "$_weft_low" -gt 12000 ]; then
    echo $((10000 + $1 % (_weft_low - 10000)))
  else
    # An ephemeral range that starts this low leaves room above it only.
    echo $((61000 + $1 % 4000))
  fi
}
