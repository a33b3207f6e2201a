#!/usr/bin/env bash
# An rsh agent for Open MPI (--mca plm_rsh_agent): runs "HOST COMMAND..."
# inside the network namespace that stands in for HOST, as ssh would run it
# on that host. WEFT_NETNS_HOSTS="ADDR=NS,ADDR=NS" maps hosts to namespaces;
# WEFT_NETNS_RSH_LOG, when set, gets a line per start ("HOST NS").
host=$1
shift
for pair in ${WEFT_NETNS_HOSTS//,/ }; do
  if [[ ${pair%%=*} == "$host" ]]; then
    [[ -n ${WEFT_NETNS_RSH_LOG:-} ]] && echo "$host ${pair#*=}" >>"$WEFT_NETNS_RSH_LOG"
    exec ip netns exec "${pair#*=}" /bin/sh -c "$*"
  fi
done
echo "netns-rsh: no namespace stands in for host '$host' (WEFT_NETNS_HOSTS=${WEFT_NETNS_HOSTS:-})" >&2
exit 255
