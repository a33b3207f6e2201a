#!/bin/bash
# One rank of a 16-rank alltoall (scripts/weft-job.sh, 4 hosts) kills itself
# once the handles are exchanged, before it connects or accepts: every other
# rank must fail within seconds with an error naming it, none may hang.
#   job_kill_test.sh <weft-job.sh> <weft-perf>
set -u
JOB=${1:?usage: job_kill_test.sh <weft-job.sh> <weft-perf>}
PERF=${2:?usage: job_kill_test.sh <weft-job.sh> <weft-perf>}
RANKS=16 KILLED=5 BOUND_S=60
LOGS=$(mktemp -d /tmp/weft-job-kill.XXXXXX)
trap 'rm -rf "$LOGS"' EXIT
start=$SECONDS
# weft-perf's own no-progress timeout is far above the bound: what fails the
# ranks must be the plugin noticing the dead listener.
"$JOB" --ranks $RANKS --hosts 4 --timeout 200 --logs "$LOGS" -- \
  "$PERF" --job alltoall --kill-rank $KILLED --timeout 180 > "$LOGS/job.out" 2>&1
rc=$?
elapsed=$(( SECONDS - start ))
if [ $rc = 77 ]; then cat "$LOGS/job.out"; exit 77; fi
fail() { echo "FAIL: $*"; cat "$LOGS/job.out"; exit 1; }
[ $rc = 1 ] || fail "the job exited $rc, not 1"
[ $elapsed -le $BOUND_S ] || fail "the job took $elapsed s (at most $BOUND_S)"
grep -q "killing itself" "$LOGS/rank-$KILLED.log" || fail "rank $KILLED did not kill itself"
for ((r = 0; r < RANKS; r++)); do
  [ $r = $KILLED ] && continue
  # The ranks it names: exactly the killed one (no rank gave up on another
  # that was still alive).
  named=$(grep -o "with rank [0-9]* lane" "$LOGS/rank-$r.log" | sort -u | tr '\n' ' ')
  [ "$named" = "with rank $KILLED lane " ] ||
    fail "rank $r names '${named}', not rank $KILLED alone: $(tail -n 3 "$LOGS/rank-$r.log")"
done
echo "ok: every rank but $KILLED failed naming it, in $elapsed s"
