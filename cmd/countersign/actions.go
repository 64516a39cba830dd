package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/server"
	"github.com/spf13/cobra"
)

func actionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "actions", Short: "List the actions you may call"}
	var f clientFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List the actions your token may call, and whether the policy allows them at once or asks",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var page server.ActionList
			if _, err := c.do(cmd.Context(), "GET", "/v1/actions", nil, nil, &page); err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			return printActions(cmd.OutOrStdout(), page.Actions)
		},
	}
	f.register(list)
	cmd.AddCommand(list)
	return cmd
}

func printActions(w io.Writer, as []server.ActionInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tEFFECT\tDESCRIPTION")
	for _, a := range as {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", plaintext.Line(a.Name), plaintext.Line(a.Version), plaintext.Line(a.Kind),
			plaintext.Line(a.Effect), plaintext.Line(truncate(a.Description, 60)))
	}
	if len(as) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}
