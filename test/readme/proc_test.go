package readme

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// need skips t when a tool the README assumes is missing, except in CI,
// where the machine must have it.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; CI must have it (the README assumes it)", tool)
			}
			t.Skipf("%s is not on PATH: the README is run with it", tool)
		}
	}
}

// readerEnv is the environment a reader's shell has: the test's, without
// any COUNTERSIGN_* variable (a developer's COUNTERSIGN_STORE or
// COUNTERSIGN_TOKEN would change what the README's commands do) and
// without what make passes to the commands it runs (make test runs this
// test), plus extra, the overrides the README documents.
func readerEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "COUNTERSIGN_") || slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}, name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// withPath puts dir first on env's PATH, as the README asks of a reader
// who installed the command.
func withPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	old := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			old = v
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+dir+string(os.PathListSeparator)+old)
}

// stepContext bounds one step: d, but no later than a minute before the
// test's own deadline, so that a slow step fails with its output rather
// than the test binary being killed without it.
func stepContext(t *testing.T, d time.Duration) context.Context {
	deadline := time.Now().Add(d)
	if td, ok := t.Deadline(); ok && td.Add(-time.Minute).Before(deadline) {
		deadline = td.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// command is name args in dir with env, in a process group of its own:
// go run and make start children, and a timeout ends them all.
func command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs the command and returns its output (standard output and error);
// the error names the command, and says when it ran out of time.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	out, err := command(ctx, dir, env, name, args...).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// bashScript runs script as a README block runs: bash, stopping at the
// first command that fails (curl -s fails when it cannot connect).
func bashScript(ctx context.Context, dir string, env []string, script string) (string, error) {
	return run(ctx, dir, env, "bash", "-euo", "pipefail", "-c", script)
}

// server is the README's first command, running: `go run ./cmd/countersign
// serve` and the server it built.
type server struct {
	cmd  *exec.Cmd
	base string // the URL it listens on, from its banner

	mu  sync.Mutex
	out strings.Builder
	// changed receives a value after each line of output; eof is closed once
	// every process of the group has closed its output.
	changed chan struct{}
	eof     chan struct{}
	exited  chan error
}

func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitOutput waits until ok holds of the output, for at most d.
func (s *server) waitOutput(d time.Duration, ok func(string) bool) (string, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		out := s.output()
		if ok(out) {
			return out, nil
		}
		select {
		case <-s.changed:
		case <-s.eof:
			if out := s.output(); ok(out) {
				return out, nil
			}
			return s.output(), errors.New("the command ended")
		case <-timer.C:
			return s.output(), fmt.Errorf("not within %v", d)
		}
	}
}

var listening = regexp.MustCompile(`countersign listening on (http://\S+) \(store (\S+)\)`)

// startServer runs line, the README's first command, in the clone's root
// through bash, as a reader's shell would, with env. It returns once the
// server answers /healthz and its banner is printed; t's cleanup stops the
// whole process group (go run and the server) with SIGTERM.
func startServer(t *testing.T, clone, line string, env []string) *server {
	t.Helper()
	s := &server{changed: make(chan struct{}, 1), eof: make(chan struct{}), exited: make(chan error, 1)}
	s.cmd = exec.Command("bash", "-c", line)
	s.cmd.Dir, s.cmd.Env = clone, env
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", line, err)
	}
	pw.Close()
	go func() {
		defer close(s.eof)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}
	}()
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		// go run does not pass SIGTERM on: the group has it, and the
		// server drains. Its output closes once every process is gone.
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.eof:
		case <-time.After(time.Minute):
			t.Errorf("%q did not stop within a minute of SIGTERM; killed\n%s", line, s.output())
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.eof
		}
		<-s.exited
	})

	// The first run compiles the command in the clone: minutes on a busy
	// machine.
	out, err := s.waitOutput(8*time.Minute, listening.MatchString)
	if err != nil {
		t.Fatalf("%q did not print where it listens: %v\n%s", line, err, out)
	}
	s.base = listening.FindStringSubmatch(out)[1]
	if err := waitHealthy(s.base, time.Minute); err != nil {
		t.Fatalf("%q: %v\n%s", line, err, s.output())
	}
	// The banner is printed before the server answers, but this process
	// may not have read all of it yet: it ends with a blank line.
	if out, err := s.waitOutput(time.Minute, func(out string) bool {
		_, rest, ok := strings.Cut(out, bannerStart)
		return ok && strings.Contains(rest, "\n\n")
	}); err != nil {
		t.Fatalf("%q printed no complete demo banner: %v\n%s", line, err, out)
	}
	return s
}

// waitHealthy polls base's /healthz until it answers 200, for at most d.
func waitHealthy(base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond) // polling, with the deadline above
	}
	return fmt.Errorf("it did not answer within %v: %v", d, last)
}
