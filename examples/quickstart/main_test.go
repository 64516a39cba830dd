package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testlog"
)

// TestQuickstart runs the walk-through on a fresh SQLite file and checks that
// each mode reached the outcome it describes.
func TestQuickstart(t *testing.T) {
	var buf syncBuffer
	out = &buf
	if err := run(filepath.Join(t.TempDir(), "quickstart.db")); err != nil {
		t.Fatalf("run: %v\n%s", err, buf.String())
	}
	got := buf.String()
	for _, want := range []string{
		"alice's call returns: succeeded, receipt rf_1",
		"alice repeats the same call: succeeded, receipt rf_1 (not executed again)",
		"alice's call returns: confirmation_required",
		"alice retries with the evidence: succeeded, receipt rf_2",
		"spending the evidence again: CONFIRMATION_INVALID, reason consumed",
		"alice's call returns at once: pending, executed false",
		"the worker settled it: succeeded, receipt rf_3",
		`thread message (assistant): Action "payments.refund" completed. Receipt: rf_3.`,
		"applied → rejected",
		"succeeded without asking (grant grt_",
		"the backend executed 5 refunds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q\n%s", want, got)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the walk-through's concurrent writers.
type syncBuffer = testlog.Buffer
