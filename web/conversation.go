package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

// The proposal page's conversation: what the person asked and what the
// agent said up to its call, as the engine lets the reader read it
// (Engine.ProposalConversation), ending with the call itself.

// conversationShown is how many messages the page shows, the last of them.
const conversationShown = 20

// conversationView is the conversation as the page shows it.
type conversationView struct {
	// Earlier says how many earlier messages are not shown; "" when none.
	Earlier string
	Entries []conversationEntry
}

// conversationEntry is one message, or the call that ends the
// conversation.
type conversationEntry struct {
	// Class is the entry's kind for the style sheet: user, assistant,
	// tool, or call.
	Class string
	// Who says who wrote it; Note what it did beside its text.
	Who, Note string
	Text      string
	At        time.Time
	// Call marks the entry that made the proposal's call.
	Call bool
}

// newConversationView words the conversation the engine returned for
// proposal p, requested by requester: each message by who wrote it, and
// the call last. An external agent's call has no message of its own: an
// entry of the page's stands for it, at the proposal's creation.
func newConversationView(c *countersign.ProposalConversation, requester, action string, created time.Time) *conversationView {
	v := &conversationView{}
	switch c.Earlier {
	case 0:
	case 1:
		v.Earlier = "1 earlier message is not shown."
	default:
		v.Earlier = fmt.Sprintf("%d earlier messages are not shown.", c.Earlier)
	}
	agent := requester + "'s agent"
	for _, m := range c.Messages {
		e := conversationEntry{Class: m.Role, Text: m.Text, At: m.At, Call: m.Call}
		// The roles are the API's (docs/api.md, Messages and runs).
		switch m.Role {
		case "user":
			e.Who = m.Sender
			if e.Who == "" {
				e.Who = requester
			}
		case "assistant":
			e.Who = agent
		case "tool":
			e.Who = "Result of a call"
		default:
			e.Who = m.Role
		}
		switch {
		case m.Withheld:
			e.Note = "About another request, which you may not see: not shown."
		case m.Call:
			e.Note = "Called " + strings.Join(m.Calls, ", ") + ": this request."
		case len(m.Calls) > 0:
			e.Note = "Called " + strings.Join(m.Calls, ", ") + "."
		}
		v.Entries = append(v.Entries, e)
	}
	if !c.Call {
		v.Entries = append(v.Entries, conversationEntry{Class: "call", Who: agent, At: created, Call: true,
			Note: "Called " + action + ": this request."})
	}
	return v
}
