package countersign

import "github.com/countersign/countersign/cstype"

// Outcome admission waits while a run holds the thread (docs/design.md §12): an
// outcome settled while a run is running or parked is not part of the
// conversation until that run ends, and then it follows the run's messages.
// A run is one turn; an outcome that arrived during the turn is news for
// the next one, and neither the model in the middle of its turn nor a
// reader of the thread sees it slipped in between a tool call and its
// result.
//
// The rule is applied where the conversation is read (Thread, RunState),
// from the times the store recorded, rather than by the writes: a
// settlement in any process never has to coordinate with the run that holds
// the thread, and a run that ends releases what it held without writing
// it.

// heldOutcomes orders msgs (a thread's messages, oldest first) by the rule
// above, given the thread's runs: an admitted outcome (an assistant message
// with an outcome and no run) created during a run's turn moves to just
// after the run's last message, or is left out while the run has not ended.
func heldOutcomes(msgs []*cstype.Message, runs []*cstype.Run) []*cstype.Message {
	if len(runs) == 0 {
		return msgs
	}
	// during returns the run whose turn m was admitted in, if any. A
	// thread's runs do not overlap: at most one holds it at a time.
	during := func(m *cstype.Message) *cstype.Run {
		for _, r := range runs {
			if m.CreatedAt.Before(r.StartedAt) {
				continue
			}
			if r.EndedAt == nil || m.CreatedAt.Before(*r.EndedAt) {
				return r
			}
		}
		return nil
	}
	held := map[string][]*cstype.Message{} // run id → outcomes it held
	var out []*cstype.Message
	moved := false
	for _, m := range msgs {
		if m.Outcome != nil && m.RunID == "" && m.Role == cstype.RoleAssistant {
			if r := during(m); r != nil {
				held[r.ID] = append(held[r.ID], m)
				moved = true
				continue
			}
		}
		out = append(out, m)
	}
	if !moved {
		return msgs
	}
	ended := map[string]bool{}
	for _, r := range runs {
		ended[r.ID] = r.Status.Ended()
	}
	// Each ended run's held outcomes go right after its last message.
	last := map[string]int{}
	for i, m := range out {
		if m.RunID != "" {
			last[m.RunID] = i
		}
	}
	var final []*cstype.Message
	for i, m := range out {
		final = append(final, m)
		if m.RunID != "" && last[m.RunID] == i && ended[m.RunID] {
			final = append(final, held[m.RunID]...)
			delete(held, m.RunID)
		}
	}
	// An ended run that wrote nothing of its own: its outcomes go last.
	for _, r := range runs {
		if ended[r.ID] && len(held[r.ID]) > 0 {
			final = append(final, held[r.ID]...)
		}
	}
	return final
}
