package main

import (
	"fmt"
	"slices"
)

// costMeasure is one of the runs that the cost scenarios (audit, tracing)
// repeat with a feature on and off: B3 at its main load, or B6.
type costMeasure struct {
	id, key, label, unit, per string
	// units are what the run does (actions, decisions), by which its CPU
	// time and allocations are divided.
	units int
	run   func(*env) ([]Figure, error)
}

// costMeasures are the runs a cost scenario compares: B3 and B6.
func costMeasures(e *env) []costMeasure {
	return []costMeasure{
		{"B3", "b3." + e.target.name + ".actions", "B3 actions", "actions/s", "action", e.cfg.Actions, lifecycleMain},
		{"B6", "b6." + e.target.name + ".rate", "B6 decisions", "decisions/s", "decision", e.cfg.Decisions, deciding},
	}
}

// value is the figure of m's throughput among a run's figures.
func (m costMeasure) value(out []Figure) (float64, error) {
	i := slices.IndexFunc(out, func(f Figure) bool { return f.Key == m.key })
	if i < 0 {
		return 0, fmt.Errorf("%s gave no %s figure", m.id, m.key)
	}
	return out[i].Value, nil
}
