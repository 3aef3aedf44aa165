// Command image builds the poller (functions/poller) into an OCI image for
// several platforms without Docker: it cross-compiles the binary with the go
// command, appends it as one layer to a base image per platform, writes the
// OCI image index as an OCI layout and, when asked, pushes it to a registry.
//
// It uses go-containerregistry as a library rather than ko: ko would bring its
// own build and publishing layers (and many more modules) for what is here one
// go build and one layer per platform. docs/image.md says how to run it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	defaultBase = "gcr.io/distroless/static-debian12:nonroot"
	// scratchBase names the base made here from nothing, the host's CA
	// bundle and a passwd entry: no registry needed.
	scratchBase = "scratch"
)

// options is one build, as the flags give it.
type options struct {
	src       string        // the root module's directory
	base      string        // a reference, or scratchBase
	caBundle  string        // the CA bundle a scratch base gets
	platforms []v1.Platform // in the index's order
	out       string        // the OCI layout written
	push      string        // a reference to push the index to, or ""
	source    string        // the org.opencontainers.image.source annotation
	revision  string        // the revision annotation, "" when unknown
	created   time.Time     // the images' and files' time
	log       io.Writer     // progress lines
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := build(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, getenv func(string) string, stdout io.Writer) (options, error) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	o := options{log: stdout}
	// The defaults are relative to cmd/image, where go run runs this.
	fs.StringVar(&o.src, "src", env("IMAGE_SRC", "../.."), "the invalidator module's directory, which holds functions/poller [IMAGE_SRC]")
	fs.StringVar(&o.base, "base", env("IMAGE_BASE", defaultBase), "the base image: a reference (a multi-platform index), or "+scratchBase+" for one made here from nothing, the CA bundle and a nonroot passwd entry, with no registry [IMAGE_BASE]")
	fs.StringVar(&o.caBundle, "ca-bundle", env("IMAGE_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"), "the CA roots the "+scratchBase+" base gets, for the AWS APIs' TLS [IMAGE_CA_BUNDLE]")
	platforms := fs.String("platforms", env("IMAGE_PLATFORMS", "linux/amd64,linux/arm64"), "comma-separated os/arch, in the index's order [IMAGE_PLATFORMS]")
	fs.StringVar(&o.out, "out", env("IMAGE_OUT", "../../bin/image"), "the OCI layout to write, replaced if it is one [IMAGE_OUT]")
	fs.StringVar(&o.push, "push", getenv("IMAGE_PUSH"), "a repository:tag to push the index to, with the credentials of ~/.docker/config.json and its helpers [IMAGE_PUSH]")
	fs.StringVar(&o.source, "source", env("IMAGE_SOURCE", "https://github.com/invalidator-go/invalidator"), "the image's source annotation [IMAGE_SOURCE]")
	fs.StringVar(&o.revision, "revision", getenv("IMAGE_REVISION"), "the revision annotation; unset: git's HEAD in -src when the tree is clean, else none [IMAGE_REVISION]")
	// The flag package's own messages are dropped: main prints the error once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "usage: go run . [flags]   (from cmd/image; make image runs it)")
		fmt.Fprintln(stdout, "Builds functions/poller into an OCI image index, one image per platform, without Docker.")
		fmt.Fprintln(stdout, "SOURCE_DATE_EPOCH, when set, dates the images and their files; else 1970-01-01, so a build is reproducible.")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return o, err
	} else if err != nil {
		return o, fmt.Errorf("%w (see --help)", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.platforms, err = parsePlatforms(*platforms); err != nil {
		return o, err
	}
	if v := getenv("SOURCE_DATE_EPOCH"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
		}
		o.created = time.Unix(secs, 0).UTC()
	} else {
		o.created = time.Unix(0, 0).UTC()
	}
	return o, nil
}

// parsePlatforms accepts what the go command can build statically for a
// base without libc: linux, and no variant but arm64's v8 (which is arm64).
func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if p.OS != "linux" || p.Architecture == "" || (p.Variant != "" && (p.Architecture != "arm64" || p.Variant != "v8")) {
			return nil, fmt.Errorf("platform %q: want linux/<GOARCH>, like linux/arm64", f)
		}
		for _, q := range ps {
			if q.Architecture == p.Architecture {
				return nil, fmt.Errorf("platform %q given twice", f)
			}
		}
		ps = append(ps, *p)
	}
	return ps, nil
}
