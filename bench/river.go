package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// riverReport is what the peer's module printed.
type riverReport struct {
	Version string            `json:"river"`
	Details map[string]string `json:"details"`
	Results []riverResult     `json:"results"`
}

type riverResult struct {
	Store         string  `json:"store"` // "PostgreSQL", "SQLite"
	Tuning        string  `json:"tuning"`
	MaxWorkers    int     `json:"max_workers"`
	FetchCooldown string  `json:"fetch_cooldown"`
	Jobs          int     `json:"jobs"`
	DrainSeconds  float64 `json:"drain_seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	Samples       int     `json:"latency_samples"`
	P50Ms         float64 `json:"latency_p50_ms"`
	P95Ms         float64 `json:"latency_p95_ms"`
	P99Ms         float64 `json:"latency_p99_ms"`
}

func (rr *riverReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, run from its own module (`cd bench/river && go run . -json`) in this run. \"Defaults\" is River's configuration "+
		"with the queue size its documentation uses (MaxWorkers 100); \"tuned\" is MaxWorkers 1000 and FetchCooldown 1 ms. Burn-down: N no-op "+
		"jobs inserted with InsertMany before the client starts, timed from Start until none is left uncompleted. Latency: sequential jobs "+
		"with an idle client, from Insert returning to Work being entered.\n\n", rr.Version)
	for _, k := range slices.Sorted(mapKeys(rr.Details)) {
		fmt.Fprintf(&b, "- %s: %s\n", k, rr.Details[k])
	}
	return b.String()
}

// storeName maps River's store titles to the suite's names.
func riverStore(title string) string {
	switch title {
	case "PostgreSQL":
		return "postgres"
	case "SQLite":
		return "sqlite"
	}
	return strings.ToLower(title)
}

func init() {
	register(scenario{ID: "river", order: 100, Title: "River (peer)",
		Method: "River burns down the same number of no-op jobs as B1 drains proposals, on the same PostgreSQL server and on SQLite with " +
			"the same durability settings, and its insert → work latency is measured as B2's approve → Execute-start is. " +
			"B1 and B2 give Countersign ÷ River (tuned) in their notes.",
		run: func(e *env) ([]Figure, error) {
			rr, err := runRiver(e)
			if err != nil {
				return nil, err
			}
			riverRun = rr
			return riverFigures(rr), nil
		}})
}

// riverFigures turns the peer's results into figures keyed
// river.<store>.<tuning>.<drain|p50|p95|p99>.
func riverFigures(rr *riverReport) []Figure {
	var figs []Figure
	for _, res := range rr.Results {
		st := riverStore(res.Store)
		k := fmt.Sprintf("river.%s.%s", st, res.Tuning)
		cfgText := fmt.Sprintf("%s (MaxWorkers %d, FetchCooldown %s)", res.Tuning, res.MaxWorkers, res.FetchCooldown)
		figs = append(figs,
			Figure{Key: k + ".drain", Scenario: "river", Store: st, Label: fmt.Sprintf("burn-down of %s no-op jobs, %s", thousands(fmt.Sprint(res.Jobs)), cfgText), Value: res.JobsPerSecond, Unit: "jobs/s"},
			Figure{Key: k + ".p50", Scenario: "river", Store: st, Label: fmt.Sprintf("insert → work, %d jobs, %s, p50", res.Samples, cfgText), Value: res.P50Ms, Unit: "ms"},
			Figure{Key: k + ".p95", Scenario: "river", Store: st, Label: fmt.Sprintf("insert → work, %s, p95", res.Tuning), Value: res.P95Ms, Unit: "ms"},
			Figure{Key: k + ".p99", Scenario: "river", Store: st, Label: fmt.Sprintf("insert → work, %s, p99", res.Tuning), Value: res.P99Ms, Unit: "ms"},
		)
	}
	return figs
}

// riverRun is the peer's report of this run, for the Markdown report.
var riverRun *riverReport

// runRiver builds and runs the peer's module.
func runRiver(e *env) (*riverReport, error) {
	if _, err := os.Stat(e.cfg.RiverDir); err != nil {
		return nil, fmt.Errorf("the peer's module: %w (run from the repository root, or pass -river-dir)", err)
	}
	b := newBar(-1, "river: build and run (%s)", e.cfg.RiverDir)
	defer b.done()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.add(1)
			}
		}
	}()
	cmd := exec.CommandContext(e.ctx, "go", "run", ".", "-json", "-n", fmt.Sprint(e.cfg.N), "-samples", fmt.Sprint(e.cfg.RiverSamples),
		"-stores", strings.Join(e.cfg.Stores, ","))
	cmd.Dir = e.cfg.RiverDir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(errOut.String()))
	}
	var rr riverReport
	if err := json.Unmarshal(out.Bytes(), &rr); err != nil {
		return nil, fmt.Errorf("the peer's output: %w", err)
	}
	return &rr, nil
}
