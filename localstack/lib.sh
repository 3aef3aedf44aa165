# shellcheck shell=bash
# Helpers shared by the stack scripts. Sourced, never run.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

# shellcheck disable=SC2034 # used by the scripts that source this file
{
  RUN_DIR="$LOCAL_STATE/run"     # one pidfile per process the stack started
  TLS_DIR="$LOCAL_STATE/tls"
  CACHE_DIR="$LOCAL_STATE/cache" # one directory per cluster node
  # The commands make setup provides, linked in one folder (record_tools):
  # make quick-try runs the README's quick try with only them and the
  # system's base tools on PATH.
  TOOLS_DIR="$INVALIDATOR_ROOT/.local/tools"
}

say() { printf '%s\n' "$*"; }
die() { printf 'localstack: %s\n' "$*" >&2; exit 1; }

# as_root runs a command as root, through sudo when we are not root.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null || die "cannot install $* (no apt-get); install it by hand"
  say "installing $* from Debian"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_closed() { ! port_open "$1"; }

# wait_until SECONDS COMMAND... polls COMMAND every 0.2 s until it succeeds.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# --- tools ------------------------------------------------------------------

# The stack runs Valkey 9, what ElastiCache Serverless runs today, built by
# make setup into VALKEY_HOME (ensure_valkey). By name only, never as a
# fallback: CACHE_SERVER=valkey8 runs it on the valkey-server package (8.0,
# bookworm-backports), CACHE_SERVER=redis on redis-server (a comparison).
VALKEY_HOME=${VALKEY_HOME:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/invalidator/valkey-9}
cache_server_bin() {
  case "${CACHE_SERVER:-valkey}" in
    redis) command -v redis-server ;;
    valkey8) command -v valkey-server ;;
    valkey) [ -x "$VALKEY_HOME/valkey-server" ] && echo "$VALKEY_HOME/valkey-server" ;;
    *) return 1 ;;
  esac
}
cache_cli_bin() {
  case "${CACHE_SERVER:-valkey}" in
    redis) command -v redis-cli ;;
    valkey8) command -v valkey-cli ;;
    valkey) [ -x "$VALKEY_HOME/valkey-cli" ] && echo "$VALKEY_HOME/valkey-cli" ;;
    *) return 1 ;;
  esac
}

# need_cache_server fails, saying what to do, when the engine CACHE_SERVER
# names is not installed.
need_cache_server() {
  cache_server_bin >/dev/null && cache_cli_bin >/dev/null && return
  case "${CACHE_SERVER:-valkey}" in
    valkey) die "no Valkey 9 in $VALKEY_HOME: run make setup (it builds it once per machine), or name another engine: CACHE_SERVER=valkey8" ;;
    valkey8 | redis) die "CACHE_SERVER=$CACHE_SERVER: no such server installed (make setup installs valkey8's)" ;;
    *) die "CACHE_SERVER=$CACHE_SERVER: unknown; valkey (9, the default), valkey8 or redis" ;;
  esac
}

