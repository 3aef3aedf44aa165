package testenv

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// Postgres is a private PostgreSQL server started for one test, with
// logical decoding on (wal_level logical) for a commit log's reader: the
// stack's PostgreSQL 15 from Debian, with wal2json (make setup installs
// both).
type Postgres struct {
	Port int
	dir  string
	as   []string // runuser -u postgres --, when the test runs as root, which initdb refuses
}

// PostgresBin is where Debian puts PostgreSQL 15's server programs.
const PostgresBin = "/usr/lib/postgresql/15/bin"

// StartPostgres starts a PostgreSQL server on a free port, with its data
// in a directory of its own, and stops it when the test ends.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	Getenv(t, "INVALIDATOR_ROOT")
	if _, err := os.Stat(filepath.Join(PostgresBin, "initdb")); err != nil {
		Unavailable(t, "no PostgreSQL 15 at "+PostgresBin+" (make setup installs it)")
	}
	p := &Postgres{}
	if u, err := user.Current(); err == nil && u.Uid == "0" {
		p.as = []string{"runuser", "-u", "postgres", "--"}
	}
	// Not under t.TempDir, whose parent only root may enter.
	dir, err := os.MkdirTemp("", "invalidator-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if p.as != nil {
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", dir, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	p.run(t, filepath.Join(PostgresBin, "initdb"), "-D", filepath.Join(p.dir, "data"), "-A", "trust", "-U", "postgres", "-E", "UTF8")
	p.run(t, filepath.Join(PostgresBin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "log"), "-w", "start", "-o",
		"-p "+strconv.Itoa(p.Port)+" -k "+p.dir+" -c listen_addresses=127.0.0.1 -c wal_level=logical -c max_replication_slots=4 -c fsync=off"+pluginsAllowed())
	t.Cleanup(func() {
		_ = p.command(filepath.Join(PostgresBin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "stop").Run()
	})
	return p
}

// pluginsAllowed is the setting that lets wal2json decode a slot on
// PostgreSQL 15.20 and later (output_plugin_libraries, as up.sh sets it),
// or nothing for an earlier server, which refuses to start when it is named.
func pluginsAllowed() string {
	out, err := exec.Command(filepath.Join(PostgresBin, "postgres"), "--describe-config").Output()
	if err != nil || !bytes.Contains(append([]byte("\n"), out...), []byte("\noutput_plugin_libraries\t")) {
		return ""
	}
	return " -c output_plugin_libraries=pgoutput,test_decoding,wal2json"
}

// URL reaches the server as its superuser, for a driver (pgx).
func (p *Postgres) URL() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(p.Port) + "/postgres"
}

// PSQL is the psql command that reaches the server, as its superuser,
// printing rows unaligned and bare.
func (p *Postgres) PSQL() []string {
	return []string{"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "-d", "postgres"}
}

// Exec runs SQL statements, each in its own transaction.
func (p *Postgres) Exec(t testing.TB, statements ...string) {
	t.Helper()
	args := p.PSQL()
	for _, s := range statements {
		args = append(args, "-c", s)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("psql %q: %v\n%s", statements, err, out)
	}
}

func (p *Postgres) run(t testing.TB, args ...string) {
	t.Helper()
	cmd := p.command(args...)
	cmd.Dir = p.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
	}
}

// command runs a server program as the user that owns the data.
func (p *Postgres) command(args ...string) *exec.Cmd {
	args = append(append([]string(nil), p.as...), args...)
	return exec.Command(args[0], args[1:]...)
}
