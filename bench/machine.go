package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// machine describes where the run happened: CPU, cores, memory, OS, Go, and
// the database servers' versions.
func machine() map[string]string {
	m := map[string]string{"cpu": runtime.GOARCH, "cores": strconv.Itoa(runtime.NumCPU()), "memory": "unknown",
		"go": runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, "os": runtime.GOOS}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil {
				m["memory"] = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["os"] = "Linux " + strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, pgtest.DSN()); err == nil {
		var v, fsync, sync string
		if conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')").Scan(&v, &fsync, &sync) == nil {
			m["postgres"] = fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s)", v, fsync, sync)
		}
		_ = conn.Close(ctx)
	}
	return m
}
