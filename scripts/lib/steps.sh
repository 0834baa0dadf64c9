# The phases of the project's scripts (sourced, not run). Each phase prints one
# line saying what it does; a phase that fails says which one failed and why, in
# a sentence, and only then shows the end of the tool's own output.
#
#   step "configuring the build" "CMake could not configure it" cmake -S . -B build
#   step_progress "building" "the compiler stopped on an error" '^\[ *[0-9]+%\]' cmake --build build
#
# step runs its command with the output kept in a log file; step_progress also
# prints the lines of that output matching a pattern (a build's progress lines).

steps_script=${steps_script:-scripts/$(basename "$0")}

say() { printf '%s: %s\n' "$steps_script" "$*"; }

# fail WHY [LOG]: the sentence, then the last lines of LOG, then exit 1.
fail() {
  printf '\n%s: FAILED: %s\n' "$steps_script" "$1" >&2
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    printf '%s: the last lines of its output (all of it in %s):\n' "$steps_script" "$2" >&2
    tail -n 60 "$2" | sed 's/^/  | /' >&2
  fi
  exit 1
}

steps_log() { mktemp "${TMPDIR:-/tmp}/tessera-step.XXXXXX"; }

step() {
  local what=$1 why=$2 log rc=0
  shift 2
  say "$what"
  log=$(steps_log)
  "$@" > "$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then fail "$what: $why (exit status $rc)." "$log"; fi
  rm -f "$log"
}

step_progress() {
  local what=$1 why=$2 pattern=$3 log statuses
  shift 3
  say "$what"
  log=$(steps_log)
  set +e
  "$@" 2>&1 | tee "$log" | grep --line-buffered -E "$pattern"
  statuses=("${PIPESTATUS[@]}")
  set -e
  if [ "${statuses[0]}" -ne 0 ]; then fail "$what: $why (exit status ${statuses[0]})." "$log"; fi
  rm -f "$log"
}
