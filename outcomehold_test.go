package countersign

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
)

func TestHeldOutcomes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	end := func(s int) *time.Time { v := at(s); return &v }
	user := func(id string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleUser, CreatedAt: at(s)}
	}
	ofRun := func(id, run string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleAssistant, RunID: run, CreatedAt: at(s)}
	}
	outcome := func(id string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleAssistant, Outcome: &cstype.Outcome{}, CreatedAt: at(s)}
	}
	ended := &cstype.Run{ID: "r1", Status: cstype.RunFinished, StartedAt: at(10), EndedAt: end(20)}
	open := &cstype.Run{ID: "r2", Status: cstype.RunParked, StartedAt: at(30)}
	silent := &cstype.Run{ID: "r3", Status: cstype.RunCancelled, StartedAt: at(50), EndedAt: end(60)}
	for _, tc := range []struct {
		name string
		msgs []*cstype.Message
		runs []*cstype.Run
		want string
	}{
		{"no runs", []*cstype.Message{user("u", 1), outcome("o", 2)}, nil, "u o"},
		{"outcome before and after a run stays", []*cstype.Message{outcome("o1", 5), user("u", 10), ofRun("a", "r1", 11), outcome("o2", 25)},
			[]*cstype.Run{ended}, "o1 u a o2"},
		{"outcome during an ended run follows its last message",
			[]*cstype.Message{user("u", 10), ofRun("a", "r1", 11), outcome("o", 12), ofRun("b", "r1", 13), user("u2", 21)},
			[]*cstype.Run{ended}, "u a b o u2"},
		{"outcome during an open run is held back",
			[]*cstype.Message{user("u", 30), ofRun("a", "r2", 31), outcome("o", 32)}, []*cstype.Run{open}, "u a"},
		{"an ended run with no messages of its own",
			[]*cstype.Message{user("u", 50), outcome("o", 55), user("u2", 61)}, []*cstype.Run{silent}, "u u2 o"},
		{"a user message during a run is not an outcome",
			[]*cstype.Message{user("u", 30), user("decision", 31)}, []*cstype.Run{open}, "u decision"},
	} {
		got := heldOutcomes(tc.msgs, tc.runs)
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, " ") != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, ids, tc.want)
		}
	}
}
