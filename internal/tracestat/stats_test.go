package main

import (
	"bytes"
	"context"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// handOff readies the goroutine waiting on ch: the wake-up tracestat must
// attribute to it.
//
//go:noinline
func handOff(ch chan<- struct{}) { ch <- struct{}{} }

// TestAnalyze traces a known workload (50 regions, each running, blocked
// in a sleep, and readying another goroutine once from handOff) and checks
// what analyze reports of it.
func TestAnalyze(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing unavailable: %v", err) // another test of the binary traces
	}
	const regions = 50
	ch := make(chan struct{})
	received := make(chan int)
	go func() {
		n := 0
		for range ch {
			n++
		}
		received <- n
	}()
	ctx := context.Background()
	for range regions {
		r := trace.StartRegion(ctx, "test.group")
		spin(200 * time.Microsecond)
		time.Sleep(time.Millisecond)
		handOff(ch)
		r.End()
		time.Sleep(200 * time.Microsecond) // a gap
	}
	close(ch)
	if n := <-received; n != regions {
		t.Fatalf("received %d hand-offs, want %d", n, regions)
	}
	trace.Stop()
	data := buf.Bytes()

	st, err := analyze(bytes.NewReader(data), "test.group", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.regions) != regions || len(st.gaps) != regions-1 {
		t.Errorf("%d regions and %d gaps, want %d and %d", len(st.regions), len(st.gaps), regions, regions-1)
	}
	if st.procs < 1 || st.window <= 0 {
		t.Errorf("window %v with %d processors", st.window, st.procs)
	}
	win := float64(st.window) / 1e6
	if st.held <= 0 || st.held > win+0.001 {
		t.Errorf("held %.3f ms of a %.3f ms window", st.held, win)
	}
	in := st.inRegion
	if in.running <= 0 || in.waiting < float64(regions)*0.5 { // each region sleeps 1 ms
		t.Errorf("inside the regions: running %.3f ms, blocked %.3f ms; want both, blocked ≥ %d × 0.5 ms", in.running, in.waiting, regions)
	}
	if total := in.running + in.runnable + in.syscall + in.waiting; total > st.held+0.001 {
		t.Errorf("the states inside the regions add up to %.3f ms, more than the %.3f ms held (one goroutine at a time)", total, st.held)
	}
	var fromHandOff int
	for _, s := range st.sources() {
		if strings.HasSuffix(s.fn, ".handOff") {
			fromHandOff = s.n
		}
	}
	// The receiver waits for each send (1.2 ms pass between them); one it
	// was late for is a wake-up of the sender instead. Half is a margin
	// for a loaded machine.
	if fromHandOff < regions/2 || fromHandOff > regions {
		t.Errorf("%d wake-ups from handOff, want about %d; sources %v", fromHandOff, regions, st.sources())
	}
	if st.wakeups < fromHandOff {
		t.Errorf("%d wake-ups in all, fewer than handOff's %d", st.wakeups, fromHandOff)
	}

	// Without a region type the window is the whole trace, and there are
	// no regions.
	all, err := analyze(bytes.NewReader(data), "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.regions) != 0 || all.window < st.window {
		t.Errorf("no region type: %d regions, window %v (the regions' window %v)", len(all.regions), all.window, st.window)
	}

	var out strings.Builder
	st.print(&out, regions, 5)
	for _, want := range []string{`region "test.group": 50`, "handOff", "an operation of 50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestWindow checks that only what happens inside the window counts: 5
// regions before a bench.test region, 20 inside it, 5 after.
func TestWindow(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing unavailable: %v", err)
	}
	ctx := context.Background()
	burst := func(n int) {
		for range n {
			r := trace.StartRegion(ctx, "test.burst")
			time.Sleep(time.Millisecond)
			r.End()
		}
	}
	burst(5)
	w := trace.StartRegion(ctx, "bench.test")
	burst(20)
	w.End()
	burst(5)
	trace.Stop()
	data := buf.Bytes()
	for _, c := range []struct {
		window string
		span   bool
		want   int
	}{
		{"", false, 20},           // the bench.* region
		{"bench.test", false, 20}, // named
		{"test.none", false, 30},  // no such region: the whole trace
		{"", true, 30},            // from the first test.burst to the last
	} {
		st, err := analyze(bytes.NewReader(data), "test.burst", c.window, c.span)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.regions) != c.want {
			t.Errorf("-window %q -span=%v: %d regions, want %d", c.window, c.span, len(st.regions), c.want)
		}
	}
}

// TestAnalyzeRefusesWhatIsNotATrace checks that a file that is not an
// execution trace gets an error, not a report.
func TestAnalyzeRefusesWhatIsNotATrace(t *testing.T) {
	for _, in := range []string{"", "not a trace", "go 1.26 trace\x00\x00\x00\x00garbage"} {
		if _, err := analyze(strings.NewReader(in), "x", "", false); err == nil {
			t.Errorf("analyze(%q): no error", in)
		}
	}
}

// spin keeps the goroutine running for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
