package pgstore

// rowMemorySize bounds the proposals a Store remembers (see
// internal/rowmemory): enough for the proposals a busy process has in
// flight (each read before it is decided, claimed or settled), a few
// megabytes at most. The engine reads a proposal before it decides it, a
// worker holds the row it claimed when it renews and settles it; mutate
// (proposals.go) and SettleMany start from the remembered copy and write
// with a compare-and-set (cas.go).
const rowMemorySize = 4096

// runMemorySize bounds the runs a Store remembers: the runs this process
// drives at once, with room to spare. A run's steps are written by the
// process that holds it, right after it read the run.
const runMemorySize = 1024
