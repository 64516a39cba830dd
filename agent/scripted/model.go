package scripted

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/agent"
)

// ErrNoRuleMatches is returned by Generate when no rule matches the latest
// user message. A script is meant to cover its inputs; one that does not
// fails the run loudly rather than answering nothing. End the rules with
// '.*' for a fallback reply.
var ErrNoRuleMatches = errors.New("scripted: no rule matches the latest user message")

// Model is the scripted agent.Model. It is immutable once built, so one
// Model serves any number of runs at once.
type Model struct {
	rules     []rule
	afterTool string
}

var _ agent.Model = (*Model)(nil)

// New checks cfg and builds its model. Every problem found is reported,
// each a *ConfigError naming its field (several are joined with
// errors.Join): a missing or bad match regexp, a rule with neither say nor
// call, a call without action, an input placeholder naming no group of the
// rule's match, an input that is not a JSON object once every placeholder
// is replaced by a sample value.
func New(cfg Config) (*Model, error) {
	rules, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	afterTool := cfg.AfterTool
	if afterTool == "" {
		afterTool = DefaultAfterTool
	}
	return &Model{rules: rules, afterTool: afterTool}, nil
}

// Generate answers the conversation. If its last message is a tool result,
// the reply is after_tool with "{summary}" replaced by that result's
// Summary, and no tool call. Otherwise the first rule whose match matches
// the latest user message answers: its say as the text and, if it has a
// call, one tool call whose input is the rule's template filled with the
// match's groups. The call's ID is minted (agent.NewToolCallID: "call_"
// and 96 random bits), so that no two calls of a thread share one: the
// runtime refuses an id an earlier call of the thread used.
//
// It fails with ErrNoRuleMatches when no rule matches, with an error when
// the conversation has no user message, and with an error naming the rule
// when its action is not among req.Tools or its filled input is not a JSON
// object (an unquoted placeholder whose group took text that is not JSON).
// No error repeats the user's message. Once ctx is done it returns
// ctx.Err().
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, errors.New("scripted: no request")
	}
	msgs := req.Messages
	if n := len(msgs); n > 0 && msgs[n-1].Role == agent.RoleTool {
		return &agent.Reply{Text: strings.ReplaceAll(m.afterTool, "{summary}", msgs[n-1].Summary)}, nil
	}
	text, ok := latestUserText(msgs)
	if !ok {
		return nil, errors.New("scripted: the conversation has no user message")
	}
	for _, r := range m.rules {
		loc := r.match.FindStringSubmatchIndex(text)
		if loc == nil {
			continue
		}
		reply := &agent.Reply{Text: r.say}
		if r.input == nil {
			return reply, nil
		}
		switch {
		case r.client && !offered(req.Tools, r.action):
			return nil, fmt.Errorf("scripted: %s: client tool %q is not among the tools the run's caller offers", r.name, r.action)
		case !offered(req.Tools, r.action):
			return nil, fmt.Errorf("scripted: %s: action %q is not offered to the model (the policy denies it or it is not configured)", r.name, r.action)
		}
		input, err := object(r.input.render(func(groups []int) string {
			return groupText(text, loc, groups)
		}))
		if err != nil {
			return nil, fmt.Errorf("scripted: %s: input is not a JSON object after substitution: %w", r.name, err)
		}
		reply.ToolCalls = []agent.ToolCall{{
			ID:     agent.NewToolCallID(),
			Action: r.action,
			Input:  input,
		}}
		return reply, nil
	}
	return nil, ErrNoRuleMatches
}

// latestUserText is the text of the conversation's last user message.
func latestUserText(msgs []agent.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleUser {
			return msgs[i].Text, true
		}
	}
	return "", false
}

// groupText is the text of the leftmost of groups that took part in the
// match at loc (as FindStringSubmatchIndex gives it), or "" if none did.
func groupText(s string, loc []int, groups []int) string {
	for _, g := range groups {
		if start, end := loc[2*g], loc[2*g+1]; start >= 0 {
			return s[start:end]
		}
	}
	return ""
}

func offered(tools []agent.Tool, action string) bool {
	for _, t := range tools {
		if t.Name == action {
			return true
		}
	}
	return false
}
