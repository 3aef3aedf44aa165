package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	binary = "/poller"
	// user is distroless's nonroot, by number: a base needs no passwd entry
	// for it, and ECS's read-only root filesystem suits a user owning nothing.
	user = "65532:65532"
	// healthPort is the poller's GET /healthz (POLLER_HEALTH_ADDR's default).
	healthPort = "8080/tcp"
)

// build builds the index o describes, writes it to o.out and pushes it when
// o.push is set.
func build(ctx context.Context, o options) (v1.ImageIndex, error) {
	started := time.Now()
	var ref name.Reference
	if o.push != "" { // a typo is worth knowing before the build
		var err error
		if ref, err = name.ParseReference(o.push); err != nil {
			return nil, fmt.Errorf("-push %q: %w", o.push, err)
		}
	}
	revision, err := o.revisionOrGit(ctx)
	if err != nil {
		return nil, err
	}
	bases, err := resolveBase(ctx, o)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// What the index, each manifest and each config (as labels) say.
	labels := map[string]string{"org.opencontainers.image.source": o.source}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	var adds []mutate.IndexAddendum
	for i, p := range o.platforms {
		fmt.Fprintf(o.log, "image: compiling ./functions/poller for %s\n", p)
		bin, err := compile(ctx, o.src, p, tmp)
		if err != nil {
			return nil, err
		}
		img, err := withPoller(bases[i], bin, p, o, labels)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		plat := cfg.Platform()
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	indexType := types.OCIImageIndex
	if mt, _ := bases[0].MediaType(); mt == types.DockerManifestSchema2 {
		indexType = types.DockerManifestList
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), indexType)
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)

	if err := writeLayout(o.out, idx); err != nil {
		return nil, fmt.Errorf("writing %s: %w", o.out, err)
	}
	if err := summarize(o.log, idx); err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.log, "image: wrote %s, index %s, in %s\n", o.out, digest, time.Since(started).Round(100*time.Millisecond))
	if ref != nil {
		fmt.Fprintf(o.log, "image: pushing to %s\n", ref)
		if err := remote.WriteIndex(ref, idx, remoteOptions(ctx)...); err != nil {
			return nil, fmt.Errorf("pushing to %s: %w", ref, err)
		}
		fmt.Fprintf(o.log, "image: pushed %s@%s\n", ref.Context(), digest)
	}
	return idx, nil
}

// remoteOptions reads credentials as docker does (~/.docker/config.json and
// its credential helpers), where crane auth login and docker login write them.
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// compile cross-compiles the poller as make build does, but for p: static,
// so that a base without libc runs it.
func compile(ctx context.Context, src string, p v1.Platform, dir string) ([]byte, error) {
	out := filepath.Join(dir, "poller-"+p.Architecture)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/poller")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build ./functions/poller in %s for %s: %w", src, p, err)
	}
	return os.ReadFile(out)
}

// withPoller appends the binary to base and makes it the entrypoint, run as
// the non-root user, with labels, and the base named in its annotations.
func withPoller(base v1.Image, bin []byte, p v1.Platform, o options, labels map[string]string) (v1.Image, error) {
	created := o.created
	mt, err := base.MediaType()
	if err != nil {
		return nil, err
	}
	// Keep the base's kind of manifest: a Docker manifest listing an OCI
	// layer, or the reverse, is refused by some registries.
	layerType := types.OCILayer
	if mt == types.DockerManifestSchema2 {
		layerType = types.DockerLayer
	}
	layer, err := tarLayer(layerType, created, file{name: strings.TrimPrefix(binary, "/"), mode: 0o755, data: bin})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: layerType,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "cmd/image: " + binary, Comment: "the poller for " + p.String()},
	})
	if err != nil {
		return nil, err
	}
	baseDigest, err := base.Digest()
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: created}
	cfg.OS, cfg.Architecture = p.OS, p.Architecture
	if p.Variant != "" {
		cfg.Variant = p.Variant
	}
	c := &cfg.Config
	c.Entrypoint, c.Cmd = []string{binary}, nil
	c.User, c.WorkingDir = user, "/"
	c.ExposedPorts = map[string]struct{}{healthPort: {}}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	maps.Copy(c.Labels, labels)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	anns := map[string]string{"org.opencontainers.image.base.name": o.base, "org.opencontainers.image.base.digest": baseDigest.String()}
	maps.Copy(anns, labels)
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// file is one entry of a layer; a name ending in / is a directory.
type file struct {
	name string
	mode int64
	data []byte
}

// tarLayer makes a layer of root-owned files dated created, so that the same
// inputs give the same digest.
func tarLayer(mt types.MediaType, created time.Time, files ...file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: created, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(mt), tarball.WithCompressedCaching)
}

// writeLayout replaces dir with an OCI layout holding idx as its one entry,
// which crane push, skopeo and podman read. It removes only an OCI layout.
func writeLayout(dir string, idx v1.ImageIndex) error {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s holds files and no oci-layout: not replacing it", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx)
}

// summarize prints each image's platform, digest and compressed size.
func summarize(w io.Writer, idx v1.ImageIndex) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		var total int64
		for _, l := range m.Layers {
			total += l.Size
		}
		top := m.Layers[len(m.Layers)-1].Size
		fmt.Fprintf(w, "image: %s %s: %d layers, %d bytes compressed (the poller's layer %d)\n", d.Platform, d.Digest, len(m.Layers), total, top)
	}
	return nil
}

// revisionOrGit is o.revision, else the HEAD of o.src's git checkout when
// nothing in it is modified: a revision that is not what was built is worse
// than none.
func (o options) revisionOrGit(ctx context.Context) (string, error) {
	if o.revision != "" {
		return o.revision, nil
	}
	head, err := exec.CommandContext(ctx, "git", "-C", o.src, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", nil // not a checkout, or no git: unknown
	}
	status, err := exec.CommandContext(ctx, "git", "-C", o.src, "status", "--porcelain").Output()
	if err != nil {
		return "", fmt.Errorf("git status in %s: %w", o.src, err)
	}
	if len(bytes.TrimSpace(status)) > 0 {
		fmt.Fprintln(o.log, "image: the checkout has changes: no revision annotation (set -revision to give one)")
		return "", nil
	}
	return strings.TrimSpace(string(head)), nil
}
