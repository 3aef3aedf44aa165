#!/usr/bin/env bash
# Starts the local stack without Docker and prints its endpoints:
#   - moto on 127.0.0.1:$MOTO_PORT, every AWS API on one port like LocalStack;
#   - a 3-master cluster on 127.0.0.1:$CACHE_PORTS, TLS only, default user off,
#     one ACL user: what ElastiCache Serverless presents to a client;
#   - the AWS resources of init/ready.d, created against moto;
#   - PostgreSQL on $PGHOST:$PGPORT, with a wal2json slot: a commit log.
# Idempotent: what already runs is reused, a stopped cluster node is restarted.
# All state lives under $LOCAL_STATE (.local/), PostgreSQL's in $PG_DIR;
# localstack/down.sh removes it.
#
# Beside the masters, CACHE_REPLICAS="PORT:MASTER ..." adds a replica of the
# master on MASTER, and CACHE_ANNOUNCE="PORT:ANNOUNCED ..." has the node on
# PORT tell clients to reach it on ANNOUNCED: a master and its replica that
# both announce one port, with a proxy there that follows the master, are
# one endpoint that survives a failover, as ElastiCache Serverless shows one
# (make e2e's failover).
#
#   up.sh            everything
#   up.sh aws        moto and its resources only
#   up.sh cache      the cluster only (docker-compose.yml runs it this way)
#   up.sh postgres   PostgreSQL only
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# --- moto -------------------------------------------------------------------

# aws_ready URL is true when the endpoint answers an SQS call, so a
# LocalStack already listening on the port is reused as well as moto.
aws_ready() {
  curl -fs -o /dev/null --max-time 2 -X POST "$1/" \
    -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}'
}

# start_moto PORT NAME starts a moto server on PORT, its pid in NAME.pid,
# unless one answers there already.
start_moto() {
  local port=$1 name=$2 url=http://127.0.0.1:$1
  command -v curl >/dev/null || apt_install curl
  if port_open "$port"; then
    aws_ready "$url" || die "port $port is taken by something that does not answer AWS calls; stop it or set MOTO_PORT"
    say "moto: reusing the server on $url"
    return
  fi
  ensure_moto
  local cmd
  read -ra cmd <<<"$(moto_cmd)"
  mkdir -p "$RUN_DIR"
  # Its own session, so the server outlives this script and a Ctrl-C in the
  # terminal that started it; the inner shell records the pid that exec keeps.
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$RUN_DIR/$name.pid" \
    "${cmd[@]}" -H 127.0.0.1 -p "$port" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
  wait_until 30 aws_ready "$url" || die "moto did not start on port $port; see $RUN_DIR/$name.log"
  say "moto: started on $url"
}

start_aws() {
  start_moto "$MOTO_PORT" moto
  if [ -n "${MOTO_DYNAMODB_PORT:-}" ]; then start_moto "$MOTO_DYNAMODB_PORT" moto-dynamodb; fi
}

# --- cache cluster ----------------------------------------------------------

write_certs() {
  [ -s "$TLS_DIR/ca.crt" ] && [ -s "$TLS_DIR/server.crt" ] && [ -s "$TLS_DIR/server.key" ] && return
  ensure_openssl
  mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
      -keyout ca.key -out ca.crt -subj '/CN=invalidator local CA' 2>/dev/null
    openssl req -new -nodes -newkey rsa:2048 -sha256 \
      -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 825 -sha256 -extfile server.ext -out server.crt 2>/dev/null
    rm -f server.csr server.ext ca.srl
  ) || die "could not create TLS certificates in $TLS_DIR"
}

# Paths are absolute: relative ones would resolve against `dir`.
write_node_conf() {
  local port=$1 dir="$CACHE_DIR/$1"
  mkdir -p "$dir" "$RUN_DIR"
  cat >"$dir/node.conf" <<EOF
bind 127.0.0.1
port 0
tls-port $port
tls-cert-file $TLS_DIR/server.crt
tls-key-file $TLS_DIR/server.key
tls-ca-cert-file $TLS_DIR/ca.crt
# Like ElastiCache: TLS for every client, but no client certificates.
tls-auth-clients no
tls-cluster yes
tls-replication yes
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 3000
# A stopped node fails only the keys in its own slots, so partial failure
# stays partial and tests can see it.
cluster-require-full-coverage no
dir $dir
daemonize yes
pidfile $RUN_DIR/cache-$port.pid
logfile $dir/server.log
save ""
appendonly no
enable-debug-command local
# ACL users can only be declared in a config file.
user default off
user $CACHE_USERNAME on >$CACHE_PASSWORD ~* &* +@all
user $WORKER_USERNAME on >$WORKER_PASSWORD $(worker_keys) $WORKER_ACL$(worker_acl_extra)
masteruser $CACHE_USERNAME
masterauth $CACHE_PASSWORD
# A replica's full sync starts at once, not after Valkey's 5 s wait for
# other replicas to share it: there is one.
repl-diskless-sync-delay 0
$(node_extra_conf "$port")
EOF
}

