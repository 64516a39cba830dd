package readme

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The answers' fields the checks read (docs/api.md has them all).
type (
	proposal struct {
		ID         string     `json:"id"`
		Status     string     `json:"status"`
		ThreadID   string     `json:"thread_id"`
		ToolCallID string     `json:"tool_call_id"`
		Action     string     `json:"action"`
		Mode       string     `json:"mode"`
		Approvers  []string   `json:"approvers"`
		Quorum     int        `json:"quorum"`
		Decisions  []decision `json:"decisions"`
		Outcome    *outcome   `json:"outcome"`
		Rule       struct {
			Match string `json:"match"`
			When  string `json:"when"`
		} `json:"rule"`
		Input json.RawMessage `json:"input"`
	}
	decision struct {
		Actor    string `json:"actor"`
		Decision string `json:"decision"`
		Via      string `json:"via"`
		Reason   string `json:"reason"`
	}
	outcome struct {
		ProposalID string `json:"proposal_id"`
		Status     string `json:"status"`
		Executed   bool   `json:"executed"`
		Receipt    string `json:"receipt"`
	}
	callAnswer struct {
		ProposalID string   `json:"proposal_id"`
		Status     string   `json:"status"`
		Executed   bool     `json:"executed"`
		Receipt    string   `json:"receipt"`
		Proposal   proposal `json:"proposal"`
	}
	decisionAnswer struct {
		Status   string   `json:"status"`
		Proposal proposal `json:"proposal"`
	}
	message struct {
		Role      string `json:"role"`
		Text      string `json:"text"`
		Sender    string `json:"sender"`
		ToolCalls []struct {
			ID     string `json:"id"`
			Action string `json:"action"`
		} `json:"tool_calls"`
		Result *struct {
			ProposalID string `json:"proposal_id"`
			Status     string `json:"status"`
		} `json:"result"`
		Outcome *outcome `json:"outcome"`
	}
	agentRun struct {
		ID          string   `json:"id"`
		Status      string   `json:"status"`
		ProposalIDs []string `json:"proposal_ids"`
	}
	// chatAnswer is POST /v1/threads/{id}/messages': a run, or a decision
	// by text.
	chatAnswer struct {
		Messages         []message       `json:"messages"`
		Run              *agentRun       `json:"run"`
		ProposalDecision *decisionAnswer `json:"proposal_decision"`
		Text             string          `json:"text"`
	}
	threadAnswer struct {
		Messages []message `json:"messages"`
	}
)

// problems collects what does not hold, to report all of it at once.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, "\n"))
}

// answers splits a block's output into its answers, one a line (each curl
// is followed by echo).
func answers(out string, want int) ([]string, error) {
	var as []string
	for l := range strings.Lines(out) {
		if l = strings.TrimSpace(l); l != "" {
			as = append(as, l)
		}
	}
	if len(as) != want {
		return nil, fmt.Errorf("%d answers, want %d (one per curl)", len(as), want)
	}
	return as, nil
}

// decode decodes the i-th answer (counting from 1) into v.
func decode(as []string, i int, v any) error {
	if err := json.Unmarshal([]byte(as[i-1]), v); err != nil {
		return fmt.Errorf("answer %d is not the JSON expected: %v: %s", i, err, as[i-1])
	}
	return nil
}

// api sends a request to the server as token and decodes a 2xx answer into
// v.
func api(base, method, path, token string, body, v any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %w: %s", method, path, err, b)
	}
	return nil
}

// blockCheck checks a block's output against what its comments promise,
// asking the server at base where a promise is not in the output, and
// returns the proposal the run dealt with.
type blockCheck func(base, out string) (string, error)

// blockChecks has a check for every block the README marks; a block
// without one fails the test, so a new block cannot go unchecked.
var blockChecks = map[string]blockCheck{
	"quickstart": checkQuickstart,
	"conditions": checkConditions,
	"chat":       checkChat,
}

func hasDecision(p proposal, actor, via string) bool {
	return slices.ContainsFunc(p.Decisions, func(d decision) bool {
		return d.Actor == actor && d.Decision == "approved" && d.Via == via
	})
}

