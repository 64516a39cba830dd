package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// request the SDK abandoned on a timeout must not keep one alive.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