# pair_value LIST KEY prints the value of KEY in a list of KEY:VALUE pairs.
pair_value() {
  local pair
  for pair in $1; do [ "${pair%%:*}" = "$2" ] && echo "${pair#*:}"; done
  return 0
}

replica_ports() { local pair; for pair in ${CACHE_REPLICAS:-}; do echo "${pair%%:*}"; done; }

# node_extra_conf prints what the node on port announces, and keeps a
# replica from failing over on its own: a failover is the test's to make.
# Its master too, which a test fails over and brings back as the replica:
# one that could fail over on its own took its shard back once, as soon as
# it came back, while the other nodes still counted the promoted one
# failed (make e2e stopped for its lag), and the test's endpoint pointed
# at the node that was now a replica.
node_extra_conf() {
  local announced pair
  announced=$(pair_value "${CACHE_ANNOUNCE:-}" "$1")
  if [ -n "$announced" ]; then
    printf 'cluster-announce-tls-port %s\ncluster-announce-bus-port %s\n' "$announced" "$(($1 + 10000))"
  fi
  for pair in ${CACHE_REPLICAS:-}; do
    if [ "${pair%%:*}" = "$1" ] || [ "${pair#*:}" = "$1" ]; then
      echo "cluster-replica-no-failover yes"
      break
    fi
  done
}

# worker_keys is WORKER_KEYS as ACL key patterns, ~cache:* and so on; read
# into an array, so that no pattern is expanded as a file name.
worker_keys() {
  local patterns p out=""
  read -ra patterns <<<"$WORKER_KEYS"
  for p in "${patterns[@]}"; do out+="~$p "; done
  printf '%s' "${out% }"
}

# Valkey knows CLIENT SETINFO, which valkey-go sends when it connects.
worker_acl_extra() { case "$(basename "$(cache_server_bin)")" in valkey-server) echo " +client|setinfo" ;; esac; }

node_up() { cache_cli "$1" ping 2>/dev/null | grep -q PONG; }

