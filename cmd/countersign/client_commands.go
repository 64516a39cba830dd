package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/server"
	"github.com/spf13/cobra"
)

// clientFlags are shared by the commands that talk to a server.
type clientFlags struct {
	server, token string
	json          bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", envOr("COUNTERSIGN_URL", "http://127.0.0.1:8080"), "server URL (env COUNTERSIGN_URL)")
	// The token's default is read when the command runs, not here: a
	// flag's default is printed by --help, and a secret never is.
	cmd.Flags().StringVar(&f.token, "token", "", "API key or JWT (default: the environment variable COUNTERSIGN_TOKEN)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON for scripts")
}

func (f *clientFlags) client() (*client, error) {
	return newClient(f.server, cmp.Or(f.token, os.Getenv("COUNTERSIGN_TOKEN")))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func proposalsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "proposals", Short: "List and show proposals"}
	var lf clientFlags
	var status, thread string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the proposals you may see, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := lf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			path := "/v1/proposals"
			if thread != "" {
				path = "/v1/threads/" + url.PathEscape(thread) + "/proposals"
			}
			if status != "" {
				q.Set("status", status)
			}
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			var page struct {
				Proposals []*server.Proposal `json:"proposals"`
			}
			if _, err := c.do(cmd.Context(), "GET", path, q, nil, &page); err != nil {
				return err
			}
			if lf.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			return printTable(cmd.OutOrStdout(), page.Proposals)
		},
	}
	lf.register(list)
	list.Flags().StringVar(&status, "status", "", "only this status (pending, approved, succeeded, …)")
	list.Flags().StringVar(&thread, "thread", "", "only this thread")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many (1..1000)")

	var sf clientFlags
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one proposal",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.client()
			if err != nil {
				return err
			}
			var p server.Proposal
			id, err := idSegment("proposal", args[0])
			if err != nil {
				return err
			}
			if _, err := c.do(cmd.Context(), "GET", "/v1/proposals/"+id, nil, nil, &p); err != nil {
				return err
			}
			if sf.json {
				return printJSON(cmd.OutOrStdout(), p)
			}
			return printProposal(cmd.OutOrStdout(), &p)
		},
	}
	sf.register(show)
	cmd.AddCommand(list, show)
	return cmd
}

// decisionAnswer is the server's answer to a decision.
type decisionAnswer struct {
	Status   string           `json:"status"`
	Proposal *server.Proposal `json:"proposal"`
	// AwaitingCaller: the approval runs only when the agent calls again.
	AwaitingCaller bool `json:"awaiting_caller,omitempty"`
}

func decisionCmd(verb string) *cobra.Command {
	var f clientFlags
	var reason, remember string
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: map[string]string{"approve": "Approve a proposal", "reject": "Reject a proposal"}[verb],
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			body := map[string]string{}
			if reason != "" {
				body["reason"] = reason
			}
			if remember != "" {
				if remember != "run" && remember != "thread" {
					return &exitErr{exitUsage, "--remember: want run or thread"}
				}
				body["remember"] = remember
			}
			var ans decisionAnswer
			id, err := idSegment("proposal", args[0])
			if err != nil {
				return err
			}
			if _, err := c.do(cmd.Context(), "POST", "/v1/proposals/"+id+"/"+verb, nil, body, &ans); err != nil {
				return err
			}
			return reportDecision(cmd, f.json, ans)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the decision")
	if verb == "approve" {
		cmd.Flags().StringVar(&remember, "remember", "", "remember this approval for the run or the thread (when the rule allows)")
	}
	return cmd
}

