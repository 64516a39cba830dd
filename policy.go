package countersign

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/condition"
)

// Effect is what a rule does with a matching call.
type Effect string

// The rule effects.
const (
	// EffectAllow executes at once, without a proposal.
	EffectAllow Effect = "allow"
	// EffectAsk stores a proposal and waits for a human decision.
	EffectAsk Effect = "ask"
	// EffectDeny refuses, and removes the action from the list offered to a model.
	EffectDeny Effect = "deny"
)

// Mode is who executes an approved call and what the caller sees (docs/design.md §4).
type Mode = cstype.Mode

// The call modes.
const (
	ModeWait        = cstype.ModeWait
	ModeTwoPhase    = cstype.ModeTwoPhase
	ModeIndependent = cstype.ModeIndependent
)

// Scope is the reach of a remembered approval.
type Scope = cstype.Scope

// The remember scopes.
const (
	ScopeRun    = cstype.ScopeRun
	ScopeThread = cstype.ScopeThread
)

// Defaults for rules that leave a field empty.
const (
	DefaultTTL    = 10 * time.Minute
	DefaultQuorum = 1
	DefaultMode   = ModeWait
)

// The approver forms. "requester" is the caller of the action itself.
const (
	ApproverRequester = "requester"
	approverRole      = "role:"
	approverActor     = "actor:"
)

// Channels a decision can arrive through. A rule may restrict them.
var Channels = []string{"api", "web", "cli", "text", "agui", "mcp", "slack", "email"}

// NotifyChannels are the approver channels a rule may announce its
// proposals on (Rule.Notify): each sends the approvers a message they can
// decide from.
var NotifyChannels = []string{"slack", "email"}

// StepUpPasskey is the step-up a rule may demand (Rule.StepUp): each
// approval carries a fresh passkey assertion bound to the proposal.
const StepUpPasskey = "passkey"

// Rule is one policy rule over action names.
type Rule struct {
	// Match is an action name, or a glob where * matches any run of characters
	// ("payments.*"). An exact name beats any glob; a longer glob beats a
	// shorter one; among equals, the first rule wins.
	Match string
	// When, if set, is a CEL expression over the call that must hold for
	// the rule to apply: input (the validated input), actor ({id, roles}),
	// tenant, thread_id and action ({name, version, kind}), e.g.
	// "input.amount > 1000". It is compiled when the policy is validated,
	// and again against the input schema of each action the rule matches
	// when that action is registered; a field the schema cannot have, or a
	// type error, fails there. At call time an expression that errors, is
	// not a boolean, or costs more than a fixed budget denies the call
	// (DeniedByPolicyError): a condition fails closed.
	When string
	// Condition is a condition written in Go, for library users who want
	// code rather than an expression. At most one of When and Condition.
	Condition *Condition
	Effect    Effect
	// Approvers are "requester", "role:NAME" or "actor:ID". Default: requester.
	Approvers []string
	// CanDecide, if set, narrows who may decide beyond Approvers.
	CanDecide func(ctx context.Context, decider Identity, p *cstype.Proposal) bool
	// Quorum is the number of distinct approvers needed. Default 1.
	Quorum int
	// ForbidSelfApproval refuses an approval by the requester.
	ForbidSelfApproval bool
	// TTL is how long a proposal waits for decisions. Default: the policy's.
	TTL time.Duration
	// Mode is the default mode of matching calls. Default wait.
	Mode Mode
	// Channels, if set, are the only channels ("api", "web", "cli", "text",
	// "agui", "mcp", "slack", "email") that may decide.
	Channels []string
	// Notify lists the approver channels ("slack", "email") that announce
	// the rule's proposals to their approvers. Each must be one Channels
	// accepts. It is frozen on the proposal (cstype.Proposal.Notify).
	Notify []string
	// StepUp, when "passkey", makes every approval of the rule's proposals
	// carry a fresh passkey assertion of the approver, bound to the
	// proposal and its input digest. Such a rule neither makes nor honours
	// grants: it cannot have Remember. Frozen on the proposal.
	StepUp string
	// Remember lists the remember scopes an approver may ask for.
	Remember []Scope
	// GrantAnyInput widens remembered approvals to any input of the action;
	// by default a grant covers only the exact input approved.
	GrantAnyInput bool
	// GrantTTL bounds a remembered approval's life. Zero: until revoked.
	GrantTTL time.Duration
	// EscalateAfter, when set, adds EscalateTo to the approvers of a
	// proposal still pending that long after it was made, once (a
	// proposal.escalated event). EscalateTo takes what Approvers takes.
	EscalateAfter time.Duration
	EscalateTo    []string
	// RemindEvery, when set, records a proposal.reminder event (and so a
	// notification) at created + RemindEvery, + 2×RemindEvery, … while
	// the proposal is pending.
	RemindEvery time.Duration
}