// checkQuickstart: 1. alice's agent asks for a refund; the demo policy asks
// finance, and the worker executes; a repeated tool call id replays the
// first call's answer. 2. bob (finance) approves the proposal the call's
// answer names. 3. the worker executed it; the proposal holds the outcome,
// and alice's thread its message.
func checkQuickstart(base, out string) (string, error) {
	as, err := answers(out, 3)
	if err != nil {
		return "", err
	}
	var p problems
	var call callAnswer
	if err := decode(as, 1, &call); err != nil {
		return "", err
	}
	id := call.ProposalID
	if call.Status != "pending" || call.Executed || !strings.HasPrefix(id, "prp_") || call.Proposal.Action != "payments.refund" ||
		call.Proposal.Mode != "independent" || !slices.Equal(call.Proposal.Approvers, []string{"role:finance"}) {
		p.add("1. the call is not a refund waiting for finance, for the worker to execute: %s", as[0])
	}
	var approve decisionAnswer
	if err := decode(as, 2, &approve); err != nil {
		p.add("%v", err)
		return "", p.err()
	}
	if approve.Status != "applied" || approve.Proposal.ID != id || !hasDecision(approve.Proposal, "bob", "api") {
		p.add("2. bob's approval of %s did not apply: %s", id, as[1])
	}
	var got proposal
	if err := decode(as, 3, &got); err != nil {
		p.add("%v", err)
		return "", p.err()
	}
	if got.ID != id || got.Status != "succeeded" || got.Outcome == nil || !got.Outcome.Executed || !strings.HasPrefix(got.Outcome.Receipt, "rf_") {
		p.add("3. proposal %s did not end succeeded with the worker's receipt: %s", id, as[2])
	} else {
		// 1. "a repeated id answers with that call's proposal, or once it
		// settled its outcome: it never runs twice"
		var again callAnswer
		if err := api(base, "POST", "/v1/calls", "ck_agent_alice", map[string]any{
			"thread_id": call.Proposal.ThreadID, "tool_call_id": call.Proposal.ToolCallID,
			"action": call.Proposal.Action, "input": call.Proposal.Input,
		}, &again); err != nil {
			p.add("1. repeating the call: %v", err)
		} else if again.Proposal.ID != id || again.Status != "succeeded" || again.Receipt != got.Outcome.Receipt {
			p.add("1. repeating the tool call id %s answered proposal %s, %s, receipt %q: want %s's outcome, receipt %s",
				call.Proposal.ToolCallID, again.Proposal.ID, again.Status, again.Receipt, id, got.Outcome.Receipt)
		}
	}
	var thread threadAnswer
	if err := api(base, "GET", "/v1/threads/"+call.Proposal.ThreadID, "ck_agent_alice", nil, &thread); err != nil {
		p.add("3. alice's thread: %v", err)
	} else if !slices.ContainsFunc(thread.Messages, func(m message) bool {
		return m.Role == "assistant" && m.Outcome != nil && m.Outcome.ProposalID == id && m.Outcome.Status == "succeeded"
	}) {
		p.add("3. alice's thread %s holds no outcome message for %s", call.Proposal.ThreadID, id)
	}
	return id, p.err()
}

// checkConditions: 1. a refund of 1,500 EUR needs two finance approvers
// (the rule that asked is named). 2. bob approves: one of two, it still
// waits; carol approves: it runs.
func checkConditions(_, out string) (string, error) {
	as, err := answers(out, 4)
	if err != nil {
		return "", err
	}
	var p problems
	var call callAnswer
	var bob, carol decisionAnswer
	var got proposal
	for i, v := range []any{&call, &bob, &carol, &got} {
		if err := decode(as, i+1, v); err != nil {
			return "", err
		}
	}
	id := call.ProposalID
	if call.Status != "pending" || call.Proposal.Quorum != 2 || !slices.Equal(call.Proposal.Approvers, []string{"role:finance"}) ||
		call.Proposal.Rule.Match != "payments.refund" || call.Proposal.Rule.When != "input.amount > 1000" {
		p.add("1. the call does not wait for two finance approvers under the rule payments.refund when input.amount > 1000: %s", as[0])
	}
	if bob.Status != "applied" || bob.Proposal.ID != id || bob.Proposal.Status != "pending" || !hasDecision(bob.Proposal, "bob", "api") {
		p.add("2. after bob's approval %s does not still wait: %s", id, as[1])
	}
	if carol.Status != "applied" || carol.Proposal.ID != id || carol.Proposal.Status != "approved" || !hasDecision(carol.Proposal, "carol", "api") {
		p.add("2. carol's approval did not approve %s: %s", id, as[2])
	}
	if got.ID != id || got.Status != "succeeded" || got.Outcome == nil || !strings.HasPrefix(got.Outcome.Receipt, "rf_") {
		p.add("2. %s did not run: %s", id, as[3])
	}
	return id, p.err()
}

