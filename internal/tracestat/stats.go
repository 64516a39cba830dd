package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// stats is what analyze found in a trace.
type stats struct {
	window time.Duration
	procs  int
	// idleWithWork is the time, in ms, when fewer goroutines ran than
	// there are processors while at least one was ready to run.
	idleWithWork float64

	region  string
	regions []time.Duration // each region's length
	gaps    []time.Duration // between one region's end and the next's start, none open
	held    float64         // ms with a region open
	// inRegion is the time, in ms, of the goroutines inside a region by
	// their state (summed over goroutines: two inside at once count twice).
	inRegion struct{ running, runnable, syscall, waiting float64 }

	wakeups int
	bySrc   map[string]int
}

// source is a function that made goroutines ready, and how many.
type source struct {
	fn string
	n  int
}

// sources returns the wake-up sources, most first.
func (st *stats) sources() []source {
	out := make([]source, 0, len(st.bySrc))
	for fn, n := range st.bySrc {
		out = append(out, source{fn, n})
	}
	slices.SortFunc(out, func(a, b source) int {
		return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.fn, b.fn))
	})
	return out
}

// analyze reads a trace twice: once for the window (see window) and the
// processors, once to measure what falls inside it: region is the region
// type to measure.
func analyze(r io.Reader, region, windowType string, span bool) (*stats, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	start, end, procs, err := window(data, windowType, region, span)
	if err != nil {
		return nil, err
	}
	st := &stats{window: time.Duration(end - start), procs: procs, region: region, bySrc: map[string]int{}}
	if end <= start {
		return st, nil
	}
	tr, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	var (
		gstate            = map[trace.GoID]trace.GoState{}
		inside            = map[trace.GoID]trace.Time{}
		running, runnable int
		last              trace.Time
		open              int
		lastEnd           trace.Time
	)
	count := func(s trace.GoState, d int) {
		switch s {
		case trace.GoRunning:
			running += d
		case trace.GoRunnable:
			runnable += d
		}
	}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read trace: %w", err)
		}
		now := ev.Time()
		// The time since the last event, clipped to the window, goes to
		// the states that held through it.
		if from, to := max(last, start), min(now, end); to > from {
			ms := float64(to-from) / 1e6
			if running < procs && runnable > 0 {
				st.idleWithWork += ms
			}
			if len(inside) > 0 {
				st.held += ms
			}
			for g := range inside {
				switch gstate[g] {
				case trace.GoRunning:
					st.inRegion.running += ms
				case trace.GoRunnable:
					st.inRegion.runnable += ms
				case trace.GoSyscall:
					st.inRegion.syscall += ms
				default:
					st.inRegion.waiting += ms
				}
			}
		}
		last = now
		switch ev.Kind() {
		case trace.EventStateTransition:
			x := ev.StateTransition()
			if x.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := x.Resource.Goroutine()
			from, to := x.Goroutine()
			prev, seen := gstate[g]
			if !seen {
				prev = from
			}
			count(prev, -1)
			count(to, +1)
			running, runnable = max(running, 0), max(runnable, 0)
			gstate[g] = to
			if from == trace.GoWaiting && to == trace.GoRunnable && now >= start && now <= end {
				st.wakeups++
				st.bySrc[readier(ev.Stack())]++
			}
		case trace.EventRegionBegin:
			if region == "" || ev.Region().Type != region || now < start || now > end {
				continue
			}
			if open == 0 && lastEnd != 0 {
				st.gaps = append(st.gaps, time.Duration(now-lastEnd))
			}
			open++
			inside[ev.Goroutine()] = now
		case trace.EventRegionEnd:
			if region == "" || ev.Region().Type != region {
				continue
			}
			g := ev.Goroutine()
			began, ok := inside[g]
			if !ok {
				continue // begun before the trace
			}
			delete(inside, g)
			st.regions = append(st.regions, time.Duration(now-began))
			open--
			if open == 0 {
				lastEnd = now
			}
		}
	}
	return st, nil
}

// window returns the span of the longest complete region whose type is
// windowType, or, when windowType is empty, begins with "bench." (the
// bench marks its timed runs so); the whole trace when there is none.
// With span set, it is instead the span from the first region of type
// region to the last (for a trace the bench did not mark). procs is the
// number of processors the trace shows.
func window(data []byte, windowType, region string, span bool) (start, end trace.Time, procs int, err error) {
	tr, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read trace: %w", err)
	}
	matches := func(typ string) bool {
		if windowType == "" {
			return strings.HasPrefix(typ, "bench.")
		}
		return typ == windowType
	}
	var first, last trace.Time
	seen := map[trace.ProcID]bool{}
	type key struct {
		g   trace.GoID
		typ string
	}
	begun := map[key]trace.Time{}
	var spanFrom, spanTo trace.Time
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("read trace: %w", err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if p := ev.Proc(); p != trace.NoProc {
			seen[p] = true
		}
		switch ev.Kind() {
		case trace.EventRegionBegin:
			typ := ev.Region().Type
			if matches(typ) || span && typ == region {
				begun[key{ev.Goroutine(), typ}] = ev.Time()
			}
		case trace.EventRegionEnd:
			k := key{ev.Goroutine(), ev.Region().Type}
			b, ok := begun[k]
			if !ok {
				continue
			}
			delete(begun, k)
			if span && k.typ == region {
				if spanFrom == 0 {
					spanFrom = b
				}
				spanTo = ev.Time()
			}
			if matches(k.typ) && ev.Time()-b > end-start {
				start, end = b, ev.Time()
			}
		}
	}
	if span && spanTo > spanFrom {
		return spanFrom, spanTo, len(seen), nil
	}
	if end > start {
		return start, end, len(seen), nil
	}
	return first, last, len(seen), nil
}

// readier names the function that made a goroutine ready: the first frame
// of the readying stack that is not the runtime's or the standard
// library's synchronisation.
func readier(s trace.Stack) string {
	for f := range s.Frames() {
		fn := f.Func
		if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") || strings.HasPrefix(fn, "internal/") {
			continue
		}
		return fn
	}
	return "(no stack: the network poller, a timer, the scheduler)"
}

// pct returns the p-th percentile of ds (0 for none).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}

// sum returns the total of ds in ms.
func sum(ds []time.Duration) float64 {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return float64(t) / 1e6
}
