package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func passkeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "passkeys", Short: "Passkeys for step-up rules"}
	var f clientFlags
	enroll := &cobra.Command{
		Use:   "enroll ACTOR",
		Short: "Print a single-use, 15-minute link through which ACTOR, signed in to the inbox, enrols a first passkey (operator)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var ans struct {
				Actor     string    `json:"actor"`
				URL       string    `json:"url"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			if _, err := c.do(cmd.Context(), "POST", "/v1/passkeys/enrollments", nil, map[string]string{"actor": args[0]}, &ans); err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\nSend this link to %s only: it enrols a passkey for them once, signed in as themselves, until %s.\n",
				ans.URL, ans.Actor, ans.ExpiresAt.Local().Format(time.DateTime))
			return err
		},
	}
	f.register(enroll)
	cmd.AddCommand(enroll)
	return cmd
}
