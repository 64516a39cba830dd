package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRelease builds the release for this machine's platform, as make
// release builds every platform, and checks what a user downloads: the
// archive holds a static binary and the licence, README and changelog;
// the binary prints the release's version, its commit and build date; the
// bill of materials is CycloneDX naming the modules the binary links; and
// SHA256SUMS checks every file. It compiles the server from scratch
// (minutes), so it runs in make test-release (part of make test), not in
// every go test.
func TestRelease(t *testing.T) {
	if os.Getenv("COUNTERSIGN_RELEASE_TEST") == "" {
		t.Skip("set COUNTERSIGN_RELEASE_TEST=1 (make test-release does) to build a release")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	out := t.TempDir()
	date := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	plat := runtime.GOOS + "/" + runtime.GOARCH
	r := Release{Out: out, Version: "v0.3.0-rc.1", Platforms: []string{plat}, Date: date}
	files, err := r.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	base := "countersign_v0.3.0-rc.1_" + runtime.GOOS + "_" + runtime.GOARCH
	want := []string{base + ".tar.gz", base + ".cdx.json", "SHA256SUMS"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", files, want)
	}

	// The sums, as sha256sum -c reads them.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("SHA256SUMS:\n%s\nwant a line for the archive and one for the bill", sums)
	}
	for _, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		data, err := os.ReadFile(filepath.Join(out, name))
		if !ok || err != nil {
			t.Fatalf("SHA256SUMS line %q: %v", l, err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sum %s in SHA256SUMS, the file's is %x", name, sum, got)
		}
	}
	if path, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(path, "-c", "SHA256SUMS")
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, b)
		}
	}

	// The archive.
	bin := filepath.Join(t.TempDir(), "countersign")
	names := unpack(t, filepath.Join(out, base+".tar.gz"), bin)
	for _, n := range []string{"countersign", "LICENSE", "README.md", "CHANGELOG.md"} {
		if !names[base+"/"+n] {
			t.Errorf("the archive has no %s/%s (it has %v)", base, n, names)
		}
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the binary names a dynamic loader: it is not static")
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("the binary links %v: it is not static", libs)
		}
		f.Close()
	}
	v, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("countersign version: %v", err)
	}
	head, _, _ := strings.Cut(string(v), "\n")
	if head != "countersign v0.3.0-rc.1" || !strings.Contains(string(v), "built:      2026-12-05T04:00:00Z") ||
		!strings.Contains(string(v), "commit:     ") {
		t.Errorf("countersign version printed:\n%s\nwant the version, a commit and the build date", v)
	}
	commit, _ := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if c := strings.TrimSpace(string(commit)); c != "" && !strings.Contains(string(v), "commit:     "+c) {
		t.Errorf("countersign version printed:\n%s\nwant commit %s", v, c)
	}

	// The bill of materials.
	raw, err := os.ReadFile(filepath.Join(out, base+".cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Metadata   struct{ Component struct{ Name string } }
		Components []struct {
			Name, Version, Purl string
		}
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatalf("bill of materials: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/countersign/countersign" {
		t.Errorf("bill of materials: format %q of %q", bom.BOMFormat, bom.Metadata.Component.Name)
	}
	have := map[string]string{}
	for _, c := range bom.Components {
		have[c.Name] = c.Version
	}
	for _, m := range []string{"github.com/jackc/pgx/v5", "modernc.org/sqlite", "github.com/spf13/cobra"} {
		if have[m] == "" {
			t.Errorf("bill of materials: no %s among %d components", m, len(bom.Components))
		}
	}
}

// unpack reads a gzipped tar, writes its countersign binary to bin and
// returns the names it holds.
func unpack(t *testing.T, path, bin string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	names := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		if strings.HasSuffix(h.Name, "/countersign") {
			if h.Mode&0o111 == 0 {
				t.Errorf("%s: mode %o, not executable", h.Name, h.Mode)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestReleaseRefusesBadInput(t *testing.T) {
	for name, r := range map[string]Release{
		"version":  {Out: t.TempDir(), Version: "v1 ; rm -rf", Platforms: []string{"linux/amd64"}},
		"platform": {Out: t.TempDir(), Version: "v1.0.0", Platforms: []string{"linux"}},
	} {
		if _, err := r.Build(t.Context()); err == nil {
			t.Errorf("%s: Build accepted %+v", name, r)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	r := Release{Out: t.TempDir(), Version: "v1.0.0", Platforms: []string{"linux/amd64"}}
	if _, err := r.Build(t.Context()); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("a bad SOURCE_DATE_EPOCH: %v", err)
	}
}
