package sqlitestore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// Store the tests open must release its pools' goroutines on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
