package textdecision

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// RoleUser is the only message role whose text can decide.
const RoleUser = "user"

// Message is a message of a thread, as the parser needs it.
type Message struct {
	// Role is who wrote it: "user", "assistant" or "tool". Only RoleUser
	// can decide.
	Role string
	// Text is the message as posted.
	Text string
}

// Thread is what the parser needs of the thread a message was posted in.
type Thread struct {
	// Proposals are the thread's proposals the sender may see, whatever
	// their status, with unique ids. The pending ones are listed in an
	// Ambiguous result in this order.
	Proposals []Proposal
}

// Proposal is one proposal of a [Thread].
type Proposal struct {
	ID string
	// Pending reports the proposal waits for a decision.
	Pending bool
}

// Verdict is the decision a command makes.
type Verdict string

// The verdicts.
const (
	Approve Verdict = "approve"
	Reject  Verdict = "reject"
)

// Kind is what a message turned out to be.
type Kind uint8

const (
	// Ordinary: not a decision; the message goes to the agent.
	Ordinary Kind = iota
	// Decide: a command on one proposal, Result.ProposalID.
	Decide
	// Ambiguous: a command naming no proposal while several are pending
	// (Result.Pending). Nothing is to be decided; the sender is asked which.
	Ambiguous
)

// String returns "ordinary", "decide" or "ambiguous".
func (k Kind) String() string {
	switch k {
	case Ordinary:
		return "ordinary"
	case Decide:
		return "decide"
	case Ambiguous:
		return "ambiguous"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Result is what [Vocabulary.Parse] made of a message. The zero Result is
// an ordinary message.
type Result struct {
	Kind Kind
	// ProposalID is the proposal to decide (Decide only), spelled as in the
	// Thread.
	ProposalID string
	// Verdict and Remember are what the command asks (Decide and
	// Ambiguous). Remember is set by the remember phrases: approve, and
	// remember the approval for the thread.
	Verdict  Verdict
	Remember bool
	// Pending are the thread's pending proposals, in the Thread's order
	// (Ambiguous only), to be listed with Reply(ReplyAmbiguous, Pending).
	Pending []string
}

// Parse reads msg, posted in th, as a decision command or an ordinary
// message, by the rules of the package documentation. It never fails: any
// text it cannot read as a command is ordinary.
func (v *Vocabulary) Parse(msg Message, th Thread) Result {
	if v == nil {
		v = english
	}
	if msg.Role != RoleUser || !utf8.ValidString(msg.Text) {
		return Result{}
	}
	text := strings.TrimSpace(norm.NFC.String(msg.Text))
	if strings.ContainsFunc(text, isLineBreak) {
		return Result{}
	}
	phrase, id, ok := splitCommand(text)
	if !ok {
		return Result{}
	}
	cmd, ok := v.commands[phraseKey(phrase)]
	if !ok {
		return Result{}
	}
	r := Result{Verdict: cmd.verdict, Remember: cmd.remember}

	if id != "" {
		found, ok := th.lookup(id)
		if !ok { // another thread's proposal, or a typo: not a command
			return Result{}
		}
		r.Kind, r.ProposalID = Decide, found
		return r
	}
	var pending []string
	for _, p := range th.Proposals {
		if p.Pending {
			pending = append(pending, p.ID)
		}
	}
	switch len(pending) {
	case 0:
		return Result{}
	case 1:
		r.Kind, r.ProposalID = Decide, pending[0]
	default:
		r.Kind, r.Pending = Ambiguous, pending
	}
	return r
}

// splitCommand splits a trimmed single-line text into the phrase and the
// proposal id that ends it ("" when none), dropping the one "." or "!"
// allowed after either. ok is false when the text cannot be a command: a
// second "#" or trailing mark, an empty id, an id with a blank in it, or a
// "#" that no blank precedes.
func splitCommand(text string) (phrase, id string, ok bool) {
	marks := 0
	dropMark := func(s string) string {
		if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") {
			marks++
			return s[:len(s)-1]
		}
		return s
	}
	phrase = text
	if i := strings.IndexByte(text, '#'); i >= 0 {
		if strings.LastIndexByte(text, '#') != i {
			return "", "", false
		}
		id = dropMark(text[i+1:])
		if id == "" || strings.ContainsFunc(id, unicode.IsSpace) {
			return "", "", false
		}
		phrase = strings.TrimRightFunc(text[:i], unicode.IsSpace)
		if len(phrase) == i { // "yes#prp_1": the contract asks for a blank
			return "", "", false
		}
	}
	phrase = dropMark(phrase)
	if marks > 1 || phrase == "" {
		return "", "", false
	}
	return phrase, id, true
}

// lookup finds id among the thread's proposals: exactly, or else
// case-insensitively when that matches exactly one of them.
func (th Thread) lookup(id string) (string, bool) {
	if slices.ContainsFunc(th.Proposals, func(p Proposal) bool { return p.ID == id }) {
		return id, true
	}
	found := ""
	for _, p := range th.Proposals {
		if strings.EqualFold(p.ID, id) {
			if found != "" && found != p.ID {
				return "", false
			}
			found = p.ID
		}
	}
	return found, found != ""
}