# debian_codename prints the release name (bookworm, trixie, ...) or nothing.
debian_codename() { (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}"); }

# debian_mirror prints the Debian mirror the machine already uses.
debian_mirror() {
  local mirror
  mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
  [ -n "$mirror" ] || mirror=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
  echo "${mirror:-http://deb.debian.org/debian}"
}

# add_backports adds <codename>-backports from the machine's mirror, once.
add_backports() {
  local codename=$1 list=/etc/apt/sources.list.d/invalidator-backports.sources mirror
  [ -f "$list" ] && return
  mirror=$(debian_mirror)
  say "adding ${codename}-backports from $mirror (for valkey-server)"
  printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$codename" | as_root tee "$list" >/dev/null
}

# ensure_cache_server installs the valkey-server package (8.0, from
# bookworm-backports on Debian 12): the engine CACHE_SERVER=valkey8 names,
# and the valkey-cli make e2e's faults run.
ensure_cache_server() {
  command -v valkey-server >/dev/null && command -v valkey-cli >/dev/null && return
  command -v apt-get >/dev/null || die "no valkey-server and no apt-get: install Valkey's server and valkey-cli by hand"
  local codename
  codename=$(debian_codename)
  [ "$codename" = bookworm ] && add_backports "$codename"
  if [ "$codename" = bookworm ]; then
    apt_install -t "${codename}-backports" valkey-server valkey-tools
  else
    apt_install valkey-server valkey-tools
  fi
}

# ensure_valkey builds Valkey 9 from Debian's source package into
# VALKEY_HOME, outside the clone, unless it is there: a second setup, or
# another clone on the machine, builds nothing. Debian 12 has no binary
# package of it and a later release's do not install here, so the source
# comes from unstable through a deb-src-only entry of its own; the version
# pinned, else unstable's 9.x, said.
VALKEY_SOURCE_VERSION=9.1.2-1
ensure_valkey() {
  if [ -x "$VALKEY_HOME/valkey-server" ] && "$VALKEY_HOME/valkey-server" --version | grep -q ' v=9\.'; then
    return
  fi
  command -v apt-get >/dev/null || die "Valkey 9 is built from Debian's source package: no apt-get here; CACHE_SERVER=valkey8 runs the stack on an installed valkey-server 8"
  local list=/etc/apt/sources.list.d/invalidator-valkey-src.sources src began=$SECONDS dir
  [ -f "$list" ] || printf 'Types: deb-src\nURIs: %s\nSuites: sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$(debian_mirror)" | as_root tee "$list" >/dev/null
  as_root apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null ||
    die "could not read Debian unstable's source index for Valkey 9"
  command -v make >/dev/null && command -v g++ >/dev/null && command -v pkg-config >/dev/null && [ -f /usr/include/openssl/ssl.h ] ||
    apt_install make g++ pkg-config libssl-dev
  src=$(mktemp -d)
  if ! (cd "$src" && apt-get source -qq --download-only "valkey=$VALKEY_SOURCE_VERSION" >/dev/null 2>&1); then
    say "Valkey $VALKEY_SOURCE_VERSION is gone from unstable: building its current one"
    (cd "$src" && apt-get source -qq --download-only valkey >/dev/null 2>&1) || die "could not download Valkey's source package"
  fi
  tar -xzf "$src"/valkey_*.orig.tar.gz -C "$src"
  dir=$(dirname "$(ls -d "$src"/*/src/Makefile)")
  say "building Valkey $(sed -n 's/^Version: //p' "$src"/valkey_*.dsc) from Debian's source package into $VALKEY_HOME, once per machine"
  make -C "$dir" -j"$(nproc)" BUILD_TLS=yes USE_SYSTEMD=no valkey-server valkey-cli >"$src/build.log" 2>&1 ||
    { tail -20 "$src/build.log" >&2; die "building Valkey failed; the log: $src/build.log"; }
  "$dir/valkey-server" --version | grep -q ' v=9\.' || die "unstable's Valkey is no longer 9.x: $("$dir/valkey-server" --version)"
  mkdir -p "$VALKEY_HOME"
  cp "$dir/valkey-server" "$dir/valkey-cli" "$VALKEY_HOME/"
  rm -rf "$src"
  say "built $("$VALKEY_HOME/valkey-server" --version | cut -d' ' -f1-3) in $((SECONDS - began)) s"
}

# ensure_postgres installs Debian's PostgreSQL 15 with wal2json: the local
# commit log, which localstack/cdc reads.
ensure_postgres() {
  [ -x /usr/lib/postgresql/15/bin/initdb ] && [ -f /usr/lib/postgresql/15/lib/wal2json.so ] && command -v psql >/dev/null && return
  apt_install postgresql-15 postgresql-15-wal2json postgresql-client-15
}

ensure_openssl() { command -v openssl >/dev/null || apt_install openssl; }

# moto_cmd prints the command that starts moto: moto's server through
# localstack/run_moto.py, which spares it two costs of every request, where the
# Python that has moto can run it; else moto_server as installed.
moto_cmd() {
  if python3 -c 'import moto.server' 2>/dev/null; then
    echo python3 "$INVALIDATOR_ROOT/localstack/run_moto.py"
  elif command -v moto_server >/dev/null; then
    echo moto_server
  else
    return 1
  fi
}

ensure_moto() {
  moto_cmd >/dev/null && return
  command -v python3 >/dev/null || apt_install python3 python3-pip
  say 'installing moto[server] with pip'
  python3 -m pip install --quiet --user 'moto[server]' >/dev/null 2>&1 ||
    die 'moto is missing and pip could not install it; install it with: pip install "moto[server]"'
  moto_cmd >/dev/null || die 'moto was installed but moto_server is not on PATH'
}

# cache_cli PORT ARGS... talks to one node over TLS as the ACL user.
cache_cli() {
  local port=$1
  shift
  REDISCLI_AUTH="$CACHE_PASSWORD" "$(cache_cli_bin)" --tls --cacert "$CACHE_CA_FILE" \
    -h 127.0.0.1 -p "$port" --user "$CACHE_USERNAME" --no-auth-warning "$@"
}

# record_tools links each command given, as found on PATH, into TOOLS_DIR,
# which it first empties.
record_tools() {
  rm -rf "$TOOLS_DIR"
  mkdir -p "$TOOLS_DIR"
  local name path
  for name in "$@"; do
    path=$(command -v "$name") || die "setup: $name is not on PATH after setup"
    ln -s "$path" "$TOOLS_DIR/$name"
  done
}

# quick_try_block prints the README's quick try: the shell block after the
# line <!-- quick-try -->, without its fences.
quick_try_block() {
  awk '/^<!-- quick-try -->$/ { marked = 1; next }
       marked && /^```/ { if (inside) exit; inside = 1; next }
       inside { print }' "$INVALIDATOR_ROOT/README.md"
}
