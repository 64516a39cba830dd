package web

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign"
)

// The reader's part in a proposal, in words: what it still needs and from
// whom, and who decides when the reader does not. Where it stands is the
// engine's answer (Engine.Turn); these only word it.

// approverWords names one of a proposal's approvers as the page says it:
// role:NAME and actor:NAME as they are, "requester" with the requester's
// name.
func approverWords(a, requester string) string {
	if a == countersign.ApproverRequester {
		return requester + " (the requester)"
	}
	return a
}

// whoApproves lists approvers as a sentence does: "role:finance",
// "role:finance or actor:carol".
func whoApproves(from []string, requester string) string {
	words := make([]string, len(from))
	for i, a := range from {
		words[i] = approverWords(a, requester)
	}
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// neededWords says how many more approvals a pending proposal needs, and
// from whom: "1 more approval needed (role:finance)." "" when none is.
func neededWords(t countersign.Turn, requester string) string {
	if t.Needed <= 0 {
		return ""
	}
	n := "1 more approval needed"
	if t.Needed > 1 {
		n = fmt.Sprintf("%d more approvals needed", t.Needed)
	}
	if who := whoApproves(t.From, requester); who != "" {
		return n + " (" + who + ")."
	}
	return n + ", and none of its approvers may give one any more."
}

// insteadWords says who decides a pending proposal that does not wait for
// the reader's approval, to a reader who has not decided it: "" when it
// waits for them, or they decided it (the page shows their decision).
func insteadWords(t countersign.Turn, requester string) string {
	if t.Yours || t.Decision != nil || t.Needed <= 0 {
		return ""
	}
	who := whoApproves(t.From, requester)
	if who == "" {
		who = "nobody who may still approve it"
	}
	if t.Reject {
		return "You may reject this request, not approve it: it waits for " + who + "."
	}
	return "You do not decide this request: it waits for " + who + "."
}

// waitingNote is what the list says of a pending proposal that waits for
// others: the reader's own decision, and what it still needs.
func waitingNote(t countersign.Turn, requester string) string {
	needed := neededWords(t, requester)
	if t.Decision != nil {
		return strings.TrimSpace("You " + string(t.Decision.Decision) + " it. " + needed)
	}
	return needed
}
