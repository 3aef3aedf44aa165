#!/usr/bin/env bash
# make test, after make up: go test -race of the module with all of go
# vet, with the side checks — the bench and image modules' go vet, the
# image's tests, cfn-lint of the template — run beside it, their output
# held until the end: the module's tests spend much of their time waiting
# on the stack, which the side checks fill. Each part prints its duration.
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
  timed "$check" "${cmd[@]}" >"$out/$check.log" 2>&1 &
  side+=("$check:$!")
done

status=0
# Vet, all of it, as a step of go test: each package is vetted once its
# -race compile is done, while the tests before it wait on the stack — a
# go vet before the tests spent 6 of the 12 minutes from empty caches
# compiling alone. Four packages at a time, not one a CPU: most of their
# time is spent waiting on the stack.
timed "go test -race -vet=all" go test -race -vet=all -count=1 -p 4 ./... || status=$?
for entry in "${side[@]}"; do
  wait "${entry#*:}" || status=1
  cat "$out/${entry%%:*}.log"
done
echo "make test: $((SECONDS - began)) s in all$([ "$status" = 0 ] || echo ", FAILED")"
exit "$status"
