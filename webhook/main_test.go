package webhook_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Test servers, clients and engines start goroutines: every one must have
// stopped by the end of the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
