// Command countersign is the Countersign server and its command-line client.
//
//	countersign serve [--config F] [--listen A] [--store URL]   run the HTTP API, the inbox and the workers
//	countersign worker [--config F] [--store URL]               run workers only (scale out on PostgreSQL)
//	countersign migrate [--store URL]                           apply pending migrations
//	countersign mcp --config F --token KEY                      serve the MCP gateway over stdio as KEY's identity
//	countersign proposals list [--status S] [--thread T] [--json]
//	countersign proposals show ID
//	countersign approve ID [--reason R] [--remember run|thread]
//	countersign reject ID [--reason R]
//	countersign resolve ID --outcome succeeded|failed --note N
//	countersign grants list [--thread T] [--json]
//	countersign actions list [--json]
//	countersign grants revoke ID
//	countersign notifications list [--status S] [--json]
//	countersign notifications retry ID
//	countersign audit export [--after SEQ] > F
//	countersign audit verify [F] [--expect SEQ:HASH]
//	countersign config validate F
//	countersign version
//
// The client commands talk to a server: --server or COUNTERSIGN_URL, and
// --token or COUNTERSIGN_TOKEN. Exit codes: 0 ok, 1 error, 2 usage,
// 3 server unreachable, 4 unauthenticated (401), 5 forbidden (403),
// 6 not found (404), 7 refused (the decision did not apply: conflict,
// expired, invalid state), 8 the audit chain does not hold (audit verify).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "countersign:", msg)
		}
		os.Exit(exitCode(err))
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "countersign",
		Short: "Countersign puts a human between an AI agent and its side effects",
		Long: `Countersign binds an agent's exact call to a durable proposal, lets the right
people approve or reject it, and executes the approved call at most once.

Client commands talk to a server (--server or COUNTERSIGN_URL, --token or
COUNTERSIGN_TOKEN). Exit codes: 0 ok, 1 error, 2 usage, 3 server unreachable,
4 unauthenticated, 5 forbidden, 6 not found, 7 refused (did not apply),
8 the audit chain does not hold (audit verify).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitErr{exitUsage, err.Error()} })
	root.AddCommand(proposalsCmd(), decisionCmd("approve"), decisionCmd("reject"), resolveCmd(), versionCmd())
	root.AddCommand(grantsCmd())
	root.AddCommand(passkeysCmd())
	root.AddCommand(actionsCmd())
	root.AddCommand(notificationsCmd())
	root.AddCommand(chatCmd())
	root.AddCommand(auditCmd())
	root.AddCommand(serverCommands()...)
	return root
}

// exactArgs and noArgs are cobra's, with usage errors as exit code 2.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &exitErr{exitUsage, err.Error() + "\nUsage: " + cmd.UseLine()}
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return &exitErr{exitUsage, err.Error() + "\nUsage: " + cmd.UseLine()}
	}
	return nil
}
