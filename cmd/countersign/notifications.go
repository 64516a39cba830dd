package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
)

// deliverer builds the notification outbox's worker from the configuration
// and writes its targets to the store, so that from now on every event of a
// configured type gets its notification in its own transaction. Without
// notifications configured it clears the targets: no rows are written.
func (rt *runtime) deliverer() (*notifications.Deliverer, error) {
	cfg := rt.cfg
	targets := make([]notifications.Target, len(cfg.Notifications))
	for i, n := range cfg.Notifications {
		secret, err := cfg.NotificationSecret(i)
		if err != nil {
			return nil, &exitErr{exitUsage, err.Error()}
		}
		events := make([]cstype.EventType, len(n.Events))
		for j, e := range n.Events {
			events[j] = cstype.EventType(e)
		}
		targets[i] = notifications.Target{
			URL: n.URL, Events: events, Secret: secret, Timeout: n.Timeout, MaxAttempts: n.MaxAttempts,
			Backoff: notifications.Backoff{Initial: n.BackoffInitial, Max: n.BackoffMax},
		}
	}
	var err error
	if rt.slack, err = rt.slackChannel(); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	d, err := notifications.New(notifications.Options{
		Engine: rt.engine, Targets: targets, Channels: rt.notifyChannels(), Render: server.RenderProposal,
		Owner:        "notifications@" + host + ":" + strconv.Itoa(os.Getpid()),
		PollInterval: cfg.Worker.PollInterval, MaxConcurrency: cfg.Worker.MaxConcurrency, Logger: rt.log,
		Observe:        rt.metrics.NotificationAttempt,
		TracerProvider: rt.tracing,
	})
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	return d, nil
}

func notificationsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notifications", Short: "List notifications and send failed ones again (operators)"}
	var lf clientFlags
	var status string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's notifications, newest first (operators)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !cstype.NotificationStatus(status).Valid() {
				return &exitErr{exitUsage, fmt.Sprintf("--status %q: want pending, delivered or failed", status)}
			}
			c, err := lf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			var page struct {
				Notifications []*server.Notification `json:"notifications"`
			}
			if _, err := c.do(cmd.Context(), "GET", "/v1/notifications", q, nil, &page); err != nil {
				return err
			}
			if lf.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			return printNotifications(cmd.OutOrStdout(), page.Notifications)
		},
	}
	lf.register(list)
	list.Flags().StringVar(&status, "status", "", "only this status: pending, delivered or failed")

	var rf clientFlags
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Send a failed notification again, with the same id (operators)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rf.client()
			if err != nil {
				return err
			}
			id, err := idSegment("notification", args[0])
			if err != nil {
				return err
			}
			var ans struct {
				Notification *server.Notification `json:"notification"`
			}
			if _, err := c.do(cmd.Context(), "POST", "/v1/notifications/"+id+"/retry", nil, nil, &ans); err != nil {
				return err
			}
			if rf.json {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			if ans.Notification == nil {
				return fmt.Errorf("the server's answer has no notification")
			}
			fmt.Fprintln(cmd.OutOrStdout(), plaintext.Line("notification "+ans.Notification.ID+" is "+ans.Notification.Status+" again: it will be sent with the same id"))
			return nil
		},
	}
	rf.register(retry)
	cmd.AddCommand(list, retry)
	return cmd
}

func printNotifications(w io.Writer, ns []*server.Notification) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTYPE\tPROPOSAL\tTARGET\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR")
	for _, n := range ns {
		next := "-"
		if n.Status == string(cstype.NotificationPending) {
			next = n.NextAttemptAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", plaintext.Line(n.ID), plaintext.Line(n.Status), plaintext.Line(n.Type),
			plaintext.Line(n.ProposalID), plaintext.Line(n.Target), n.Attempts, next, plaintext.Line(truncate(n.LastError, 60)))
	}
	if len(ns) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}

// notifyChannels are the configured approver channels the outbox delivers
// to.
func (rt *runtime) notifyChannels() []notifications.Channel {
	var out []notifications.Channel
	if rt.slack != nil {
		out = append(out, rt.slack.Channel())
	}
	if rt.email != nil {
		out = append(out, rt.email.Notifications())
	}
	return out
}
