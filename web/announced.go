package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/plaintext"
)

// Where a proposal was announced, as the proposal page shows it:
// "Slack: bob (direct message), carol (direct message) · Email: carol".
// The engine says what was sent (Engine.Announcements); this only words it.

// announcedGroup is one channel's announcements, in words.
type announcedGroup struct {
	Channel string
	To      []string
}

// channelName is a decision's or an announcement's channel as people name
// it; a channel it does not know is shown as plain text.
func channelName(via string) string {
	switch via {
	case countersign.ViaSlack:
		return "Slack"
	case countersign.ViaEmail:
		return "email"
	}
	return plaintext.Line(via)
}

// announcedWords groups as by channel, in the engine's order (Slack, then
// email), one entry per recipient: who, what kind of message, and how far it
// got when that is not all the way (posted, mailed). An approver mailed
// twice (an escalation) is one entry that says so.
func announcedWords(as []countersign.Announcement) []announcedGroup {
	var out []announcedGroup
	type entry struct {
		group, index int
		count        int
		notes        []string
	}
	seen := map[string]*entry{}
	for _, a := range as {
		name := channelName(a.Channel)
		if name == "email" {
			name = "Email"
		}
		if len(out) == 0 || out[len(out)-1].Channel != name {
			out = append(out, announcedGroup{Channel: name})
		}
		g := len(out) - 1
		key := a.Channel + "\x00" + a.Actor
		e := seen[key]
		if e == nil {
			e = &entry{group: g, index: len(out[g].To)}
			seen[key] = e
			out[g].To = append(out[g].To, "")
		}
		e.count++
		if a.DirectMessage {
			e.notes = appendOnce(e.notes, "direct message")
		}
		if a.State != countersign.AnnouncementPosted && a.State != countersign.AnnouncementMailed {
			e.notes = appendOnce(e.notes, string(a.State))
		}
		who := plaintext.Line(a.Actor)
		if a.Actor == "" {
			who = "the channel" // Slack's one post in the configured channel
		}
		notes := e.notes
		if e.count > 1 && a.Channel == countersign.ViaEmail {
			notes = append([]string{fmt.Sprintf("%d mails", e.count)}, notes...)
		}
		if len(notes) > 0 {
			who += " (" + strings.Join(notes, ", ") + ")"
		}
		out[e.group].To[e.index] = who
	}
	return out
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
