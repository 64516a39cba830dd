package main

import (
	"cmp"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by the release build (internal/release) with -ldflags -X: the
// release's version (a git tag such as v0.3.0, or what git describe says
// between tags) and when it was built. A build without them (go build, go
// run, go install ./cmd/countersign) reads what Go's build info knows.
var (
	version   string
	buildDate string
)

// buildVersion is what `countersign version` prints.
type buildVersion struct {
	Version string // v0.3.0, or (devel)
	Commit  string // the commit's hash, 12 hex digits, "-dirty" when built from a modified tree; "" when unknown
	// Date is when the binary was built (a release), or else when its
	// commit was made (CommitDate true); "" when neither is known.
	Date       string
	CommitDate bool
	Go         string // go1.26.8 linux/amd64
}

// readVersion combines the release's stamps with Go's build info: the
// module's version (set by go install module@version), and the VCS
// settings go build records in a git checkout (vcs.revision, vcs.time,
// vcs.modified).
func readVersion(bi *debug.BuildInfo, ok bool, stampVersion, stampDate string) buildVersion {
	v := buildVersion{Version: "(devel)", Go: goruntime.Version() + " " + goruntime.GOOS + "/" + goruntime.GOARCH}
	if !ok || bi == nil {
		v.Version = cmp.Or(stampVersion, v.Version)
		v.Date = stampDate
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion + " " + goruntime.GOOS + "/" + goruntime.GOARCH
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	v.Version = cmp.Or(stampVersion, v.Version)
	var revision, vcsTime string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" {
		v.Commit = revision[:min(12, len(revision))]
		if modified {
			v.Commit += "-dirty"
		}
	}
	switch {
	case stampDate != "":
		v.Date = stampDate
	case vcsTime != "":
		v.Date, v.CommitDate = vcsTime, true
	}
	return v
}

func (v buildVersion) write(w io.Writer) {
	fmt.Fprintf(w, "countersign %s\n", v.Version)
	if v.Commit != "" {
		fmt.Fprintf(w, "commit:     %s\n", v.Commit)
	}
	switch {
	case v.Date != "" && v.CommitDate:
		fmt.Fprintf(w, "committed:  %s\n", v.Date)
	case v.Date != "":
		fmt.Fprintf(w, "built:      %s\n", v.Date)
	}
	fmt.Fprintf(w, "go:         %s\n", v.Go)
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Long: "Print the version (a release's tag, or the module version go install recorded, or (devel)), " +
			"the commit it was built from (-dirty when the tree had changes), when a release was built " +
			"(or, for any other build, when its commit was made), and the Go toolchain and platform.",
		Args: noArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			bi, ok := debug.ReadBuildInfo()
			readVersion(bi, ok, version, buildDate).write(cmd.OutOrStdout())
		},
	}
}
