//go:build race

package countersign_test

// raceEnabled says the tests run under the race detector, whose
// instrumentation enlarges every frame: stack sizes are not the product's.
const raceEnabled = true
