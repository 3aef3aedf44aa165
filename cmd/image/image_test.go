package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/base64"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// hostCA is the CA bundle the test bases are made of.
const hostCA = "/etc/ssl/certs/ca-certificates.crt"

var wantPlatforms = []string{"linux/amd64", "linux/arm64"}

// TestImageFromLoopbackRegistry builds against a base the test makes and
// serves on loopback, as make image does against distroless, and pushes the
// index back to that registry.
func TestImageFromLoopbackRegistry(t *testing.T) {
	ca := readFile(t, hostCA)
	host := startRegistry(t)
	base := host + "/base:nonroot"
	pushBase(t, base, wantPlatforms, file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})

	o := testOptions(t, base)
	o.push = host + "/poller:test"
	built, err := build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	digest := mustDigest(t, built)
	pushed, err := remote.Index(mustRef(t, o.push))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDigest(t, pushed); got != digest {
		t.Errorf("pushed index %s, built %s", got, digest)
	}
	idx := readLayout(t, o.out, digest)
	checkImage(t, idx, ca, base)
}

// TestScratchBase builds with no registry at all, as CI's make image does,
// and twice, to show that the same inputs give the same digest.
func TestScratchBase(t *testing.T) {
	ca := readFile(t, hostCA)
	o := testOptions(t, scratchBase)
	o.caBundle = hostCA
	built, err := build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	digest := mustDigest(t, built)
	idx := readLayout(t, o.out, digest)
	checkImage(t, idx, ca, scratchBase)
	for _, p := range wantPlatforms {
		passwd := files(t, platformImage(t, idx, p))["etc/passwd"]
		if !bytes.Contains(passwd.data, []byte("\nnonroot:x:65532:65532:")) {
			t.Errorf("%s: /etc/passwd has no nonroot user 65532:\n%s", p, passwd.data)
		}
	}

	again := o
	again.out = t.TempDir()
	rebuilt, err := build(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDigest(t, rebuilt); got != digest {
		t.Errorf("the same inputs built index %s, then %s", digest, got)
	}
}

// TestPushWithDockerConfig pushes as to ECR after crane auth login: to a
// registry that wants a password, with it in $DOCKER_CONFIG/config.json.
func TestPushWithDockerConfig(t *testing.T) {
	s := httptest.NewServer(basicAuth("AWS", "token", registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("AWS:token"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)

	o := testOptions(t, scratchBase)
	o.push = host + "/poller:1"
	built, err := build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Index(mustRef(t, o.push), remote.WithAuth(&authn.Basic{Username: "AWS", Password: "token"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustDigest(t, pushed), mustDigest(t, built); got != want {
		t.Errorf("pushed index %s, built %s", got, want)
	}
}

// basicAuth answers 401 to a request without user's password, as a
// registry does, so that the client looks up its credentials.
func basicAuth(user, password string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestBaseRefused: a base the poller could not work on is refused before
// anything is compiled or written.
func TestBaseRefused(t *testing.T) {
	host := startRegistry(t)
	noCA := host + "/no-ca:1"
	pushBase(t, noCA, wantPlatforms, file{name: "etc/", mode: 0o755})
	amd64Only := host + "/amd64-only:1"
	pushBase(t, amd64Only, wantPlatforms[:1], file{name: "etc/ssl/cert.pem", mode: 0o644, data: []byte("-----BEGIN CERTIFICATE-----")})
	single := host + "/single:1"
	if err := remote.Write(mustRef(t, single), testBaseImage(t, "linux/amd64", file{name: "etc/ssl/cert.pem", mode: 0o644, data: []byte("x")})); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ base, want string }{
		{noCA, "no CA roots"},
		{amd64Only, "no image for linux/arm64"},
		{single, "a single image for linux/amd64"},
		{host + "/absent:1", "absent"},
	} {
		o := testOptions(t, c.base)
		_, err := build(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("base %s: error %v, want one saying %q", c.base, err, c.want)
		}
		if entries, _ := os.ReadDir(o.out); len(entries) > 0 {
			t.Errorf("base %s: %s written all the same", c.base, o.out)
		}
	}
}

func TestFlags(t *testing.T) {
	env := map[string]string{"IMAGE_BASE": scratchBase, "IMAGE_PUSH": "example.com/poller:1", "SOURCE_DATE_EPOCH": "1700000000"}
	o, err := parseFlags([]string{"-platforms", "linux/arm64"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.base != scratchBase || o.push != env["IMAGE_PUSH"] || len(o.platforms) != 1 || o.platforms[0].Architecture != "arm64" || o.created.Unix() != 1700000000 {
		t.Errorf("options %+v: want the environment's base, push and date, and the flag's platform", o)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, func(string) string { return "" }, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "[IMAGE_BASE]") {
		t.Errorf("--help: %v, printed\n%s\nwant flag.ErrHelp and the flags with their variables", err, help.String())
	}
	for _, bad := range []string{"windows/amd64", "linux/arm/v7", "linux/amd64,linux/amd64", "linux"} {
		if _, err := parseFlags([]string{"-platforms", bad}, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("-platforms %s accepted", bad)
		}
	}
}

// checkImage checks what ECS and the poller need of idx: both platforms,
// the entrypoint run as a non-root user, the binary for each platform,
// static, the CA bundle, and that the binary starts and says what
// configuration it lacks.
func checkImage(t *testing.T, idx v1.ImageIndex, ca []byte, base string) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if !slices.Equal(platforms, wantPlatforms) {
		t.Fatalf("index platforms %v, want %v", platforms, wantPlatforms)
	}
	if im.MediaType != types.OCIImageIndex || im.Annotations["org.opencontainers.image.source"] == "" {
		t.Errorf("index: media type %s, annotations %v: want an OCI index with its source", im.MediaType, im.Annotations)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, d := range im.Manifests {
		p := d.Platform.String()
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Platform().String(); got != p {
			t.Errorf("%s: the config says %s", p, got)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{"/poller"}) || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q, cmd %q: want [/poller] and none", p, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		uid, gid, _ := strings.Cut(cfg.Config.User, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 || gid == "0" {
			t.Errorf("%s: user %q: want a non-root uid:gid", p, cfg.Config.User)
		}
		if _, ok := cfg.Config.ExposedPorts["8080/tcp"]; !ok {
			t.Errorf("%s: exposed ports %v: want the health check's 8080/tcp", p, cfg.Config.ExposedPorts)
		}
		if m, err := img.Manifest(); err != nil || m.Annotations["org.opencontainers.image.base.name"] != base {
			t.Errorf("%s: manifest annotations %v (%v): want the base %s named", p, m.Annotations, err, base)
		}

		fs := files(t, img)
		if got := fs[hostCA[1:]]; !bytes.Equal(got.data, ca) {
			t.Errorf("%s: %s holds %d bytes, want the %d of the CA bundle", p, hostCA, len(got.data), len(ca))
		}
		bin, ok := fs["poller"]
		if !ok {
			t.Fatalf("%s: no /poller in the image's files", p)
		}
		if h := bin.h; h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: /poller is type %c mode %o owned by %d:%d, want a 0755 file owned by root", p, h.Typeflag, h.Mode, h.Uid, h.Gid)
		}
		f, err := elf.NewFile(bytes.NewReader(bin.data))
		if err != nil {
			t.Fatalf("%s: /poller: %v", p, err)
		}
		if f.Machine != machines[d.Platform.Architecture] {
			t.Errorf("%s: /poller is built for %s", p, f.Machine)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s: /poller is dynamically linked: no base without libc runs it", p)
			}
		}
		if d.Platform.Architecture == runtime.GOARCH {
			checkStarts(t, p, bin.data)
		}
	}
}

// checkStarts runs the image's binary with an empty environment: it must
// exit 1 with the one line saying what it lacks, as ECS's logs would show.
func checkStarts(t *testing.T, p string, bin []byte) {
	path := filepath.Join(t.TempDir(), "poller")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("%s: the image's /poller with no configuration: %v, want exit status 1\n%s", p, err, out)
	}
	if !bytes.Contains(out, []byte(`"msg":"cannot start"`)) || !bytes.Contains(out, []byte("CACHE_ENDPOINT is required")) {
		t.Errorf("%s: the image's /poller with no configuration said\n%s\nwant a cannot start line naming CACHE_ENDPOINT", p, out)
	}
}

func testOptions(t *testing.T, base string) options {
	return options{
		src: "../..", base: base, caBundle: hostCA, out: t.TempDir(),
		platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
		source:    "https://example.com/invalidator", revision: "test", created: time.Unix(0, 0).UTC(),
		log: testLog{t},
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// startRegistry serves an empty registry on loopback, where
// go-containerregistry speaks plain HTTP, and returns its host:port.
func startRegistry(t *testing.T) string {
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// pushBase pushes an index with one image per platform, each of files.
func pushBase(t *testing.T, ref string, platforms []string, files ...file) {
	idx := v1.ImageIndex(empty.Index)
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: testBaseImage(t, p, files...), Descriptor: v1.Descriptor{Platform: plat}})
	}
	if err := remote.WriteIndex(mustRef(t, ref), mutate.IndexMediaType(idx, types.OCIImageIndex)); err != nil {
		t.Fatal(err)
	}
}

func testBaseImage(t *testing.T, platform string, files ...file) v1.Image {
	layer, err := tarLayer(types.OCILayer, time.Unix(0, 0), files...)
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg.OS, cfg.Architecture, _ = strings.Cut(platform, "/")
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// readLayout reads the OCI layout at dir, whose one entry must be digest.
func readLayout(t *testing.T, dir string, digest v1.Hash) v1.ImageIndex {
	t.Helper()
	lp, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := lp.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest {
		t.Fatalf("%s lists %v, want the one index %s", dir, im.Manifests, digest)
	}
	idx, err := lp.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func platformImage(t *testing.T, idx v1.ImageIndex, platform string) v1.Image {
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform.String() == platform {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s image", platform)
	return nil
}

type entry struct {
	h    *tar.Header
	data []byte
}

// files are img's files as a container sees them, by path without the /.
func files(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fs[strings.TrimPrefix(h.Name, "/")] = entry{h, data}
	}
}

func readFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the test makes its bases of the host's CA bundle: %v", err)
	}
	return b
}

func mustDigest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustRef(t *testing.T, s string) name.Reference {
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
