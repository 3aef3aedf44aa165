package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// caFiles are where Go's crypto/x509 looks for CA roots on Linux
// (root_linux.go), so an image with one of them needs no SSL_CERT_FILE.
var caFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// resolveBase returns o's base image for each of o.platforms, each checked
// to hold CA roots: the poller calls SQS over HTTPS, and an image without
// them would start and then fail every receive.
func resolveBase(ctx context.Context, o options) ([]v1.Image, error) {
	var bases []v1.Image
	if o.base == scratchBase {
		fmt.Fprintf(o.log, "image: base %s: nothing, %s and a nonroot user\n", scratchBase, o.caBundle)
		img, err := makeScratch(o.caBundle, o)
		if err != nil {
			return nil, err
		}
		for range o.platforms {
			bases = append(bases, img) // nothing in it is platform-specific
		}
	} else {
		fmt.Fprintf(o.log, "image: base %s: fetching\n", o.base)
		var err error
		if bases, err = fetchBase(ctx, o.base, o.platforms); err != nil {
			return nil, fmt.Errorf("base %s: %w (with no registry at hand, -base %s needs none)", o.base, err, scratchBase)
		}
	}
	for i, img := range bases {
		if err := checkCARoots(img); err != nil {
			return nil, fmt.Errorf("base %s for %s: %w", o.base, o.platforms[i], err)
		}
	}
	return bases, nil
}

// fetchBase picks each platform's image from ref's index; a single image
// serves only when it is the one platform asked for.
func fetchBase(ctx context.Context, ref string, platforms []v1.Platform) ([]v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(r, remoteOptions(ctx)...)
	if err != nil {
		return nil, err
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if have := cfg.Platform(); len(platforms) != 1 || have == nil || !have.Satisfies(platforms[0]) {
			return nil, fmt.Errorf("a single image for %v, not an index of %v", have, platforms)
		}
		return []v1.Image{img}, nil
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var imgs []v1.Image
	for _, p := range platforms {
		var found *v1.Descriptor
		for i, d := range im.Manifests {
			if d.Platform != nil && d.Platform.Satisfies(p) && d.MediaType.IsImage() {
				found = &im.Manifests[i]
				break
			}
		}
		if found == nil {
			return nil, fmt.Errorf("no image for %s in its index", p)
		}
		img, err := idx.Image(found.Digest)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// makeScratch is the base made without a registry: an empty image, the CA
// bundle where Go looks first, and /etc/passwd and /etc/group naming the
// nonroot user, as distroless's static base has them.
func makeScratch(caBundle string, o options) (v1.Image, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle for the %s base: %w", scratchBase, err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caBundle)
	}
	layer, err := tarLayer(types.OCILayer, o.created,
		file{name: "etc/", mode: 0o755},
		file{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		file{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		file{name: "etc/ssl/", mode: 0o755},
		file{name: "etc/ssl/certs/", mode: 0o755},
		file{name: strings.TrimPrefix(caFiles[0], "/"), mode: 0o644, data: ca},
	)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "cmd/image: " + scratchBase + " base", Comment: "CA roots from " + caBundle},
	})
}

// checkCARoots finds a non-empty CA bundle where Go looks for one, or where
// the image's SSL_CERT_FILE says, in img's files.
func checkCARoots(img v1.Image) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, f := range caFiles {
		want[f] = true
	}
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, "SSL_CERT_FILE="); ok {
			want[path.Clean("/"+v)] = true
		}
	}
	rc := mutate.Extract(img) // the files as the container sees them, after whiteouts
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if !want[path.Clean("/"+h.Name)] {
			continue
		}
		// A link (as Alpine's /etc/ssl/cert.pem) is trusted to lead to one.
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink || (h.Typeflag == tar.TypeReg && h.Size > 0) {
			return nil
		}
	}
	return fmt.Errorf("no CA roots (none of %s): the poller could not reach SQS over TLS; use a base that has them, or -base %s", strings.Join(caFiles, ", "), scratchBase)
}
