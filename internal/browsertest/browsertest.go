// Package browsertest starts the headless Chromium that the inbox's and the
// email channel's browser tests drive through chromedp. It is for tests
// only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium, which the project's scripts install
// (make services).
const ChromiumPath = "/usr/bin/chromium"

// Start starts a headless Chromium with a fresh profile, with opts added
// to the defaults, and returns a context for its first tab; the browser
// ends with the test, before its profile directory is removed. Without
// Chromium the test skips, except in CI, where it fails.
func Start(t *testing.T, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := ChromiumPath
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("chromium")
		if lerr != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("chromium is not installed at %s (apt-get install -y chromium); CI needs it", ChromiumPath)
			}
			t.Skipf("skipping the browser test: chromium is not installed at %s (apt-get install -y chromium)", ChromiumPath)
		}
		path = p
	}
	all := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	}, opts...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), all...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// Cleanups run last-in first-out: the browser ends before the profile
	// directory (a TempDir registered above) is removed.
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Step runs browser actions within timeout, failing the test with what on
// an error.
func Step(t *testing.T, ctx context.Context, timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