// Condition is a rule's condition in Go (see Rule.When for the one in an
// expression): the rule applies to the calls for which Holds returns true.
type Condition struct {
	// Name says what the condition tests ("refund over the customer's
	// limit"). Proposals record it as their rule's when, and the
	// fingerprint of grants covers it. Required.
	Name string
	// Holds decides one call. An error denies the call, as an expression's
	// does. It runs on every call of an action the rule matches, before
	// anything is stored, and must not block for long.
	Holds func(ctx context.Context, in *ConditionInput) (bool, error)
}

// ConditionInput is what a Condition decides on: what a When expression
// sees.
type ConditionInput struct {
	Identity Identity
	ThreadID string
	Action   *Action
	// Input is the validated, canonical input.
	Input json.RawMessage
}

// Policy is an ordered set of rules.
type Policy struct {
	Rules []Rule
	// DefaultTTL applies to rules without a TTL. Default 10 minutes.
	DefaultTTL time.Duration
}

// Validate checks the policy: the one check of a policy, which New makes
// and the configuration file's loader (package config) makes too, so that
// a file that loads is a policy the engine takes and a policy the engine
// refuses is a file that does not load. It reports every problem, each an
// *InvalidPolicyError naming the rule and the field, joined with
// errors.Join (errors.As finds the first). Beyond each field's form it
// refuses a rule that can never apply (one that repeats the Match of an
// earlier rule without a condition) and an ask rule no one could ever
// complete: its approvers, with those it escalates to, name no role, and
// the people they name are fewer than the quorum, or none at all when
// self-approval is forbidden and the requester is the only approver.
// The fields of input a When reads are checked later, against the input
// schema of each action the rule matches, when that action registers.
func (p *Policy) Validate() error {
	if p == nil {
		return nil
	}
	var errs []error
	add := func(e *InvalidPolicyError) { errs = append(errs, e) }
	if p.DefaultTTL < 0 {
		add(&InvalidPolicyError{Rule: -1, Field: "DefaultTTL", Item: -1, Earlier: -1, Reason: fmt.Sprintf("%v: must not be negative", p.DefaultTTL)})
	}
	// Match → index of the first rule with it and no condition: the rules
	// after it with the same Match are never tried.
	unconditional := map[string]int{}
	for i := range p.Rules {
		r := &p.Rules[i]
		if first, dup := unconditional[r.Match]; dup {
			add(&InvalidPolicyError{Rule: i, Match: r.Match, Field: "Match", Item: -1, Earlier: first,
				Reason: fmt.Sprintf("%q repeats rule %d, which has no condition and so always applies first: this rule never applies", r.Match, first)})
		} else if r.When == "" && r.Condition == nil && matchPattern.MatchString(r.Match) {
			unconditional[r.Match] = i
		}
		for _, e := range r.check(p.DefaultTTL) {
			e.Rule, e.Match = i, r.Match
			add(e)
		}
	}
	return errors.Join(errs...)
}