// checkChat: 1. alice writes to her agent; its refund call waits for
// finance. 2. bob (finance) answers in the conversation, a decision by
// text. 3. the worker executed it; the thread holds the outcome message.
func checkChat(_, out string) (string, error) {
	as, err := answers(out, 3)
	if err != nil {
		return "", err
	}
	var p problems
	var first, yes chatAnswer
	var thread threadAnswer
	for i, v := range []any{&first, &yes, &thread} {
		if err := decode(as, i+1, v); err != nil {
			return "", err
		}
	}
	if first.Run == nil || first.Run.Status != "finished" || len(first.Run.ProposalIDs) != 1 {
		return "", fmt.Errorf("1. alice's message did not start a run that made one proposal: %s", as[0])
	}
	id := first.Run.ProposalIDs[0]
	if !slices.ContainsFunc(first.Messages, func(m message) bool {
		return m.Role == "tool" && m.Result != nil && m.Result.ProposalID == id && m.Result.Status == "pending"
	}) || !slices.ContainsFunc(first.Messages, func(m message) bool {
		return m.Role == "assistant" && len(m.ToolCalls) == 1 && m.ToolCalls[0].Action == "payments.refund"
	}) {
		p.add("1. the agent's refund call %s does not wait: %s", id, as[0])
	}
	if d := yes.ProposalDecision; d == nil || d.Status != "applied" || d.Proposal.ID != id || d.Proposal.Status != "approved" ||
		!hasDecision(d.Proposal, "bob", "text") {
		p.add("2. bob's \"yes\" did not approve %s by text: %s", id, as[1])
	}
	if !slices.ContainsFunc(thread.Messages, func(m message) bool {
		return m.Role == "assistant" && m.Outcome != nil && m.Outcome.ProposalID == id && m.Outcome.Status == "succeeded" &&
			strings.HasPrefix(m.Outcome.Receipt, "rf_")
	}) {
		p.add("3. the thread holds no outcome message for %s: %s", id, as[2])
	}
	return id, p.err()
}

// cliChecks say what each command of the README's command-line paragraph
// must print, given the proposal it names: a command without one fails
// the test.
var cliChecks = map[string]func(out, id string) error{
	"countersign proposals list": func(out, id string) error {
		for l := range strings.Lines(out) {
			if f := strings.Fields(l); len(f) > 1 && f[0] == id && f[1] == "pending" {
				return nil
			}
		}
		return fmt.Errorf("it does not list %s as pending", id)
	},
	"countersign approve": func(out, id string) error {
		if want := "applied: your decision was recorded (proposal " + id + " is now approved)"; !strings.Contains(out, want) {
			return fmt.Errorf("it does not say %q", want)
		}
		return nil
	},
}

// cliCheck returns the check of cmd, by its longest prefix in cliChecks.
func cliCheck(cmd string) (func(out, id string) error, bool) {
	best := ""
	for prefix := range cliChecks {
		if (cmd == prefix || strings.HasPrefix(cmd, prefix+" ")) && len(prefix) > len(best) {
			best = prefix
		}
	}
	return cliChecks[best], best != ""
}

// checkBanner: the banner's commands, run as printed: alice's agent's
// call waits; bob approves it; the worker executed it and the proposal
// holds the outcome; countersign proposals list shows it; alice's message
// starts a run, and bob's "yes" decides by text.
func checkBanner(out string) error {
	m := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(out)
	if m == nil {
		return errors.New("the call named no proposal")
	}
	id := m[1]
	var p problems
	if !strings.Contains(out, `"status":"applied"`) {
		p.add("bob's approval did not apply")
	}
	// The proposal as alice's agent reads it after the approval: the answer
	// that begins a line with the proposal (the call's and the approval's
	// answers hold it too, nested).
	if loc := regexp.MustCompile(`(?m)^\{"id":"` + id + `"`).FindStringIndex(out); loc == nil {
		p.add("the proposal %s was not read", id)
	} else {
		var got proposal
		if err := json.NewDecoder(strings.NewReader(out[loc[0]:])).Decode(&got); err != nil {
			p.add("the proposal read: %v", err)
		} else if got.Status != "succeeded" || got.Outcome == nil || !strings.HasPrefix(got.Outcome.Receipt, "rf_") {
			p.add("the proposal %s does not hold the worker's outcome: status %s", id, got.Status)
		}
	}
	if !regexp.MustCompile(`(?m)^` + id + `\s+succeeded\s+payments\.refund\s`).MatchString(out) {
		p.add("countersign proposals list does not list %s as succeeded", id)
	}
	if !strings.Contains(out, `"run":{`) || !strings.Contains(out, `"via":"text"`) {
		p.add("the chat did not start a run and a decision by text")
	}
	return p.err()
}
