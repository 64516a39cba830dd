package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
)

// bar is a progress bar on standard error.
type bar struct{ pb *progressbar.ProgressBar }

// newBar starts a bar of total steps (-1: unknown total, a spinner).
func newBar(total int, format string, args ...any) *bar {
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%-44s", fmt.Sprintf(format, args...))),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }),
	)}
}

// add moves the bar n steps; it is safe for concurrent use.
func (b *bar) add(n int) { _ = b.pb.Add(n) }

// set moves the bar to n.
func (b *bar) set(n int) { _ = b.pb.Set(n) }

// done completes the bar.
func (b *bar) done() { _ = b.pb.Finish() }
