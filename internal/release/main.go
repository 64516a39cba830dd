// Command release builds Countersign's release: for each platform, a
// static binary (CGO_ENABLED=0) stamped with the version, commit and build
// date, packed with the licence, README and changelog into
// countersign_<version>_<os>_<arch>.tar.gz; a CycloneDX software bill of
// materials of each (countersign_<version>_<os>_<arch>.cdx.json, made by
// cyclonedx-gomod from the modules that binary links); and SHA256SUMS over
// all of them, in sha256sum's format, so `sha256sum -c SHA256SUMS` checks
// a download.
//
//	go run ./internal/release [-version v0.3.0] [-out dist] [-platforms linux/amd64,darwin/arm64]
//
// make release runs it for linux and darwin on amd64 and arm64. The
// version defaults to `git describe --tags --always --dirty`; the build
// date to SOURCE_DATE_EPOCH when set (a reproducible build), else now.
// The commit comes from Go's own VCS stamp (-buildvcs=true), which
// `countersign version` reads.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultPlatforms are what a release is built for.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// sbomTool makes the bills of materials; pinned, run with go run so that it
// is no dependency of the module.
const sbomTool = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0"

// packed are the files beside the binary in each archive.
var packed = []string{"LICENSE", "README.md", "CHANGELOG.md"}

// versionPattern is what a version may be: a tag or git describe's output.
var versionPattern = regexp.MustCompile(`^v?[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)

func main() {
	out := flag.String("out", "dist", "the folder the release is written to (emptied of a previous release's files first)")
	ver := flag.String("version", "", "the release's version (default: git describe --tags --always --dirty)")
	plats := flag.String("platforms", strings.Join(DefaultPlatforms, ","), "comma-separated GOOS/GOARCH pairs")
	flag.Parse()
	ctx := context.Background()
	r := Release{Out: *out, Version: *ver, Platforms: strings.Split(*plats, ",")}
	files, err := r.Build(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println(filepath.Join(r.Out, f))
	}
}

// Release is one release build, run from the module's root.
type Release struct {
	Out       string
	Version   string
	Platforms []string
	// Date is the build date; zero takes SOURCE_DATE_EPOCH, else now.
	Date time.Time
	// Log receives what each step runs; nil discards it.
	Log io.Writer
}

// Build builds every platform's archive and bill of materials and the
// sums, and returns the files' names in Out, SHA256SUMS last.
func (r *Release) Build(ctx context.Context) ([]string, error) {
	if r.Log == nil {
		r.Log = io.Discard
	}
	if r.Version == "" {
		v, err := output(ctx, "git", "describe", "--tags", "--always", "--dirty")
		if err != nil {
			return nil, fmt.Errorf("version: %w (pass -version)", err)
		}
		r.Version = v
	}
	if !versionPattern.MatchString(r.Version) {
		return nil, fmt.Errorf("version %q: want a tag such as v0.3.0", r.Version)
	}
	date, err := r.date()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, p := range r.Platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH", p)
		}
		base := fmt.Sprintf("countersign_%s_%s_%s", r.Version, goos, goarch)
		if err := r.binary(ctx, goos, goarch, date, base); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", goos, goarch, err)
		}
		if err := r.sbom(ctx, goos, goarch, base+".cdx.json"); err != nil {
			return nil, fmt.Errorf("%s/%s: bill of materials: %w", goos, goarch, err)
		}
		files = append(files, base+".tar.gz", base+".cdx.json")
	}
	if err := writeSums(r.Out, files); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

func (r *Release) date() (time.Time, error) {
	switch s := os.Getenv("SOURCE_DATE_EPOCH"); {
	case !r.Date.IsZero():
		return r.Date.UTC(), nil
	case s != "":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Now().UTC().Truncate(time.Second), nil
}

// binary builds the static binary for goos/goarch and packs it as
// base.tar.gz in Out.
func (r *Release) binary(ctx context.Context, goos, goarch string, date time.Time, base string) error {
	tmp, err := os.MkdirTemp("", "countersign-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "countersign")
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.buildDate=%s", r.Version, date.Format(time.RFC3339))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags", ldflags, "-o", bin, "./cmd/countersign")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	if err := r.run(cmd); err != nil {
		return err
	}
	return pack(filepath.Join(r.Out, base+".tar.gz"), base, date, append([]string{bin}, packed...))
}

// sbom writes the CycloneDX bill of materials of the modules the
// goos/goarch binary links. The tool is built for this machine (go run
// without GOOS and GOARCH) and run through env with them set (go run
// -exec), since it asks the go command for that platform's packages.
func (r *Release) sbom(ctx context.Context, goos, goarch, name string) error {
	abs, err := filepath.Abs(filepath.Join(r.Out, name))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "run", "-exec", "env CGO_ENABLED=0 GOOS="+goos+" GOARCH="+goarch,
		sbomTool, "app", "-json", "-main", "cmd/countersign", "-output", abs, ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	return r.run(cmd)
}

func (r *Release) run(cmd *exec.Cmd) error {
	fmt.Fprintln(r.Log, "+", strings.Join(cmd.Args, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// pack writes a gzipped tar of files under the folder base/, each with
// mode 0755 (the binary) or 0644 and the build date as its time, so the
// archive's bytes depend only on the files.
func pack(path, base string, date time.Time, files []string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for i, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if i == 0 {
			mode = 0o755
		}
		h := &tar.Header{Name: base + "/" + filepath.Base(name), Mode: mode, Size: int64(len(data)), ModTime: date, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeSums writes SHA256SUMS for files in dir, one "hash  name" line each.
func writeSums(dir string, files []string) error {
	var b strings.Builder
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
