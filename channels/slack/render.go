package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
)

// The action ids of the buttons. A link button (open) reaches the
// interactions route too when clicked; it decides nothing.
const (
	actionApprove = "countersign_approve"
	actionReject  = "countersign_reject"
	actionOpen    = "countersign_open"
)

// Slack's limits on what a message holds (Block Kit reference): a
// section's text, and the blocks of one message.
const (
	maxSectionText = 3000
	// maxInputBlocks bounds the sections the input fills; a longer input
	// says so and links to the inbox, where it is shown whole.
	maxInputBlocks = 12
)

// escape makes agent-supplied text safe in any Slack text field: control,
// format, private-use and unassigned code points as \u{…} escapes of their hex code point
// (docs/api.md Part 3, plain text for people), then Slack's three
// reserved characters as entities, so that nothing is read as a link, a
// mention or a channel.
func escape(s string, multiline bool) string {
	if multiline {
		s = plaintext.Multiline(s)
	} else {
		s = plaintext.Line(s)
	}
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// plain is a plain_text object: shown as it is, no formatting, no emoji
// shortcodes.
func plain(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.PlainTextType, s, false, false)
}

// mrkdwn is a mrkdwn object with verbatim set: no automatic links or
// mentions.
func mrkdwn(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, true)
}

// inputText is the input as the code block shows it: indented JSON, as
// plain text, with every backtick written \u{0060} so that the input cannot
// close the code block it is shown in.
func inputText(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	return strings.ReplaceAll(escape(b.String(), true), "`", `\u{0060}`)
}

// inputBlocks shows the input in code blocks of at most maxSectionText
// characters, split at line ends where it can; past maxInputBlocks it
// says how much more there is and where to read it.
func (s *Slack) inputBlocks(p *cstype.Proposal) []slackapi.Block {
	text := inputText(p.Input)
	const fence = "```\n"
	room := maxSectionText - 2*len(fence)
	var out []slackapi.Block
	for text != "" {
		if len(out) == maxInputBlocks {
			out = append(out, slackapi.NewSectionBlock(plain(fmt.Sprintf(
				"The input goes on for %d more bytes: read it whole in the inbox, %s", len(text), s.proposalURL(p.ID))), nil, nil))
			break
		}
		n := min(len(text), room)
		if n < len(text) {
			if i := strings.LastIndexByte(text[:n], '\n'); i > 0 {
				n = i + 1
			} else {
				for n > 0 && !utf8Start(text[n]) {
					n-- // never split a rune
				}
			}
		}
		out = append(out, slackapi.NewSectionBlock(mrkdwn(fence+text[:n]+"\n```"), nil, nil))
		text = text[n:]
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// title is what a proposal is called: its confirmation's title, or its
// action's name.
func title(p *cstype.Proposal) string {
	if p.Confirmation.Title != "" {
		return p.Confirmation.Title
	}
	return p.Action
}

func at(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// status says where the proposal stands and who decided it, through which
// channel.
func status(p *cstype.Proposal) string {
	var b strings.Builder
	switch p.Status {
	case cstype.StatusPending:
		fmt.Fprintf(&b, "Waiting for approval: %d of %d", p.Approvals(), max(p.Quorum, 1))
	case cstype.StatusApproved, cstype.StatusExecuting:
		b.WriteString("Approved: no longer waiting for a decision")
	case cstype.StatusSucceeded:
		b.WriteString("Approved and done: it succeeded")
	case cstype.StatusFailed:
		b.WriteString("Approved, but it failed")
	case cstype.StatusReconciling, cstype.StatusUnknown:
		b.WriteString("Approved; whether it ran is being checked (" + string(p.Status) + ")")
	case cstype.StatusRejected:
		b.WriteString("Rejected")
	case cstype.StatusExpired:
		if p.Outcome != nil && p.Outcome.Reason == cstype.ReasonNotCollected {
			b.WriteString("Approved, but the agent did not call again before " + at(p.ExpiresAt))
		} else {
			b.WriteString("Expired before it was decided")
		}
	case cstype.StatusCancelled:
		b.WriteString("Withdrawn by its requester")
	case cstype.StatusSuperseded:
		b.WriteString("Replaced by a newer request")
	default:
		b.WriteString(string(p.Status))
	}
	for _, d := range p.Decisions {
		fmt.Fprintf(&b, "\n%s %s via %s at %s", d.Actor, d.Decision, d.Via, at(d.At))
	}
	return b.String()
}

// message is what an announcement shows of p: the fallback text and the
// blocks. dm: an approver's direct message, with the input; otherwise the
// channel's post, without it. live: the approver may decide p now, so the
// message has buttons carrying nonce.
func (s *Slack) message(p *cstype.Proposal, dm, live bool, nonce string) (string, []slackapi.Block) {
	name := escape(title(p), false)
	fallback := "Approval requested: " + name
	if p.Status != cstype.StatusPending {
		fallback = name + ": " + string(p.Status)
	}
	blocks := []slackapi.Block{
		slackapi.NewSectionBlock(plain(name), []*slackapi.TextBlockObject{
			plain("Requested by " + escape(p.Requester, false)),
			plain("Action " + escape(p.Action, false)),
			plain("Expires " + at(p.ExpiresAt)),
			plain("Proposal " + escape(p.ID, false)),
		}, nil),
	}
	if dm {
		blocks = append(blocks, s.inputBlocks(p)...)
	}
	blocks = append(blocks, slackapi.NewSectionBlock(plain(escape(status(p), true)), nil, nil))
	open := slackapi.NewButtonBlockElement(actionOpen, p.ID, plain("Open in the inbox")).WithURL(s.proposalURL(p.ID))
	var buttons []slackapi.BlockElement
	if live {
		value := p.ID + " " + nonce
		if p.StepUp != "" {
			// Step-up: the approval needs a passkey, which only the
			// inbox can ask for (docs/api.md Part 3, Step-up).
			buttons = append(buttons, slackapi.NewButtonBlockElement(actionOpen, p.ID, plain("Approve with a passkey")).
				WithURL(s.proposalURL(p.ID)).WithStyle(slackapi.StylePrimary))
		} else {
			buttons = append(buttons, slackapi.NewButtonBlockElement(actionApprove, value, plain("Approve")).WithStyle(slackapi.StylePrimary))
		}
		buttons = append(buttons, slackapi.NewButtonBlockElement(actionReject, value, plain("Reject")).WithStyle(slackapi.StyleDanger))
	}
	if !live || p.StepUp == "" {
		buttons = append(buttons, open)
	}
	blocks = append(blocks, slackapi.NewActionBlock("countersign_actions", buttons...))
	return fallback, blocks
}
