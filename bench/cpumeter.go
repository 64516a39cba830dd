package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// cpuMeter adds up the CPU time one run costs: this process's (the load,
// the server, the worker, the sealer: all in process) and, on PostgreSQL,
// that of the run's own server backends, found by an application name
// given to every connection the run opens (PGAPPNAME) and read from
// /proc while they live. CPU time per unit of work is what a CPU-bound
// machine's throughput follows, and unlike throughput it barely moves when
// other processes share the machine. PostgreSQL's background processes
// (WAL writer, checkpointer, autovacuum) are shared with other clients and
// not counted.
type cpuMeter struct {
	start   syscall.Rusage
	app     string
	stopped chan struct{}
	done    chan struct{}

	mu  sync.Mutex
	pgs map[int]float64 // backend pid → its CPU seconds when last read
}

var meterSeq int

// startCPU starts measuring; with pg, the run's backends are sampled.
func startCPU(pg bool) (*cpuMeter, error) {
	m := &cpuMeter{pgs: map[int]float64{}, stopped: make(chan struct{}), done: make(chan struct{})}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &m.start); err != nil {
		return nil, err
	}
	if !pg {
		close(m.done)
		return m, nil
	}
	meterSeq++
	m.app = fmt.Sprintf("countersign-bench-%d-%d", os.Getpid(), meterSeq)
	if err := os.Setenv("PGAPPNAME", m.app); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(pgtest.DSN())
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "countersign-bench-meter"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(m.done)
		defer conn.Close(context.Background())
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample(conn)
			select {
			case <-m.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return m, nil
}

// sample reads the CPU time of every backend of the run.
func (m *cpuMeter) sample(conn *pgx.Conn) {
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		return
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return
	}
	for _, pid := range pids {
		if s, ok := procCPU(int(pid)); ok {
			m.mu.Lock()
			m.pgs[int(pid)] = max(m.pgs[int(pid)], s)
			m.mu.Unlock()
		}
	}
}

// procCPU is a process's user and system CPU seconds, from /proc.
func procCPU(pid int) (float64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command (which may hold spaces) in parentheses.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (utime + stime) / 100, true // USER_HZ is 100 on Linux
}

// stop ends the measurement: CPU seconds of this process and of the run's
// PostgreSQL backends. It must be called after the run closed its store
// no earlier than its last sample; backends are read while they live.
func (m *cpuMeter) stop() (self, pg float64) {
	var end syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
	close(m.stopped)
	<-m.done
	_ = os.Unsetenv("PGAPPNAME")
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	self = tv(end.Utime) - tv(m.start.Utime) + tv(end.Stime) - tv(m.start.Stime)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.pgs {
		pg += s
	}
	return self, pg
}
