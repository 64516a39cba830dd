package main

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/server"
	"github.com/spf13/cobra"
)

func grantsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "grants", Short: "List and revoke remembered approvals"}
	var lf clientFlags
	var thread string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the grants you may manage (yours, those you granted; an operator's: the tenant's), newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := lf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if thread != "" {
				q.Set("thread_id", thread)
			}
			var page struct {
				Grants []*server.Grant `json:"grants"`
			}
			if _, err := c.do(cmd.Context(), "GET", "/v1/grants", q, nil, &page); err != nil {
				return err
			}
			if lf.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			return printGrants(cmd.OutOrStdout(), page.Grants, time.Now())
		},
	}
	lf.register(list)
	list.Flags().StringVar(&thread, "thread", "", "only this thread")

	var rf clientFlags
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a grant: the calls it approved need a decision again",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rf.client()
			if err != nil {
				return err
			}
			id, err := idSegment("grant", args[0])
			if err != nil {
				return err
			}
			var ans struct {
				Grant *server.Grant `json:"grant"`
			}
			if _, err := c.do(cmd.Context(), "DELETE", "/v1/grants/"+id, nil, nil, &ans); err != nil {
				return err
			}
			if rf.json {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			g := ans.Grant
			if g == nil {
				return fmt.Errorf("the server's answer has no grant")
			}
			msg := "revoked grant " + g.ID
			if g.RevokedAt != nil {
				msg += " (revoked"
				if g.RevokedBy != "" {
					msg += " by " + g.RevokedBy
				}
				msg += " at " + g.RevokedAt.Local().Format(time.DateTime) + ")"
			}
			fmt.Fprintln(cmd.OutOrStdout(), plaintext.Line(msg+": calls it approved need a decision again"))
			return nil
		},
	}
	rf.register(revoke)
	cmd.AddCommand(list, revoke)
	return cmd
}

// grantState says where a grant stands at now, from its fields: revoked,
// expired, inactive (its approved call has not succeeded yet) or live.
func grantState(g *server.Grant, now time.Time) string {
	switch {
	case g.RevokedAt != nil:
		return "revoked"
	case g.ExpiresAt != nil && !now.Before(*g.ExpiresAt):
		return "expired"
	case g.ActivatedAt == nil:
		return "inactive"
	}
	return "live"
}

func printGrants(w io.Writer, gs []*server.Grant, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSCOPE\tACTION\tREQUESTER\tTHREAD\tINPUT\tORIGIN\tGRANTED BY\tCREATED")
	for _, g := range gs {
		scope := g.Scope
		if g.RunID != "" {
			scope += " " + g.RunID
		}
		input := g.InputDigest
		if input == "" {
			input = "(any)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", plaintext.Line(g.ID), grantState(g, now), plaintext.Line(scope),
			plaintext.Line(g.Action+" v"+g.ActionVersion), plaintext.Line(g.Requester), plaintext.Line(g.ThreadID), plaintext.Line(truncate(input, 24)),
			plaintext.Line(g.OriginProposalID), plaintext.Line(g.GrantedBy), g.CreatedAt.Local().Format(time.DateTime))
	}
	if len(gs) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}
