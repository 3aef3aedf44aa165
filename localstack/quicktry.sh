#!/usr/bin/env bash
# Runs the README's quick try as written, the way a newcomer would: the
# worker started as make local starts it, then the README's block (the one
# after <!-- quick-try -->) line by line in a second shell whose PATH holds
# only what make setup provides (.local/tools) and the system's base tools
# (the executables of Debian's required packages), so that a line calling a
# tool this machine happens to have fails here. A line's "# → TEXT" (also on
# the lines after it) is what it must print: one output line each, where …
# stands for anything and a number for any number. Any line that fails, or
# misses an output, fails the run.
#
#   quicktry.sh          the whole run (make quick-try; expects the stack up and make build)
#   quicktry.sh steps    run the block's steps in this shell (what the second shell runs)
set -euo pipefail

# matches LINE PATTERN: the line is the pattern, … anything, numbers any.
matches() {
  local re
  re=$(printf '%s' "$2" | sed -e 's/[][\.*^$(){}+?|/]/\\&/g' -e 's/[0-9][0-9]*\\\.[0-9][0-9]*\|[0-9][0-9]*/[0-9.]+/g' -e 's/…/.*/g')
  [[ "$1" =~ ^${re}$ ]]
}

# steps runs the block read from stdin: each command with the outputs it
# must print.
steps() {
  local -a cmds=() wants=()
  local line cmd want
  while IFS= read -r line; do
    case "$line" in
      '# → '*) wants[${#cmds[@]} - 1]+="${line#'# → '}"$'\n' ;;
      '' | '#'*) ;;
      *'# → '*)
        cmd=${line%%'# →'*}
        cmds+=("${cmd%"${cmd##*[![:space:]]}"}")
        wants+=("${line#*'# → '}"$'\n')
        ;;
      *)
        cmds+=("$line")
        wants+=("")
        ;;
    esac
  done
  local i out status failed=0 began
  for i in "${!cmds[@]}"; do
    cmd=${cmds[$i]}
    printf '$ %s\n' "$cmd"
    began=$SECONDS
    status=0
    if [ -z "${wants[$i]}" ]; then
      eval "$cmd" || status=$? # in this shell: . localstack/env.sh must last
    else
      out=$(eval "$cmd" 2>&1) || status=$?
      printf '%s\n' "$out"
    fi
    if [ "$status" != 0 ]; then
      echo "quick try: FAIL: exit status $status after $((SECONDS - began)) s: $cmd"
      return 1
    fi
    while IFS= read -r want; do
      [ -n "$want" ] || continue
      local found=0
      while IFS= read -r line; do
        if matches "$line" "$want"; then found=1 && break; fi
      done <<<"$out"
      if [ "$found" = 0 ]; then
        echo "quick try: FAIL: no line printed as documented: # → $want"
        failed=1
      fi
    done <<<"${wants[$i]}"
  done
  return "$failed"
}

# base_tools links the executables of Debian's required packages into a
# folder and prints it; elsewhere it prints the usual system folders.
base_tools() {
  command -v dpkg-query >/dev/null || { echo /usr/bin:/bin; return; }
  local dir="$LOCAL_STATE/quick-try/base" pkg file
  rm -rf "$dir"
  mkdir -p "$dir"
  for pkg in $(dpkg-query -W -f='${Priority} ${Package}\n' | awk '$1 == "required" { print $2 }'); do
    dpkg -L "$pkg" 2>/dev/null | grep -E '^(/usr)?/s?bin/[^/]+$' | while read -r file; do
      [ -x "$file" ] && [ ! -e "$dir/${file##*/}" ] && ln -s "$file" "$dir/${file##*/}"
    done
  done
  echo "$dir"
}

# The second shell has nothing of the stack's environment but what the
# block gives itself.
if [ "${1:-}" = steps ]; then
  steps
  exit
fi
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$INVALIDATOR_ROOT"

[ -d "$TOOLS_DIR" ] || die "no $TOOLS_DIR: run make setup first"
block=$(quick_try_block)
[ -n "$block" ] || die "README.md has no quick try (a shell block after <!-- quick-try -->)"
mkdir -p "$LOCAL_STATE/quick-try"
# What earlier tries parked would answer the block's last line: a fresh try.
aws --endpoint-url "$AWS_ENDPOINT_URL" sqs purge-queue --queue-url "$FAILURE_QUEUE_URL"

log="$LOCAL_STATE/quick-try/worker.log"
setsid bash localstack/local.sh >"$log" 2>&1 </dev/null &
worker=$!
trap 'kill -TERM -- -$worker 2>/dev/null || true; wait $worker 2>/dev/null || true' EXIT
healthy() { curl -fs -o /dev/null --max-time 1 "http://${HEALTH_ADDR:-127.0.0.1:8080}/healthz"; }
wait_until 60 healthy || die "the worker did not start within 60 s; see $log"

began=$SECONDS
if env -i HOME="$HOME" PATH="$TOOLS_DIR:$(base_tools)" LANG=C.UTF-8 \
  bash --noprofile --norc localstack/quicktry.sh steps <<<"$block"; then
  echo "quick try: PASS in $((SECONDS - began)) s"
else
  echo "quick try: the worker's log is $log"
  exit 1
fi
