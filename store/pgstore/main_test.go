package pgstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// Store must release its pool, its listener and its trailing notification.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