func resolveCmd() *cobra.Command {
	var f clientFlags
	var outcome, note, receipt string
	cmd := &cobra.Command{
		Use:   "resolve ID",
		Short: "Resolve a reconciling or unknown proposal (operators)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if outcome != "succeeded" && outcome != "failed" {
				return &exitErr{exitUsage, "--outcome: want succeeded or failed"}
			}
			if note == "" {
				return &exitErr{exitUsage, "--note is required: say what you checked"}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			body := map[string]string{"outcome": outcome, "note": note}
			if receipt != "" {
				body["receipt"] = receipt
			}
			var ans decisionAnswer
			id, err := idSegment("proposal", args[0])
			if err != nil {
				return err
			}
			if _, err := c.do(cmd.Context(), "POST", "/v1/proposals/"+id+"/resolve", nil, body, &ans); err != nil {
				return err
			}
			return reportDecision(cmd, f.json, ans)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&outcome, "outcome", "", "succeeded or failed")
	cmd.Flags().StringVar(&note, "note", "", "what you found (required)")
	cmd.Flags().StringVar(&receipt, "receipt", "", "the backend's receipt, if it applied")
	return cmd
}

// reportDecision prints a decision's answer; an answer that did not apply is
// exit code 7, so scripts can tell.
func reportDecision(cmd *cobra.Command, asJSON bool, ans decisionAnswer) error {
	if asJSON {
		if err := printJSON(cmd.OutOrStdout(), ans); err != nil {
			return err
		}
	} else {
		status := ""
		if ans.Proposal != nil {
			status = fmt.Sprintf(" (proposal %s is now %s)", ans.Proposal.ID, ans.Proposal.Status)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s\n", plaintext.Line(describeAnswer(ans.Status)+status))
		if ans.AwaitingCaller && ans.Proposal != nil {
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", plaintext.Line(awaitingCaller(ans.Proposal)))
		}
	}
	switch ans.Status {
	case "applied", "unchanged", "":
		return nil
	}
	return &exitErr{exitRefused, ""}
}

// awaitingCaller says what an approval that no server-side process will
// execute waits for: the agent's next call, before the deadline.
func awaitingCaller(p *server.Proposal) string {
	return fmt.Sprintf("It runs only when %s's agent calls again, before %s; if it does not, the approval lapses and it never runs (expired, not_collected).",
		p.Requester, p.ExpiresAt.UTC().Format(time.RFC3339))
}

func describeAnswer(s string) string {
	switch s {
	case "applied":
		return "applied: your decision was recorded"
	case "unchanged":
		return "unchanged: that decision already stands"
	case "conflict":
		return "conflict: a different decision already stands, or the proposal is past deciding"
	case "expired":
		return "expired: the deadline passed; nothing was authorized"
	}
	return s
}

// printJSON prints v as indented JSON, with the characters a terminal would
// obey escaped (the document means the same).
func printJSON(w io.Writer, v any) error {
	doc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(escapeJSON(doc), '\n'))
	return err
}

func printTable(w io.Writer, ps []*server.Proposal) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tACTION\tREQUESTER\tTHREAD\tEXPIRES\tPREVIEW")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", plaintext.Line(p.ID), plaintext.Line(p.Status), plaintext.Line(p.Action),
			plaintext.Line(p.Requester), plaintext.Line(p.ThreadID), p.ExpiresAt.Local().Format(time.DateTime),
			plaintext.Line(truncate(p.Preview, 60)))
	}
	if len(ps) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}

func printProposal(w io.Writer, p *server.Proposal) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Every value holds the server's text: escaped whole.
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, plaintext.Line(v)) }
	row("ID", p.ID)
	row("Status", string(p.Status))
	row("Action", p.Action+" (version "+p.ActionVersion+")")
	row("Requester", p.Requester+" in thread "+p.ThreadID)
	row("Preview", p.Preview)
	row("Input", readableJSON(p.Input))
	row("Approvers", strings.Join(p.Approvers, ", ")+fmt.Sprintf(" (quorum %d)", p.Quorum))
	row("Expires", p.ExpiresAt.Local().Format(time.RFC3339))
	for _, d := range p.Decisions {
		row("Decision", fmt.Sprintf("%s %s via %s at %s %s", d.Actor, d.Decision, d.Via, d.At.Local().Format(time.DateTime), d.Reason))
	}
	if o := p.Outcome; o != nil {
		row("Outcome", o.Summary)
	}
	return tw.Flush()
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// readableJSON is raw compacted, with <, > and & as themselves rather than
// the \u003c escapes the server's JSON encoder writes: an approver reads
// the arguments as the caller sent them. Anything that is not JSON is shown
// as it came.
func readableJSON(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
