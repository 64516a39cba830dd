package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/countersign/countersign/store"
)

func init() {
	register(scenario{ID: "audit", order: 65, perStore: true,
		Title: "The audit chain's cost to B3 and B6",
		Method: "B3 (at its main load, -agents, alone) and B6 exactly as above, each run R times with the audit chain's sealer (one per process, sealing every second what committed, " +
			"as `countersign serve` runs it) and R times without, in alternating order (off, on; then on, off; …) so that a drift of the machine " +
			"falls on both. Each figure is the median of its R runs; the ratio is the median of the R rounds' with ÷ without (1.00: no cost), each round's two runs " +
			"side by side in time. The goal is a ratio of at least 0.95. Because a 2-core shared machine's runs vary by more than 5 %, the sealer's own work is " +
			"also measured as CPU time: this process's (load, server, worker and sealer all run in it) and, on PostgreSQL, that of the run's own " +
			"server backends (read from /proc; the server's shared background processes are not counted), per action or decision. A CPU-bound machine's " +
			"throughput follows CPU time per unit of work, which other processes on the machine barely move: without ÷ with is the throughput kept. " +
			"Last, the seals are timed (their statements, hashing and commits, waits included) as a share of the run's wall time × the cores, " +
			"and the CPU time of the thread each seal runs on is set against the run's CPU time: a share that the machine's speed, which moves " +
			"every other figure here from run to run, moves in both its terms alike (SQLite only, whose seals run in this process; it leaves " +
			"out the collector's background work).",
		run: auditCost})
}

// auditCost runs B3 and B6 with and without the sealer, alternating.
func auditCost(e *env) ([]Figure, error) {
	rounds := max(e.cfg.AuditRounds, 1)
	var figs []Figure
	for _, m := range costMeasures(e) {
		got := map[sealerMode][]float64{}
		var ratios, shares, perEvent, cpuRatios, cpuShares, cpuPerEvent []float64
		cpu := map[sealerMode][]float64{}
		for r := range rounds {
			order := []sealerMode{sealerOff, sealerOn}
			if r%2 == 1 {
				order = []sealerMode{sealerOn, sealerOff}
			}
			for _, mode := range order {
				quiet(e.cfg)
				run := *e
				run.sealer = mode
				if mode == sealerOn {
					run.seals = &sealClock{threadCPU: e.target.name == "sqlite"}
				}
				start := time.Now()
				meter, err := startCPU(e.target.name == "postgres")
				if err != nil {
					return figs, err
				}
				out, err := m.run(&run)
				self, pg := meter.stop()
				cpu[mode] = append(cpu[mode], (self+pg)/float64(m.units)*1e6)
				if c := run.seals; c != nil && err == nil {
					shares = append(shares, float64(c.nanos.Load())/float64(time.Since(start).Nanoseconds()*int64(runtime.NumCPU())))
					if n := c.events.Load(); n > 0 {
						perEvent = append(perEvent, float64(c.nanos.Load())/float64(n)/1e3)
						cpuPerEvent = append(cpuPerEvent, float64(c.cpu.Load())/float64(n)/1e3)
					}
					if c.threadCPU && self+pg > 0 {
						cpuShares = append(cpuShares, float64(c.cpu.Load())/1e9/(self+pg))
					}
				}
				if err != nil {
					return figs, fmt.Errorf("%s (sealer %s): %w", m.id, modeName(mode), err)
				}
				v, err := m.value(out)
				if err != nil {
					return figs, err
				}
				got[mode] = append(got[mode], v)
			}
			ratios = append(ratios, got[sealerOn][r]/got[sealerOff][r])
			cpuRatios = append(cpuRatios, cpu[sealerOff][r]/cpu[sealerOn][r])
		}
		off, on := median(got[sealerOff]), median(got[sealerOn])
		k := "audit." + e.target.name + "." + strings.ToLower(m.id)
		figs = append(figs,
			Figure{Key: k + ".off", Label: fmt.Sprintf("%s without the sealer, median of %d (%s)", m.label, rounds, runs(got[sealerOff])), Value: off, Unit: m.unit},
			Figure{Key: k + ".on", Label: fmt.Sprintf("%s with the sealer, median of %d (%s)", m.label, rounds, runs(got[sealerOn])), Value: on, Unit: m.unit},
			Figure{Key: k + ".ratio", Label: fmt.Sprintf("%s: with ÷ without, median of the rounds' (%s)", m.label, ratioList(ratios)), Value: median(ratios), Unit: "ratio"},
			Figure{Key: k + ".cpu_off", Label: fmt.Sprintf("%s: CPU time per %s without the sealer, median (%s)", m.label, m.per, runs(cpu[sealerOff])), Value: median(cpu[sealerOff]), Unit: "µs"},
			Figure{Key: k + ".cpu_on", Label: fmt.Sprintf("%s: CPU time per %s with the sealer, median (%s)", m.label, m.per, runs(cpu[sealerOn])), Value: median(cpu[sealerOn]), Unit: "µs"},
			Figure{Key: k + ".cpu_ratio", Label: fmt.Sprintf("%s: CPU without ÷ with, median of the rounds' (%s): the throughput a CPU-bound machine keeps", m.label, ratioList(cpuRatios)), Value: median(cpuRatios), Unit: "ratio"},
			Figure{Key: k + ".share", Label: m.label + ": the sealer's seals, share of the machine's time (median)", Value: 100 * median(shares), Unit: "%"},
			Figure{Key: k + ".per_event", Label: m.label + ": the sealer's time per event sealed (median)", Value: median(perEvent), Unit: "µs"})
		if len(cpuShares) == 0 {
			continue // not measured: the seals ran in the database server
		}
		figs = append(figs,
			Figure{Key: k + ".seal_cpu_share", Label: fmt.Sprintf("%s: the seals' own CPU time, share of the run's, median (%s): the throughput a CPU-bound machine gives the chain", m.label, percentList(cpuShares)), Value: 100 * median(cpuShares), Unit: "%"},
			Figure{Key: k + ".seal_cpu_per_event", Label: m.label + ": the seals' own CPU time per event sealed (median)", Value: median(cpuPerEvent), Unit: "µs"})
	}
	return figs, nil
}

