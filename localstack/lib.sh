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

# Valkey is what ElastiCache Serverless runs; redis-server 7.0 (Debian 12's
# own) is only a fallback where no Valkey package can be installed, or, with
# CACHE_SERVER=redis, a comparison run by hand.
cache_server_bin() {
  case "${CACHE_SERVER:-}" in
    redis) command -v redis-server ;;
    *) command -v valkey-server || command -v redis-server ;;
  esac
}
cache_cli_bin() {
  case "${CACHE_SERVER:-}" in
    redis) command -v redis-cli ;;
    *) command -v valkey-cli || command -v redis-cli ;;
  esac
}

# debian_codename prints the release name (bookworm, trixie, ...) or nothing.
debian_codename() { (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}"); }

# add_backports adds <codename>-backports from the mirror the machine already
# uses for <codename>, once.
add_backports() {
  local codename=$1 list=/etc/apt/sources.list.d/invalidator-backports.sources mirror
  [ -f "$list" ] && return
  mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
  [ -n "$mirror" ] || mirror=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  say "adding ${codename}-backports from $mirror (for valkey-server)"
  printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$codename" | as_root tee "$list" >/dev/null
}

# ensure_cache_server installs valkey-server and valkey-tools even where
# redis-server is installed: the distribution's own where it has them,
# bookworm-backports on Debian 12; redis-server only when neither works.
ensure_cache_server() {
  command -v valkey-server >/dev/null && command -v valkey-cli >/dev/null && return
  if command -v apt-get >/dev/null; then
    local codename
    codename=$(debian_codename)
    [ "$codename" = bookworm ] && add_backports "$codename"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || true
    if [ "$codename" = bookworm ]; then
      apt_install -t "${codename}-backports" valkey-server valkey-tools && return
    elif apt-cache show valkey-server >/dev/null 2>&1; then
      apt_install valkey-server valkey-tools && return
    fi
  fi
  cache_server_bin >/dev/null && cache_cli_bin >/dev/null && {
    say "no Valkey package here: the stack runs on $("$(cache_server_bin)" --version | cut -d' ' -f1-3), a fallback"
    return
  }
  say "no Valkey package here: falling back to Debian's redis-server"
  apt_install redis-server redis-tools
  cache_server_bin >/dev/null || die "neither valkey-server nor redis-server could be installed"
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
