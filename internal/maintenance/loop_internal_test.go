package maintenance

import (
	"testing"
	"time"
)

// TestJittered: a wait is never longer than the interval, nor shorter by
// more than a tenth of it, and the waits differ (processes drift apart).
func TestJittered(t *testing.T) {
	t.Parallel()
	const interval = time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered(interval)
		if d > interval || d < interval-interval/jitterFraction {
			t.Fatalf("jittered(%v) = %v, want within the last tenth", interval, d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("1000 waits took %d values: no jitter", len(seen))
	}
	if d := jittered(5 * time.Nanosecond); d != 5*time.Nanosecond {
		t.Errorf("jittered(5ns) = %v: an interval too short to jitter is kept", d)
	}
}
