#!/usr/bin/env bash
# make test, after make up: go vet and go test -race of the module, with
# the side checks — the bench and image modules' go vet, the image's tests,
# cfn-lint of the template — run beside them, their output held until the
# end: the module's tests spend much of their time waiting on the stack,
# which the side checks fill. Vet is built with -race, as the tests are, so
# the two share every compiled package. Each part prints its duration.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$INVALIDATOR_ROOT"

out="$LOCAL_STATE/test"
rm -rf "$out"
mkdir -p "$out"
began=$SECONDS

# timed NAME COMMAND... runs COMMAND, then prints its duration and status.
timed() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "make test: $name: $((SECONDS - start)) s$([ "$status" = 0 ] || echo ", FAILED (status $status)")"
  return "$status"
}

side=()
for check in bench-vet image-vet image-test cfn-lint; do
  case $check in
    bench-vet) cmd=(go -C bench vet -race ./...) ;; # -race: it shares the module's packages
    image-vet) cmd=(go -C cmd/image vet ./...) ;;
    image-test) cmd=(go -C cmd/image test -count=1 ./...) ;;
    cfn-lint) cmd=(cfn-lint template.yaml) ;;
  esac
  # Niced: they fill the time the tests wait on the stack, and leave the
  # CPU to go test's compiles, the longer path, when both want it.
  timed "$check" nice -n 10 "${cmd[@]}" >"$out/$check.log" 2>&1 &
  side+=("$check:$!")
done

status=0
# go test's own vet would run a part of what go vet just ran. Vet first,
# not as a step of go test (-vet=all): that saved 2 of 12 minutes from
# empty caches, but ran the tests beside the compiles, and tests that time
# a cache call (150 ms) failed under that load. Four packages at a time,
# not one a CPU: most of their time is spent waiting on the stack.
timed "go vet -race" go vet -race ./... && timed "go test -race" go test -race -vet=off -count=1 -p 4 ./... || status=$?
for entry in "${side[@]}"; do
  wait "${entry#*:}" || status=1
  cat "$out/${entry%%:*}.log"
done
echo "make test: $((SECONDS - began)) s in all$([ "$status" = 0 ] || echo ", FAILED")"
exit "$status"
