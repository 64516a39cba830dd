package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// shownValue writes an inputValue in one line: objects as {k: v, …},
// arrays as [v, …], each leaf as kind:text.
func shownValue(v inputValue) string {
	switch v.Kind {
	case kindObject:
		var parts []string
		for _, f := range v.Fields {
			parts = append(parts, f.Name+": "+shownValue(f.Value))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case kindArray:
		var parts []string
		for _, it := range v.Items {
			parts = append(parts, shownValue(it))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return v.Kind + ":" + v.Text
}

// TestReadInput: an input for reading keeps its fields in order, tells a
// string with a line break from one without, keeps numbers as written,
// nests objects and arrays, shows what is too deep as compact JSON, and
// gives up (the page shows the JSON alone) on what is not one JSON value.
func TestReadInput(t *testing.T) {
	deep := `{"a":{"b":{"c":{"d":{"e":{"f":{"g":1}}}}}}}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"fields in order", `{"to":"c_42","amount":40.50,"ok":true,"none":null}`,
			"{to: string:c_42, amount: literal:40.50, ok: literal:true, none: literal:null}"},
		{"a body of several lines", `{"body":"Dear customer,\nyour refund\n\nRegards"}`,
			"{body: multiline:Dear customer,\nyour refund\n\nRegards}"},
		{"markup and controls stay text", `{"s":"<b>x</b>\u202e\u0000"}`, "{s: string:<b>x</b>\u202e\x00}"},
		{"nested", `{"items":[{"sku":"a","n":2},[1,"x"]],"empty":{},"none":[]}`,
			"{items: [{sku: string:a, n: literal:2}, [literal:1, string:x]], empty: {}, none: []}"},
		{"too deep", deep, `{a: {b: {c: {d: {e: {f: json:{"g":1}}}}}}}`},
		{"a key twice shows twice", `{"a":1,"a":2}`, "{a: literal:1, a: literal:2}"},
		{"not an object", `"just text"`, "string:just text"},
		{"not JSON", `{"a":`, "nil"},
		{"two values", `{} {}`, "nil"},
	} {
		got := "nil"
		if v := readInput(json.RawMessage(tc.in)); v != nil {
			got = shownValue(*v)
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTurnWords: what the page and the list say of the reader's part.
func TestTurnWords(t *testing.T) {
	approved := &countersign.RecordedDecision{Actor: "bob", Decision: countersign.Approve}
	for _, tc := range []struct {
		name                     string
		turn                     countersign.Turn
		needed, instead, waiting string
	}{
		{"waits for you", countersign.Turn{Yours: true, Reject: true, Needed: 1, From: []string{"role:finance"}},
			"1 more approval needed (role:finance).", "", "1 more approval needed (role:finance)."},
		{"you approved one of two", countersign.Turn{Decision: approved, Needed: 1, From: []string{"role:finance"}},
			"1 more approval needed (role:finance).", "", "You approved it. 1 more approval needed (role:finance)."},
		{"not yours", countersign.Turn{Needed: 2, From: []string{"role:finance", "actor:carol", "requester"}},
			"2 more approvals needed (role:finance, actor:carol or alice (the requester)).",
			"You do not decide this request: it waits for role:finance, actor:carol or alice (the requester).",
			"2 more approvals needed (role:finance, actor:carol or alice (the requester))."},
		{"yours to reject only", countersign.Turn{Reject: true, Needed: 1, From: []string{"role:finance"}},
			"1 more approval needed (role:finance).", "You may reject this request, not approve it: it waits for role:finance.",
			"1 more approval needed (role:finance)."},
		{"nobody left", countersign.Turn{Needed: 1},
			"1 more approval needed, and none of its approvers may give one any more.",
			"You do not decide this request: it waits for nobody who may still approve it.",
			"1 more approval needed, and none of its approvers may give one any more."},
		{"decided", countersign.Turn{Decision: &countersign.RecordedDecision{Actor: "bob", Decision: countersign.Reject}}, "", "", "You rejected it."},
		{"not pending", countersign.Turn{}, "", "", ""},
	} {
		if got := neededWords(tc.turn, "alice"); got != tc.needed {
			t.Errorf("%s: needed %q, want %q", tc.name, got, tc.needed)
		}
		if got := insteadWords(tc.turn, "alice"); got != tc.instead {
			t.Errorf("%s: instead %q, want %q", tc.name, got, tc.instead)
		}
		if got := waitingNote(tc.turn, "alice"); got != tc.waiting {
			t.Errorf("%s: waiting %q, want %q", tc.name, got, tc.waiting)
		}
	}
}

// TestConversationView: who wrote each message, what it called, what is
// withheld, how many earlier ones are not shown, and the call last: the
// run's own message, or else an entry standing for an external call.
func TestConversationView(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	shown := func(v *conversationView) string {
		var parts []string
		for _, e := range v.Entries {
			s := fmt.Sprintf("%s|%s|%s|%s", e.Class, e.Who, e.Text, e.Note)
			if e.Call {
				s += "|call"
			}
			parts = append(parts, s)
		}
		return v.Earlier + " " + strings.Join(parts, " / ")
	}
	for _, tc := range []struct {
		name string
		c    countersign.ProposalConversation
		want string
	}{
		{"a run's call", countersign.ProposalConversation{Call: true, Earlier: 3, Messages: []countersign.ConversationMessage{
			{Role: "user", Sender: "alice", Text: "email c_42"},
			{Role: "tool", Withheld: true},
			{Role: "assistant", Text: "Sending.", Calls: []string{"email.send"}, Call: true},
		}}, "3 earlier messages are not shown. user|alice|email c_42| / tool|Result of a call||About another request, which you may not see: not shown. / " +
			"assistant|alice's agent|Sending.|Called email.send: this request.|call"},
		{"an external call", countersign.ProposalConversation{Earlier: 1, Messages: []countersign.ConversationMessage{
			{Role: "user", Sender: "alice", Text: "hello"},
			{Role: "assistant", Text: "Looking.", Calls: []string{"crm.lookup"}},
		}}, "1 earlier message is not shown. user|alice|hello| / assistant|alice's agent|Looking.|Called crm.lookup. / " +
			"call|alice's agent||Called email.send: this request.|call"},
		{"nothing before the call", countersign.ProposalConversation{}, " call|alice's agent||Called email.send: this request.|call"},
	} {
		if got := shown(newConversationView(&tc.c, "alice", "email.send", at)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