cluster_field() { # PORT FIELD -> value from CLUSTER INFO
  cache_cli "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

# cluster_ok: every master says ok with every slot and node, and no node
# still flags another failed. A master back from a fault stays flagged for
# twice cluster-node-timeout after it was, cluster_state ok meanwhile (full
# coverage is off), and a client mapping the cluster from CLUSTER SHARDS
# skips it (valkey-go, on Valkey 8 and later): the cluster is not whole.
cluster_ok() {
  local port n
  n=$(($(wc -w <<<"$CACHE_PORTS") + $(wc -w <<<"${CACHE_REPLICAS:-}")))
  for port in $CACHE_PORTS; do
    [ "$(cluster_field "$port" cluster_state)" = ok ] || return 1
    [ "$(cluster_field "$port" cluster_slots_assigned)" = 16384 ] || return 1
    [ "$(cluster_field "$port" cluster_known_nodes)" = "$n" ] || return 1
  done
  for port in $CACHE_PORTS $(replica_ports); do
    cache_cli "$port" cluster nodes 2>/dev/null | awk 'NF < 3 || $3 ~ /(^|,)fail\??(,|$)/ { bad = 1 } END { exit bad || NR == 0 }' || return 1
  done
}

start_cache() {
  need_cache_server
  write_certs
  local port first=${CACHE_PORTS%% *} nodes=()
  for port in $CACHE_PORTS; do nodes+=("127.0.0.1:$port"); done
  for port in $CACHE_PORTS $(replica_ports); do
    node_up "$port" && continue
    write_node_conf "$port"
    "$(cache_server_bin)" "$CACHE_DIR/$port/node.conf" ||
      die "cache node $port did not start; see $CACHE_DIR/$port/server.log"
  done
  for port in $CACHE_PORTS $(replica_ports); do
    wait_until 20 node_up "$port" ||
      die "cache node $port does not answer over TLS; see $CACHE_DIR/$port/server.log"
  done
  # Fresh nodes own no slots; restarted ones reload theirs from nodes.conf.
  # One node gets every slot, the way ElastiCache Serverless shows itself.
  if [ "$(cluster_field "$first" cluster_slots_assigned)" = 0 ]; then
    if [ "${#nodes[@]}" = 1 ]; then
      cache_cli "$first" cluster addslotsrange 0 16383 >"$RUN_DIR/cluster-create.log" 2>&1
    else
      cache_cli "$first" --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$RUN_DIR/cluster-create.log" 2>&1
    fi || die "creating the cluster failed; see $RUN_DIR/cluster-create.log"
  fi
  add_replicas
  wait_until 30 cluster_ok ||
    die "the cluster did not reach cluster_state:ok; run localstack/down.sh, then up.sh again"
  say "cache: $("$(cache_server_bin)" --version | cut -d' ' -f1-3) cluster ok on ${nodes[*]} (TLS, user $CACHE_USERNAME)"
}

# add_replicas joins each replica of CACHE_REPLICAS that knows no cluster yet
# to its master. A restarted one knows its cluster from nodes.conf, and
# follows whichever node masters its slots now.
add_replicas() {
  local pair port master id
  for pair in ${CACHE_REPLICAS:-}; do
    port=${pair%%:*} master=${pair#*:}
    [ "$(cluster_field "$port" cluster_known_nodes)" = 1 ] || continue
    cache_cli "$port" cluster meet 127.0.0.1 "${CACHE_PORTS%% *}" >/dev/null
    id=$(cache_cli "$master" cluster myid | tr -d '\r')
    wait_until 20 replicate "$port" "$id" ||
      die "node $port cannot become a replica of $master; see $CACHE_DIR/$port/server.log"
  done
}

replicate() { cache_cli "$1" cluster replicate "$2" 2>/dev/null | grep -q OK; }

# --- PostgreSQL: the commit log ---------------------------------------------

pg_ready() { psql -X -q -At -d postgres -c 'SELECT 1' >/dev/null 2>&1; }
psql_admin() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# start_postgres starts a server on $PGHOST:$PGPORT with logical decoding
# on, unless one answers there, and makes make local's database: its
# products table (REPLICA IDENTITY FULL: an update carries the row before,
# which {item.} reads) and the wal2json slot the commit log's stand-in reads.
start_postgres() {
  local bin=/usr/lib/postgresql/15/bin as=()
  if pg_ready; then
    say "postgres: reusing the server on $PGHOST:$PGPORT"
  else
    [ -x "$bin/initdb" ] || die "no PostgreSQL 15 at $bin: run make setup"
    port_open "$PGPORT" && die "port $PGPORT is taken by something that is not PostgreSQL; stop it or set PGPORT"
    # As root the server runs as postgres, which may not enter the
    # clone's folders: its files are in PG_DIR.
    [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
    mkdir -p "$PG_DIR"
    [ ${#as[@]} = 0 ] || chown postgres "$PG_DIR"
    if [ ! -s "$PG_DIR/data/PG_VERSION" ]; then
      "${as[@]}" "$bin/initdb" -D "$PG_DIR/data" -A trust -U "$PGUSER" -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
        die "initdb failed; see $PG_DIR/initdb.log"
    fi
    # PostgreSQL 15.20 lets only the plugins listed in
    # output_plugin_libraries decode a slot; earlier servers refuse to
    # start when the setting is named. (grep -c: -q would close the pipe
    # early, a failure under pipefail.)
    local plugins=""
    "$bin/postgres" --describe-config | grep -c '^output_plugin_libraries' >/dev/null &&
      plugins="-c output_plugin_libraries=pgoutput,test_decoding,wal2json"
    "${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w start -o \
      "-p $PGPORT -k $PG_DIR -c listen_addresses=$PGHOST -c wal_level=logical -c max_replication_slots=4 -c fsync=off $plugins" >/dev/null ||
      die "PostgreSQL did not start on port $PGPORT; see $PG_DIR/server.log"
    mkdir -p "$RUN_DIR"
    head -1 "$PG_DIR/data/postmaster.pid" >"$RUN_DIR/postgres.pid"
    say "postgres: started on $PGHOST:$PGPORT"
  fi
  [ "$(psql_admin -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$PGDATABASE'")" = 1 ] ||
    psql_admin -d postgres -c "CREATE DATABASE \"$PGDATABASE\""
  psql_admin -c 'CREATE TABLE IF NOT EXISTS products (id int PRIMARY KEY, name text, category text, price numeric)' \
    -c 'ALTER TABLE products REPLICA IDENTITY FULL' \
    -c "INSERT INTO products VALUES (42, 'lamp', 'lighting', 25) ON CONFLICT DO NOTHING" \
    -c "SELECT pg_create_logical_replication_slot('$CDC_SLOT', 'wal2json') WHERE NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = '$CDC_SLOT')" \
    >/dev/null || die "could not make the database $PGDATABASE"
}

# --- resources --------------------------------------------------------------

# provision runs LocalStack's ready hooks against moto, with the Python that
# has moto (and so boto3).
provision() {
  local hook
  python3 -c 'import boto3' 2>/dev/null || die "python3 cannot import boto3, which moto brings: run make setup"
  for hook in "$INVALIDATOR_ROOT"/localstack/init/ready.d/*.py; do
    python3 "$hook" || die "provisioning failed in $hook"
  done
}

[ $# -gt 0 ] || set -- aws cache postgres
for part in "$@"; do
  case "$part" in
    aws) start_aws && provision ;;
    cache) start_cache ;;
    postgres) start_postgres ;;
    *) die "unknown part '$part'; use aws, cache, postgres or nothing for all" ;;
  esac
done
cat <<EOF
local stack up. Use it from a shell with:  . localstack/env.sh
  AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL  AWS_REGION=$AWS_REGION${AWS_ENDPOINT_URL_DYNAMODB:+  AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB}
  CACHE_ENDPOINT=$CACHE_ENDPOINT  CACHE_TLS=$CACHE_TLS  CACHE_USERNAME=$CACHE_USERNAME
  CACHE_CA_FILE=$CACHE_CA_FILE
  PGHOST=$PGHOST  PGPORT=$PGPORT  PGDATABASE=$PGDATABASE  (psql)
EOF
