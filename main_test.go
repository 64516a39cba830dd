package countersign_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The engine starts goroutines (lease renewal, workers, sweepers): every one
// must have stopped by the end of the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
