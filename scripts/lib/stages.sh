# shellcheck shell=bash
# The stages of scripts/test.sh, timed: each stage's wall time and result,
# a table of them at the end of every run with the slowest tests of all
# its ctest runs (read from their JUnit files), and a budget for the whole
# run that fails it when exceeded, so that a slow change is seen by its
# author. Sourced by scripts/test.sh; defines weft_stage, weft_junit and
# weft_stage_report.
#
# Environment: WEFT_RUN_BUDGET_S, the most seconds the whole run may take
# (default under CI: weft_default_budget_s, none elsewhere);
# WEFT_RESULTS_DIR, where the JUnit files and the report go (default
# build/test-results).

# The budget under CI: 60 minutes. CI's own run of 02f55a9 took 2,623 s.
# A fresh clone here (2 cores, 2026-12-02) with a cold compiler cache took
# 3,410 s at f580e4f, about 3,150 s since the unit-test programs build at
# -O0 under the sanitizers; with the cache warm 1,771 s (README's Testing
# section has the stages). It comes down to 40 minutes once a cold run
# fits in it, and never rises again.
weft_default_budget_s=3600

_weft_stage_names=()
_weft_stage_seconds=()
_weft_stage_results=()
_weft_run_started=$SECONDS
WEFT_RESULTS_DIR=${WEFT_RESULTS_DIR:-$PWD/build/test-results}
rm -rf "$WEFT_RESULTS_DIR"
mkdir -p "$WEFT_RESULTS_DIR"

# weft_stage NAME COMMAND [ARGS...]: runs one stage, records its wall time
# and exit status, and returns that status. The command runs with errexit
# off (it is the left side of ||), so a stage function checks its own steps.
weft_stage() {
  local name=$1 started=$SECONDS status=0
  shift
  echo "==> stage $name"
  "$@" || status=$?
  _weft_stage_names+=("$name")
  _weft_stage_seconds+=($((SECONDS - started)))
  _weft_stage_results+=("$status")
  echo "==> stage $name: $((SECONDS - started)) s, $([[ $status -eq 0 ]] && echo passed || echo "FAILED ($status)")"
  return "$status"
}

# weft_junit NAME: the file for one ctest run's --output-junit (ctest takes
# it as a separate argument); the files feed the slowest-tests list.
weft_junit() {
  echo "$WEFT_RESULTS_DIR/$1.xml"
}

# Prints the stage table and the 25 slowest tests; returns 1 when the run
# took longer than its budget.
weft_stage_report() {
  local total=$((SECONDS - _weft_run_started)) i
  local budget=${WEFT_RUN_BUDGET_S:-}
  [[ -n $budget || -z ${CI:-} ]] || budget=$weft_default_budget_s
  {
    echo
    echo "==> stages (wall time)"
    printf '    %-28s %8s  %s\n' stage seconds result
    for i in "${!_weft_stage_names[@]}"; do
      printf '    %-28s %8d  %s\n' "${_weft_stage_names[$i]}" "${_weft_stage_seconds[$i]}" \
        "$([[ ${_weft_stage_results[$i]} -eq 0 ]] && echo passed || echo "FAILED (${_weft_stage_results[$i]})")"
    done
    printf '    %-28s %8d  %s\n' "whole run" "$total" "${budget:+budget $budget s}"
    echo
    echo "==> the 25 slowest tests (seconds, run, test)"
    /usr/bin/python3 - "$WEFT_RESULTS_DIR" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
rows = []
for path in glob.glob(os.path.join(sys.argv[1], "*.xml")):
    run = os.path.basename(path)[:-4]
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        continue
    for case in root.iter("testcase"):
        rows.append((float(case.get("time", "0") or 0), run, case.get("name", "?")))
rows.sort(reverse=True)
for seconds, run, name in rows[:25]:
    print(f"    {seconds:8.1f}  {run:<16} {name}")
if rows:
    print(f"    {sum(r[0] for r in rows):8.1f}  in all, {len(rows)} tests")
PY
  } | tee "$WEFT_RESULTS_DIR/stages.txt"
  if [[ -n $budget && $total -gt $budget ]]; then
    echo "==> FAILED: the run took $total s, over its budget of $budget s (WEFT_RUN_BUDGET_S);" \
      "the stage table above says where the time went" >&2
    return 1
  fi
  return 0
}