func modeName(m sealerMode) string {
	if m == sealerOn {
		return "on"
	}
	return "off"
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runs lists the runs' figures, rounded.
func runs(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(parts, ", ")
}

// percentList lists shares as percentages, rounded.
func percentList(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%.1f", 100*v)
	}
	return strings.Join(out, ", ")
}

func ratioList(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(out, ", ")
}

// sealClock adds up the time a run's seals take, the CPU time they use
// (with threadCPU) and the events they seal.
type sealClock struct {
	nanos, cpu, events atomic.Int64
	// threadCPU has each seal hold its thread, to count that thread's CPU
	// time. Only for a store in this process (SQLite): a PostgreSQL seal
	// waits on the network between its statements, and a goroutine locked
	// to its thread hands its processor over at every wait and takes it
	// back after, which measured PostgreSQL B3 × 0.89 where the seals left
	// free measured × 0.97–1.04; and the server's CPU for those statements,
	// the larger part, would not be counted anyway.
	threadCPU bool
}

// timedSeals is a store whose seals are timed by c.
type timedSeals struct {
	store.Store
	c *sealClock
}

func (s timedSeals) Unwrap() store.Store { return s.Store }

// SealEvents times the seal, and counts the CPU time of the thread it runs
// on, which it keeps for the seal: the sealer's own work in this process
// (its statements in the driver, the hashing, the garbage collection it is
// made to assist with), not the collector's background work nor, on
// PostgreSQL, the server's.
func (s timedSeals) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	var cpu0 int64
	if s.c.threadCPU {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 = threadCPU()
	}
	start := time.Now()
	res, err := s.Store.SealEvents(ctx, params)
	s.c.nanos.Add(time.Since(start).Nanoseconds())
	if s.c.threadCPU {
		s.c.cpu.Add(threadCPU() - cpu0)
	}
	if res != nil {
		s.c.events.Add(int64(res.Sealed))
	}
	return res, err
}

// threadCPU is the CPU time the calling thread has used, in nanoseconds (0
// where the clock cannot be read).
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
