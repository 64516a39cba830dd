package web

import (
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/auditchain"
)

// TestTrailView: what the page says for each outcome of the chain's check.
func TestTrailView(t *testing.T) {
	ev := func(seq int64, verified bool) *countersign.TrailEvent {
		return &countersign.TrailEvent{AuditEvent: &cstype.AuditEvent{Event: cstype.Event{Type: cstype.EventCreated}, Seq: seq, Hash: strings.Repeat("ab", 32)}, Verified: verified}
	}
	for _, tc := range []struct {
		name    string
		trail   *countersign.ProposalTrail
		summary string
		marks   []string
	}{
		{"unsealed", &countersign.ProposalTrail{Events: []*countersign.TrailEvent{ev(0, false)}},
			"Not in the audit chain yet", []string{"unsealed"}},
		{"whole", &countersign.ProposalTrail{Events: []*countersign.TrailEvent{ev(3, true), ev(5, true), ev(0, false)}, Check: countersign.ChainCheck{From: 1, To: 5, Through: 5}},
			"verifies from its start through seq 5.", []string{"ok", "ok", "unsealed"}},
		{"broken", &countersign.ProposalTrail{Events: []*countersign.TrailEvent{ev(3, true), ev(5, false)}, Check: countersign.ChainCheck{From: 1, To: 5, Through: 3,
			Break: &auditchain.BreakError{Seq: 4, Reason: "hash does not match the event"}}},
			"does not verify: broken at seq 4: hash does not match the event", []string{"ok", "broken"}},
		{"bounded", &countersign.ProposalTrail{Events: []*countersign.TrailEvent{ev(90, true), ev(200, false)}, Check: countersign.ChainCheck{From: 89, To: 100, Through: 100}},
			"verifies from seq 89 through seq 100; countersign audit verify checks it from its start. Events after seq 100 are beyond", []string{"ok", "unchecked"}},
	} {
		v := newTrailView(tc.trail)
		if !strings.Contains(v.Summary, tc.summary) {
			t.Errorf("%s: summary %q, want %q", tc.name, v.Summary, tc.summary)
		}
		for i, r := range v.Events {
			if r.Mark != tc.marks[i] {
				t.Errorf("%s: row %d marked %s, want %s", tc.name, i, r.Mark, tc.marks[i])
			}
			if r.Seq != 0 && r.ShortHash != "abababababab…" {
				t.Errorf("%s: row %d short hash %q", tc.name, i, r.ShortHash)
			}
		}
	}
}
