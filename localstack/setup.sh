#!/usr/bin/env bash
# Installs what the build, the tests and the local stack need and is missing.
# Idempotent: on a machine that has everything it only checks.
#   Go (the version go.mod names), gcc (go test -race), Valkey 9 (built once
#   per machine, outside the clone) and the valkey-server package (8.0), PostgreSQL 15,
#   openssl, curl, moto, the AWS CLI, cfn-lint, and the Lambda
#   Runtime Interface Emulator (built from source at RIE_VERSION into
#   .local/bin: a dev tool, so not in go.mod, where services that import our
#   packages would inherit its dependencies).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$INVALIDATOR_ROOT"

go_wanted() { sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod; }

# go_ok is true when the go on PATH can build this module (the go command
# fetches a newer toolchain by itself when go.mod asks for one).
go_ok() { command -v go >/dev/null && go version >/dev/null 2>&1; }

# install_go unpacks the toolchain module from the Go proxy into
# $LOCAL_STATE/go, which env.sh puts on PATH.
install_go() {
  local version arch url zip
  version=$(go_wanted)
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) die "no Go toolchain for $(uname -m)" ;; esac
  url="https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${version}.linux-${arch}.zip"
  command -v unzip >/dev/null || apt_install unzip
  say "installing Go $version from the Go module proxy"
  zip="$LOCAL_STATE/go.zip"
  mkdir -p "$LOCAL_STATE"
  curl -fsSL -o "$zip" "$url" || die "could not download $url"
  rm -rf "$LOCAL_STATE/go" "$LOCAL_STATE/go-unpack"
  unzip -q "$zip" -d "$LOCAL_STATE/go-unpack"
  mv "$LOCAL_STATE/go-unpack/golang.org/toolchain@v0.0.1-go${version}.linux-${arch}" "$LOCAL_STATE/go"
  rm -rf "$zip" "$LOCAL_STATE/go-unpack"
  chmod +x "$LOCAL_STATE/go/bin/"* "$LOCAL_STATE/go/pkg/tool/"*/*
  go_ok || die "Go was unpacked into $LOCAL_STATE/go but does not run"
}

python_tool() { # command pip-package
  command -v "$1" >/dev/null && return
  say "installing $2 with pip"
  python3 -m pip install --quiet --user "$2" >/dev/null 2>&1 ||
    die "$1 is missing and pip could not install it; install it with: pip install $2"
}

command -v curl >/dev/null || apt_install curl ca-certificates
go_ok || install_go
command -v gcc >/dev/null || apt_install gcc libc6-dev
ensure_openssl
ensure_cache_server
[ "${CACHE_SERVER:-valkey}" = valkey ] && ensure_valkey
need_cache_server
ensure_moto
ensure_postgres
python_tool aws awscli
python_tool cfn-lint cfn-lint

RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator

# install_rie builds the emulator at RIE_VERSION unless RIE_BIN already is it.
install_rie() {
  if [ -x "$RIE_BIN" ] && go version -m "$RIE_BIN" 2>/dev/null | grep -q "$RIE_MODULE[[:space:]]*$RIE_VERSION"; then
    return
  fi
  say "building the Lambda Runtime Interface Emulator $RIE_VERSION"
  GOBIN="$(dirname "$RIE_BIN")" go install "$RIE_MODULE/cmd/aws-lambda-rie@$RIE_VERSION" ||
    die "could not build the Lambda Runtime Interface Emulator"
}

# Every module any target needs, so that make test, e2e, bench and image then
# run with the module proxy off (CI: GOPROXY=off make test): every module of
# each module's graph (the tests of what a service imports too, which
# services_test.go's go mod tidy reads), and what the tests' imports reach.
for module in . bench cmd/image; do
  (cd "$module" && go mod download all && go list -deps -test ./... >/dev/null)
done
install_rie
record_tools go gofmt valkey-cli openssl curl aws cfn-lint psql \
  $(read -ra moto <<<"$(moto_cmd)" && basename "${moto[0]}")
say "setup: $(go version | cut -d' ' -f3), $("$(cache_server_bin)" --version | cut -d' ' -f1-3), moto $(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '(version unknown)'), PostgreSQL $(/usr/lib/postgresql/15/bin/postgres --version | cut -d' ' -f3) with wal2json, $(aws --version 2>&1 | cut -d' ' -f1), cfn-lint $(cfn-lint --version | cut -d' ' -f2)"
