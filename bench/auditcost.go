package main

import (
	"fmt"
	"slices"
	"strings"
)

func init() {
	register(scenario{ID: "audit", order: 65, perStore: true,
		Title: "The audit chain's cost to B3 and B6",
		Method: "B3 and B6 exactly as above, each run R times with the audit chain's sealer (one per process, sealing every second what committed, " +
			"as `countersign serve` runs it) and R times without, in alternating order (off, on; then on, off; …) so that a drift of the machine " +
			"falls on both. Each figure is the median of its R runs; the ratio is with ÷ without (1.00: no cost). The goal is a ratio of at least 0.95.",
		run: auditCost})
}

// auditCost runs B3 and B6 with and without the sealer, alternating.
func auditCost(e *env) ([]Figure, error) {
	rounds := max(e.cfg.AuditRounds, 1)
	type measure struct {
		id, key, label, unit string
		run                  func(*env) ([]Figure, error)
	}
	ms := []measure{
		{"B3", "b3." + e.target.name + ".actions", "B3 actions", "actions/s", lifecycle},
		{"B6", "b6." + e.target.name + ".rate", "B6 decisions", "decisions/s", deciding},
	}
	var figs []Figure
	for _, m := range ms {
		got := map[sealerMode][]float64{}
		for r := range rounds {
			order := []sealerMode{sealerOff, sealerOn}
			if r%2 == 1 {
				order = []sealerMode{sealerOn, sealerOff}
			}
			for _, mode := range order {
				quiet(e.cfg)
				run := *e
				run.sealer = mode
				out, err := m.run(&run)
				if err != nil {
					return figs, fmt.Errorf("%s (sealer %s): %w", m.id, modeName(mode), err)
				}
				i := slices.IndexFunc(out, func(f Figure) bool { return f.Key == m.key })
				if i < 0 {
					return figs, fmt.Errorf("%s gave no %s figure", m.id, m.key)
				}
				got[mode] = append(got[mode], out[i].Value)
			}
		}
		off, on := median(got[sealerOff]), median(got[sealerOn])
		k := "audit." + e.target.name + "." + strings.ToLower(m.id)
		figs = append(figs,
			Figure{Key: k + ".off", Label: fmt.Sprintf("%s without the sealer, median of %d (%s)", m.label, rounds, runs(got[sealerOff])), Value: off, Unit: m.unit},
			Figure{Key: k + ".on", Label: fmt.Sprintf("%s with the sealer, median of %d (%s)", m.label, rounds, runs(got[sealerOn])), Value: on, Unit: m.unit},
			Figure{Key: k + ".ratio", Label: m.label + ": with ÷ without", Value: on / off, Unit: "ratio"})
	}
	return figs, nil
}

func modeName(m sealerMode) string {
	if m == sealerOn {
		return "on"
	}
	return "off"
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runs lists the runs' figures, rounded.
func runs(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(parts, ", ")
}
