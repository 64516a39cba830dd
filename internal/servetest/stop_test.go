package servetest

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// TestStopWaitsUntilStopped: Stop returns with every thread of the process
// stopped, and a SIGCONT lets it run again.
func TestStopWaitsUntilStopped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if stopped, ok := threadsStopped(cmd.Process.Pid); !ok || stopped {
		t.Fatalf("before Stop: stopped %v, ok %v; want running", stopped, ok)
	}
	Stop(cmd.Process)
	if stopped, ok := threadsStopped(cmd.Process.Pid); !ok || !stopped {
		t.Fatalf("after Stop: stopped %v, ok %v", stopped, ok)
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
}