// InvalidPolicyError is one problem of a policy (Policy.Validate, New):
// the rule and the field at fault, so that a policy read from a file can
// be traced to the line that wrote it.
type InvalidPolicyError struct {
	// Rule is the rule's index in Policy.Rules; -1 for a field of the
	// Policy itself (DefaultTTL). Match is that rule's Match.
	Rule  int
	Match string
	// Field is the Go name of the field at fault ("Quorum", "Approvers");
	// empty when the problem is the rule as a whole (no one may approve).
	Field string
	// Item is the index of the list item at fault in Field (Approvers,
	// EscalateTo, Channels, Remember); -1 when the problem is the field.
	Item int
	// Earlier is, for a Match that repeats an earlier rule's, that rule's
	// index; -1 otherwise.
	Earlier int
	// Reason says what is wrong: the value, when it helps, then why.
	Reason string
	// Err is the cause, such as the error compiling a When; may be nil.
	Err error
}

func (e *InvalidPolicyError) Error() string {
	var b strings.Builder
	b.WriteString("policy: ")
	if e.Rule >= 0 {
		fmt.Fprintf(&b, "rule %d (%q): ", e.Rule, e.Match)
	}
	if e.Field != "" {
		b.WriteString("field " + e.Field)
		if e.Item >= 0 {
			fmt.Fprintf(&b, "[%d]", e.Item)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the cause, if any.
func (e *InvalidPolicyError) Unwrap() error { return e.Err }

// matchPattern is what a rule's Match may be: an action name's characters
// (see NewRawAction), and *. Anything else could match no action.
var matchPattern = regexp.MustCompile(`^[A-Za-z0-9_.:/*-]{1,128}$`)

// check returns the problems of one rule, Rule and Match left to the
// caller. defaultTTL is the policy's, which a rule without a TTL takes.
func (r *Rule) check(defaultTTL time.Duration) []*InvalidPolicyError {
	var out []*InvalidPolicyError
	fail := func(field string, item int, err error, format string, args ...any) {
		out = append(out, &InvalidPolicyError{Field: field, Item: item, Earlier: -1, Reason: fmt.Sprintf(format, args...), Err: err})
	}
	switch {
	case r.Match == "":
		fail("Match", -1, nil, "is required: an action name or a glob such as payments.*")
	case !matchPattern.MatchString(r.Match):
		fail("Match", -1, nil, "%q: want an action name or a glob of [A-Za-z0-9_.:/-] and *", r.Match)
	}
	switch {
	case r.When != "" && r.Condition != nil:
		fail("Condition", -1, nil, "is set, and so is When: set at most one")
	case r.Condition != nil && (r.Condition.Name == "" || r.Condition.Holds == nil):
		fail("Condition", -1, nil, "Name and Holds are required")
	case r.When != "":
		// Checked here without an action's schema: the syntax, the
		// variables, the functions and the result's type. The fields of
		// input are checked when an action the rule matches registers.
		if _, err := condition.Compile(r.When, nil); err != nil {
			fail("When", -1, err, "%q: %v", r.When, err)
		}
	}
	switch r.Effect {
	case EffectAllow, EffectAsk, EffectDeny:
	default:
		fail("Effect", -1, nil, "%q: want allow, ask or deny", r.Effect)
	}
	approversValid := true
	for j, a := range r.Approvers {
		switch err := validateApprover(a); {
		case err != nil:
			fail("Approvers", j, nil, "%v", err)
			approversValid = false
		case slices.Index(r.Approvers, a) < j:
			fail("Approvers", j, nil, "%q is listed twice", a)
		}
	}
	if r.Quorum < 0 {
		fail("Quorum", -1, nil, "%d: must not be negative (0 means %d)", r.Quorum, DefaultQuorum)
	}
	ttl := cmp.Or(r.TTL, defaultTTL, DefaultTTL)
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"TTL", r.TTL}, {"GrantTTL", r.GrantTTL}, {"EscalateAfter", r.EscalateAfter}, {"RemindEvery", r.RemindEvery}} {
		if d.v < 0 {
			fail(d.field, -1, nil, "%v: must not be negative", d.v)
		}
	}
	switch {
	case r.EscalateAfter > 0 && len(r.EscalateTo) == 0:
		fail("EscalateTo", -1, nil, "is required: whom to add as approvers once the escalation is due")
	case r.EscalateAfter == 0 && len(r.EscalateTo) > 0:
		fail("EscalateAfter", -1, nil, "is required: when to add the escalation's approvers")
	case r.EscalateAfter > 0 && ttl > 0 && r.EscalateAfter >= ttl:
		fail("EscalateAfter", -1, nil, "%v is not before the proposal expires (ttl %v): it would never escalate", r.EscalateAfter, ttl)
	}
	for j, a := range r.EscalateTo {
		switch err := validateApprover(a); {
		case err != nil:
			fail("EscalateTo", j, nil, "%v", err)
			approversValid = false
		case slices.Index(r.EscalateTo, a) < j:
			fail("EscalateTo", j, nil, "%q is listed twice", a)
		}
	}
	if r.RemindEvery > 0 && ttl > 0 && r.RemindEvery >= ttl {
		fail("RemindEvery", -1, nil, "%v is not before the proposal expires (ttl %v): no reminder would be sent", r.RemindEvery, ttl)
	}
	if r.Mode != "" && !r.Mode.Valid() {
		fail("Mode", -1, nil, "%q: want wait, two_phase or independent", r.Mode)
	}
	for j, c := range r.Channels {
		switch {
		case !slices.Contains(Channels, c):
			fail("Channels", j, nil, "%q: want one of %s", c, strings.Join(Channels, ", "))
		case slices.Index(r.Channels, c) < j:
			fail("Channels", j, nil, "%q is listed twice", c)
		}
	}
	for j, c := range r.Notify {
		switch {
		case !slices.Contains(NotifyChannels, c):
			fail("Notify", j, nil, "%q: want one of %s", c, strings.Join(NotifyChannels, ", "))
		case slices.Index(r.Notify, c) < j:
			fail("Notify", j, nil, "%q is listed twice", c)
		case len(r.Channels) > 0 && !slices.Contains(r.Channels, c):
			fail("Notify", j, nil, "%q is a channel the rule's channels exclude: its approvers could not decide there", c)
		}
	}
	switch {
	case r.StepUp != "" && r.StepUp != StepUpPasskey:
		fail("StepUp", -1, nil, "%q: want %s", r.StepUp, StepUpPasskey)
	case r.StepUp != "" && len(r.Remember) > 0:
		fail("Remember", -1, nil, "a step_up rule makes and honours no grants: every approval needs its own assertion")
	}
	for j, s := range r.Remember {
		switch {
		case !s.Valid():
			fail("Remember", j, nil, "%q: want run or thread", s)
		case slices.Index(r.Remember, s) < j:
			fail("Remember", j, nil, "%q is listed twice", s)
		}
	}
	if r.Effect == EffectAsk && approversValid && r.Quorum >= 0 {
		switch people, fixed := r.people(); {
		case !fixed:
		case people == 0:
			fail("", -1, nil, "no one may approve: the only approver is the requester, and self-approval is forbidden")
		case max(r.Quorum, DefaultQuorum) > people:
			fail("Quorum", -1, nil, "%d can never be met by the %d people the approvers name", max(r.Quorum, DefaultQuorum), people)
		}
	}
	return out
}

// people counts those who could ever approve under r: the actors its
// approvers name, with those it escalates to, and the requester unless
// self-approval is forbidden. fixed is false when a role is among them:
// a role is any number of people, and the count means nothing.
func (r *Rule) people() (n int, fixed bool) {
	named := map[string]bool{}
	approvers := cmpSlice(r.Approvers, []string{ApproverRequester})
	for _, a := range slices.Concat(approvers, r.EscalateTo) {
		switch {
		case strings.HasPrefix(a, approverRole):
			return 0, false
		case a == ApproverRequester && r.ForbidSelfApproval:
		default:
			named[a] = true
		}
	}
	return len(named), true
}

// validateApprover checks one approver's form: requester, or role: or
// actor: and a name without spaces or control characters, as a role or an
// actor id has.
func validateApprover(a string) error {
	isName := func(s string) bool {
		return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	}
	switch {
	case a == ApproverRequester:
	case strings.HasPrefix(a, approverRole) && isName(a[len(approverRole):]):
	case strings.HasPrefix(a, approverActor) && isName(a[len(approverActor):]):
	default:
		return fmt.Errorf("%q: want requester, role:NAME or actor:ID", a)
	}
	return nil
}

// ruleMatch is the rule that governs one call, with its effect.
type ruleMatch struct {
	effect Effect
	rule   Rule // a copy, defaults resolved
	// matched is false when no rule applied and defaults decided.
	matched bool
}

// resolved returns the effect of rule r (nil: no rule applied) for a call
// of a, with defaults resolved.
func (p *Policy) resolved(a *Action, r *Rule) ruleMatch {
	var m ruleMatch
	if r == nil {
		m.rule = Rule{Match: a.name, Effect: EffectAsk}
		if a.kind == KindRead && !a.confirmOnly {
			m.rule.Effect = EffectAllow
		}
	} else {
		m.rule = *r
		m.matched = true
	}
	m.effect = m.rule.Effect
	if a.confirmOnly && m.effect == EffectAllow {
		m.effect = EffectAsk
	}
	m.rule.Approvers = cmpSlice(m.rule.Approvers, []string{ApproverRequester})
	m.rule.Quorum = max(m.rule.Quorum, DefaultQuorum)
	if m.rule.TTL == 0 {
		m.rule.TTL = p.DefaultTTL
		if m.rule.TTL == 0 {
			m.rule.TTL = DefaultTTL
		}
	}
	if m.rule.Mode == "" {
		m.rule.Mode = DefaultMode
	}
	return m
}

func cmpSlice[T any](a, b []T) []T {
	if len(a) > 0 {
		return a
	}
	return b
}

// specificity ranks a rule's Match: exact names outrank every glob, and
// globs rank by their literal length.
func specificity(match string) int {
	if !strings.Contains(match, "*") {
		return 1 << 30
	}
	return len(match) - strings.Count(match, "*")
}

// candidates returns the indices of the rules whose Match fits name, in
// the order they are tried: the most specific first, equals in the
// policy's order.
func (p *Policy) candidates(name string) []int {
	var out []int
	for i := range p.Rules {
		if globMatch(p.Rules[i].Match, name) {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int {
		return specificity(p.Rules[b].Match) - specificity(p.Rules[a].Match)
	})
	return out
}

// match finds the most specific rule for name, conditions aside: the first
// rule tried.
func (p *Policy) match(name string) *Rule {
	var best *Rule
	bestScore := -1
	for i := range p.Rules {
		r := &p.Rules[i]
		if !globMatch(r.Match, name) {
			continue
		}
		if score := specificity(r.Match); score > bestScore {
			best, bestScore = r, score
		}
	}
	return best
}

// alwaysDenied reports whether every call of the action named name is
// denied whatever its input: the rules tried before the first one without
// a condition all deny, and so does that one.
func (p *Policy) alwaysDenied(name string) bool {
	for _, i := range p.candidates(name) {
		r := &p.Rules[i]
		if r.Effect != EffectDeny {
			return false
		}
		if r.When == "" && r.Condition == nil {
			return true
		}
	}
	return false
}

// ruleFor finds the rule a proposal recorded (match and when) as the
// policy stands; failing that, the most specific one for its action.
func (p *Policy) ruleFor(action, match, when string) *Rule {
	if match != "" {
		for i := range p.Rules {
			if r := &p.Rules[i]; r.Match == match && r.whenText() == when {
				return r
			}
		}
	}
	return p.match(action)
}

// whenText is the rule's condition as a proposal records it: the When
// expression, or the Go Condition's name.
func (r *Rule) whenText() string {
	if r.Condition != nil {
		return r.Condition.Name
	}
	return r.When
}

// globMatch matches name against a pattern where * matches any run of
// characters, including dots and the empty run.
func globMatch(pattern, name string) bool {
	// Walked without allocating: this runs for every rule on every call.
	prefix, rest, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == name
	}
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	name = name[len(prefix):]
	for {
		part, more, ok := strings.Cut(rest, "*")
		if !ok { // part is the last piece: it must end the name
			return len(name) >= len(part) && strings.HasSuffix(name, part)
		}
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name, rest = name[i+len(part):], more
	}
}

// mayDecide reports whether decider may decide p under the frozen approvers
// and, when present, the current rule's CanDecide hook.
func mayDecide(ctx context.Context, p *cstype.Proposal, decider Identity, verdict cstype.Verdict, via string, hook func(context.Context, Identity, *cstype.Proposal) bool) error {
	deny := func(reason string) error {
		return &ForbiddenError{ProposalID: p.ID, Actor: decider.Actor, Reason: reason}
	}
	if err := mayAct(decider, ActDecide); err != nil {
		return err
	}
	if decider.Tenant != p.Tenant {
		return deny("another tenant's proposal")
	}
	if len(p.Channels) > 0 && !slices.Contains(p.Channels, via) {
		return deny(fmt.Sprintf("the rule does not accept decisions via %q", via))
	}
	if !isApprover(p, decider) {
		return deny("not among the approvers " + strings.Join(p.Approvers, ", "))
	}
	if verdict == cstype.VerdictApproved && p.ForbidSelfApproval && decider.Actor == p.Requester {
		return deny("the rule forbids self-approval")
	}
	if hook != nil && !hook(ctx, decider, p) {
		return deny("refused by the rule's CanDecide hook")
	}
	return nil
}

func isApprover(p *cstype.Proposal, id Identity) bool {
	for _, a := range p.Approvers {
		switch {
		case a == ApproverRequester && id.Actor == p.Requester:
			return true
		case strings.HasPrefix(a, approverActor) && a[len(approverActor):] == id.Actor:
			return true
		case strings.HasPrefix(a, approverRole) && slices.Contains(id.Roles, a[len(approverRole):]):
			return true
		}
	}
	return false
}

// Principals lists the approver forms that name id, for visibility filters.
func Principals(id Identity) []string {
	out := []string{approverActor + id.Actor}
	for _, r := range id.Roles {
		out = append(out, approverRole+r)
	}
	return out
}

// fingerprint names the terms of a rule (defaults resolved) that a
// remembered approval stands for: who approves (approvers, quorum,
// self-approval, channels), what may be remembered and how widely (remember
// scopes, any input), the mode, and the condition under which the rule
// applies (its When, or its Condition's name). A grant records the fingerprint of the
// rule its approval was given under and approves only calls whose rule has
// the same, so changing any of these terms retires the rule's grants.
// The order of approvers, channels and scopes is not a term.
func (r *Rule) fingerprint() string {
	sorted := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		s = slices.Clone(s)
		slices.Sort(s)
		return s
	}
	scopes := make([]string, len(r.Remember))
	for i, s := range r.Remember {
		scopes[i] = string(s)
	}
	terms := struct {
		Approvers          []string `json:"approvers"`
		Quorum             int      `json:"quorum"`
		ForbidSelfApproval bool     `json:"forbid_self_approval"`
		Channels           []string `json:"channels"`
		Remember           []string `json:"remember"`
		GrantAnyInput      bool     `json:"grant_any_input"`
		Mode               Mode     `json:"mode"`
		// omitempty: a rule without a condition keeps the fingerprint it
		// had before rules had conditions, and so its grants.
		When string `json:"when,omitempty"`
		// omitempty for the same reason: a rule without step-up keeps its
		// fingerprint. Notify is not a term: where a proposal is announced
		// changes nobody's authority.
		StepUp string `json:"step_up,omitempty"`
	}{sorted(r.Approvers), r.Quorum, r.ForbidSelfApproval, sorted(r.Channels), sorted(scopes), r.GrantAnyInput, r.Mode, r.whenText(), r.StepUp}
	b, _ := json.Marshal(terms) // strings, numbers and booleans always encode
	sum := sha256.Sum256(b)
	return "rule:v1:" + hex.EncodeToString(sum[:16])
}

// MatchGlob reports whether name matches pattern as a rule's Match does:
// "*" matches any run of characters, dots included; nothing else is
// special. Agents' action lists use it too, so that a glob means one thing
// everywhere.
func MatchGlob(pattern, name string) bool { return globMatch(pattern, name) }
