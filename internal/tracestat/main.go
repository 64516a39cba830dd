// Command tracestat says where a run's time went, from an execution trace
// (runtime/trace; `go run ./bench -exectrace F` writes one):
//
//	go run ./internal/tracestat [-region sqlitestore.group] [-window bench.B3 | -span] [-per 10000] [-top 15] TRACE
//
// It reports:
//
//   - the processors: how long fewer goroutines ran than there are
//     processors while others were ready to run (a processor asleep, or in
//     the scheduler, with work waiting);
//   - a region type (-region, default sqlitestore.group, SQLite's writer):
//     how many, how long, the share of the run some goroutine was inside
//     one, the states of the goroutines inside (running, ready but waiting
//     for a processor, in a system call, blocked), and the gaps between;
//   - the goroutines made ready, by the function that readied them (the
//     first frame of the readying stack outside the runtime and the
//     standard library's synchronisation), so that a run's hand-offs can
//     be counted per operation (-per N divides by N).
//
// Everything is measured inside a window: the longest region of the type
// -window names, or by default of a type that begins "bench." (the bench
// marks B3's timed run as a region, bench.B3), so that a run's set-up and
// pauses are left out; the whole trace when there is none. With -span it
// is the span from the first region of the -region type to the last, for
// a trace the bench did not mark. docs/profiles/scale.md (change 20)
// reports what it printed for B3.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	region := flag.String("region", "sqlitestore.group", "the region type to measure (empty: none)")
	per := flag.Int("per", 0, "divide the wake-up counts by this many operations (0: do not)")
	top := flag.Int("top", 15, "wake-up sources to list")
	span := flag.Bool("span", false, "the window is the span from the first -region to the last (for a trace with no bench.* region)")
	win := flag.String("window", "", `the region type whose longest region is the window (empty: the longest whose type begins "bench.", else the whole trace)`)
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./internal/tracestat [flags] TRACE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracestat:", err)
		os.Exit(1)
	}
	defer f.Close()
	st, err := analyze(f, *region, *win, *span)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracestat:", err)
		os.Exit(1)
	}
	st.print(os.Stdout, *per, *top)
}

// print writes the report.
func (st *stats) print(w io.Writer, per, top int) {
	win := st.window.Seconds() * 1000
	share := func(ms float64) string { return fmt.Sprintf("%.0f ms (%.1f %%)", ms, 100*ms/win) }
	fmt.Fprintf(w, "window: %.0f ms, %d processors\n", win, st.procs)
	fmt.Fprintf(w, "fewer goroutines running than processors while others were ready: %s\n", share(st.idleWithWork))
	if st.region != "" {
		fmt.Fprintf(w, "\nregion %q: %d, p50 %v, p90 %v, p99 %v\n", st.region, len(st.regions), pct(st.regions, 50), pct(st.regions, 90), pct(st.regions, 99))
		fmt.Fprintf(w, "  held (some goroutine inside one): %s\n", share(st.held))
		for _, s := range []struct {
			name string
			ms   float64
		}{
			{"running", st.inRegion.running},
			{"ready, waiting for a processor", st.inRegion.runnable},
			{"in a system call", st.inRegion.syscall},
			{"blocked", st.inRegion.waiting},
		} {
			fmt.Fprintf(w, "  inside, %s: %s\n", s.name, share(s.ms))
		}
		fmt.Fprintf(w, "  gaps between: %d, p50 %v, p90 %v, sum %s\n", len(st.gaps), pct(st.gaps, 50), pct(st.gaps, 90), share(sum(st.gaps)))
	}
	fmt.Fprintf(w, "\ngoroutines made ready: %d", st.wakeups)
	if per > 0 {
		fmt.Fprintf(w, " (%.2f an operation of %d)", float64(st.wakeups)/float64(per), per)
	}
	fmt.Fprintln(w, ", by what readied them:")
	for i, s := range st.sources() {
		if i == top {
			break
		}
		if per > 0 {
			fmt.Fprintf(w, "  %8d  %6.2f  %s\n", s.n, float64(s.n)/float64(per), s.fn)
		} else {
			fmt.Fprintf(w, "  %8d  %s\n", s.n, s.fn)
		}
	}
}
