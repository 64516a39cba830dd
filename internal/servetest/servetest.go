// Package servetest runs the real countersign binary for end-to-end tests:
// it builds cmd/countersign, serves it on a store of the test's own
// (SQLite, or a PostgreSQL schema), and runs a folder's node tests against
// it, checking node --test's summary rather than its exit status alone.
package servetest

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/pgtest"

	_ "modernc.org/sqlite" // SQLiteWriteLocked's driver
)

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// Build builds cmd/countersign into t's temporary folder and returns the
// binary's path.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	return bin
}

// SQLiteStore is a store setting for a new SQLite file of t's own.
func SQLiteStore(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "countersign.db")
}

// PostgresStore is a store setting for the test server (pgtest) on a
// schema of t's own, dropped when t ends, after a server started later has
// stopped (cleanups run last first). pgtest's DSN sets search_path to the
// schema, but the store names its schema in every statement, so the URL's
// schema parameter, which serve takes out and gives the store, is what
// puts the tables there. The pool is sized for a test (pgtest.PoolDSN).
// Without a reachable PostgreSQL t skips, except in CI, where it fails.
func PostgresStore(t testing.TB) string {
	dsn, schema := pgtest.NewSchema(t)
	u, err := url.Parse(pgtest.PoolDSN(dsn))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL, the form a configuration's store takes", pgtest.EnvDSN)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Start serves bin with the configuration at config (with env added to
// the process's environment) and returns its URL once it listens. t's
// cleanup stops it with SIGTERM, and logs what it printed when t failed.
func Start(t testing.TB, bin, config string, env ...string) string {
	t.Helper()
	return Serve(t, bin, []string{"--config", config}, env...)
}

// Serve is Start with serve's arguments (after --listen) as given: a
// --store without a configuration serves the demo.
func Serve(t testing.TB, bin string, args []string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	found := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	// done is closed once the process exited, with its error in waitErr:
	// both the wait for it to listen and the cleanup read it.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
		if t.Failed() {
			t.Logf("countersign serve:\n%s", logs.String())
		}
	})
	select {
	case base := <-found:
		return base
	case <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", waitErr, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}

// nodeSummary finds the counts node --test's TAP reporter ends with.
var nodeSummary = regexp.MustCompile(`(?m)^# (pass|fail|skipped|todo|cancelled) ([0-9]+)$`)

// NPMTest runs npm test (node --test) in dir with env, within timeout, and
// fails t unless every node test passed and there was at least one: no
// failures, skips, todos or cancellations. It returns the number passed.
func NPMTest(t testing.TB, dir string, timeout time.Duration, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), nodetest.QuietEnv...), env...)
	// npm starts node as its child: on the deadline the whole group is
	// killed, so that a hung node test cannot keep the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	counts := map[string]string{}
	for _, m := range nodeSummary.FindAllStringSubmatch(string(out), -1) {
		counts[m[1]] = m[2]
	}
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["todo"] != "0" || counts["cancelled"] != "0" ||
		counts["pass"] == "" || counts["pass"] == "0" {
		t.Fatalf("npm test passed with failures, skips or no tests (%v):\n%s", counts, out)
	}
	t.Logf("npm test: %s node tests pass\n%s", counts["pass"], out)
	return counts["pass"]
}

// SQLiteWriteLocked reports whether some process holds the write lock of
// the SQLite database at path (BEGIN IMMEDIATE fails at once when one does;
// an error opening it counts as locked). A test that freezes a process with
// SIGSTOP checks it: a process frozen inside a write transaction stops every
// other one.
func SQLiteWriteLocked(path string) bool {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		return true
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		return true
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		return true
	}
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	return false
}

// Stop sends p SIGSTOP and returns once every thread of the process has
// stopped. The signal is asynchronous: a process that is still running the
// moment after Signal returns can begin a write transaction and be stopped
// inside it, which a check made in between (SQLiteWriteLocked) would miss.
// Where /proc is not there to read, it waits a moment instead.
func Stop(p *os.Process) {
	_ = p.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		stopped, ok := threadsStopped(p.Pid)
		if !ok {
			time.Sleep(20 * time.Millisecond)
			return
		}
		if stopped {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// threadsStopped reports whether every thread of pid is stopped, as
// /proc/<pid>/task/*/stat tells; ok is false where /proc cannot say.
func threadsStopped(pid int) (stopped, ok bool) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return false, false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, false
		}
		// The state follows the command name, which is in parentheses and
		// may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, false
		}
		if s := b[i+2]; s != 'T' && s != 't' {
			return false, true
		}
	}
	return true, true
}

// WaitReady waits until the server at base is ready (/readyz answers 200:
// its store answers and its MCP upstreams are connected, so that a first
// tools/list holds their tools). It sets no deadline of its own: t's
// bounds it.
func WaitReady(t testing.TB, base string) {
	t.Helper()
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-t.Context().Done():
			t.Fatal("gave up waiting for /readyz")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
