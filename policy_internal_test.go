package countersign

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"payments.refund", "payments.refund", true},
		{"payments.refund", "payments.refunds", false},
		{"payments.*", "payments.refund", true},
		{"payments.*", "payments.", true},
		{"payments.*", "payments", false},
		{"*", "", true},
		{"*.delete", "files.delete", true},
		{"*.delete", "files.deleted", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"a**", "a", true},
		{"*a*", "bab", true},
		{"ab*ba", "aba", false}, // the prefix and suffix may not overlap
	}
	for _, tc := range cases {
		if got := globMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// FuzzGlobMatch checks globMatch against a regular-expression reference.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{{"payments.*", "payments.refund"}, {"*", ""}, {"a*b*c", "axbxc"}, {"ab*ba", "aba"}, {"**", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		// Action names are ASCII (namePattern); the reference needs UTF-8.
		if len(pattern) > 64 || len(name) > 64 || !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return
		}
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
		if got, want := globMatch(pattern, name), re.MatchString(name); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, reference %v", pattern, name, got, want)
		}
	})
}

func TestRuleSpecificity(t *testing.T) {
	t.Parallel()
	p := &Policy{Rules: []Rule{
		{Match: "*", Effect: EffectDeny},
		{Match: "pay*", Effect: EffectAsk, Quorum: 1},
		{Match: "payments.*", Effect: EffectAsk, Quorum: 2},
		{Match: "payments.refund", Effect: EffectAllow},
		{Match: "payments.*", Effect: EffectAsk, Quorum: 3}, // same length: the first wins
	}}
	for name, want := range map[string]string{
		"payments.refund": "payments.refund",
		"payments.void":   "payments.*",
		"payroll.run":     "pay*",
		"mail.send":       "*",
	} {
		r := p.match(name)
		if r == nil || r.Match != want {
			t.Errorf("match(%s) = %+v, want %s", name, r, want)
		}
		if name == "payments.void" && r.Quorum != 2 {
			t.Errorf("tie between equal globs: quorum %d, want the first rule's 2", r.Quorum)
		}
	}
}

// A rule's fingerprint changes with every term a grant stands for, and with
// nothing else: not the order of lists, not an empty list for a missing one,
// not the rule's TTL.
func TestRuleFingerprint(t *testing.T) {
	t.Parallel()
	base := Rule{Match: "payments.*", Effect: EffectAsk, Approvers: []string{"role:finance", "actor:zoe"}, Quorum: 2,
		Channels: []string{"web", "api"}, Remember: []Scope{ScopeThread, ScopeRun}, Mode: ModeWait}
	same := base
	same.Approvers = []string{"actor:zoe", "role:finance"}
	same.Channels = []string{"api", "web"}
	same.Remember = []Scope{ScopeRun, ScopeThread}
	same.TTL = time.Hour
	same.Notify = []string{"slack"} // where it is announced is not a term
	if base.fingerprint() != same.fingerprint() {
		t.Errorf("reordered lists, another TTL or another notify changed the fingerprint")
	}
	// A rule without step-up keeps the fingerprint it had before rules
	// could have one, and so its grants: pinned as the tree before step-up
	// computed it.
	if got, want := base.fingerprint(), "rule:v1:ed0c56903cbf527be33066179d257eb6"; got != want {
		t.Errorf("fingerprint of a rule without step-up %s, want %s as before step-up existed", got, want)
	}
	noChannels, emptyChannels := base, base
	noChannels.Channels, emptyChannels.Channels = nil, []string{}
	if noChannels.fingerprint() != emptyChannels.fingerprint() {
		t.Errorf("an empty channel list differs from none")
	}
	for name, change := range map[string]func(r *Rule){
		"approvers":     func(r *Rule) { r.Approvers = []string{"role:finance"} },
		"quorum":        func(r *Rule) { r.Quorum = 1 },
		"self-approval": func(r *Rule) { r.ForbidSelfApproval = true },
		"channels":      func(r *Rule) { r.Channels = []string{"web"} },
		"remember":      func(r *Rule) { r.Remember = []Scope{ScopeThread} },
		"any input":     func(r *Rule) { r.GrantAnyInput = true },
		"mode":          func(r *Rule) { r.Mode = ModeTwoPhase },
		"step-up":       func(r *Rule) { r.StepUp = StepUpPasskey },
	} {
		r := base
		change(&r)
		if r.fingerprint() == base.fingerprint() {
			t.Errorf("changing the %s kept the fingerprint", name)
		}
	}
}
