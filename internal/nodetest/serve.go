package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BuildCountersign builds cmd/countersign into a folder of t's and returns
// the binary's path, for tests that serve the real binary to node clients.
func BuildCountersign(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	return bin
}

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// Serve runs `bin serve --listen 127.0.0.1:0 args…` in a folder of t's,
// with env added to the test's environment, and returns the server's URL
// once it says where it listens. t's cleanup stops it with SIGTERM (and
// kills it if it has not stopped 40 s later), and logs its output when t
// failed.
func Serve(t testing.TB, bin string, env []string, args ...string) string {
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
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
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
	case err := <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}

// nodeSummary finds the counts node --test's TAP reporter ends with.
var nodeSummary = regexp.MustCompile(`(?m)^# (pass|fail|skipped|todo|cancelled) ([0-9]+)$`)

// RunTests runs npm test (node --test) in dir, with QuietEnv and env added
// to the test's environment, for at most timeout, and fails t unless the
// run passed with at least one test and none failed, skipped, todo or
// cancelled. On the deadline npm's whole process group is killed, so that a
// hung node test cannot keep the output open. It returns the passed tests'
// count and the output.
func RunTests(t testing.TB, dir string, env []string, timeout time.Duration) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), QuietEnv...), env...)
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
	pass, _ := strconv.Atoi(counts["pass"])
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["todo"] != "0" || counts["cancelled"] != "0" || pass == 0 {
		t.Fatalf("npm test passed with failures, skips or no tests (%v):\n%s", counts, out)
	}
	return pass, string(out)
}
