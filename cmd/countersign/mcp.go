package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/mcpgateway"
	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// gateway builds the MCP gateway of the configuration's mcp section on
// rt's engine: nil when it names no upstream server. Header values are read
// from the environment now, so that a missing one fails start-up.
//
// tasks offers MCP Tasks: only a process whose worker executes the
// gateway's approved calls (serve) offers them.
func (rt *runtime) gateway(authn auth.Authenticator, tasks bool) (*mcpgateway.Gateway, error) {
	m := rt.cfg.MCP
	if len(m.Servers) == 0 {
		return nil, nil
	}
	var ups []mcpgateway.Upstream
	for _, s := range m.Servers {
		u, err := mcpUpstream(s, os.Getenv, rt.tracing)
		if err != nil {
			return nil, &exitErr{exitUsage, err.Error()}
		}
		ups = append(ups, u)
	}
	// CheckSecrets made sure a named variable is set and holds a secret
	// of its own; New checks its length.
	var stateSecret []byte
	if m.StateSecretEnv != "" {
		stateSecret = []byte(os.Getenv(m.StateSecretEnv))
		if len(stateSecret) < mcpgateway.MinStateSecret {
			return nil, &exitErr{exitUsage, fmt.Sprintf("mcp.state_secret_env: %s holds %d bytes, want at least %d",
				m.StateSecretEnv, len(stateSecret), mcpgateway.MinStateSecret)}
		}
	}
	if rt.dryRun {
		// The upstreams' settings are checked; their processes are not
		// started.
		return nil, nil
	}
	gw, err := mcpgateway.New(mcpgateway.Options{Engine: rt.engine, Upstreams: ups, Hold: m.Hold, Auth: authn, Logger: rt.log,
		StateSecret: stateSecret, Tasks: tasks})
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	return gw, nil
}

// readyWithUpstreams answers /readyz 503 NOT_READY naming the MCP
// upstreams that are down, and passes everything else (and /readyz while
// every upstream is up) to api. The names are the configuration's; why each
// is down (hosts, commands) goes to the log, not to an unauthenticated
// caller.
func readyWithUpstreams(api http.Handler, gw *mcpgateway.Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down := gw.Down()
		if r.URL.Path != "/readyz" || len(down) == 0 {
			api.ServeHTTP(w, r)
			return
		}
		names := make([]string, len(down))
		for i, d := range down {
			names[i] = d.Name
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": "not_ready",
			"error": map[string]any{
				"code":    "NOT_READY",
				"message": "not ready: MCP upstreams down: " + strings.Join(names, ", "),
				"details": map[string]any{"mcp_upstreams_down": names},
			},
		})
	})
}

// mcpConnectWait bounds how long `countersign mcp` waits for its upstreams'
// first connections before it serves, so that the client's first
// tools/list already holds the tools of the upstreams that start quickly;
// later ones are announced with list_changed.
const mcpConnectWait = 10 * time.Second

func mcpCmd() *cobra.Command {
	var f setupFlags
	var token string
	cmd := &cobra.Command{
		Use:   "mcp --config F --token KEY",
		Short: "Serve the MCP gateway over stdio (desktop clients), as the token's identity",
		Long: `Serve the MCP gateway of the configuration's mcp section over standard input and
output: the tools of its upstream servers, each call gated by the policy. The
token (an API key or a JWT) is the caller. Logs go to standard error;
standard output is the MCP connection.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.config == "" {
				return &exitErr{exitUsage, "mcp needs --config: the file's mcp section names the upstream servers"}
			}
			return serveMCP(cmd.Context(), &f, cmp.Or(token, os.Getenv("COUNTERSIGN_TOKEN")), &mcp.StdioTransport{})
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "configuration file (YAML) with an mcp section")
	cmd.Flags().StringVar(&f.store, "store", "", "store: sqlite:<path> or postgres://… (default: the file's)")
	// Read from the environment when the command runs: --help never prints a secret.
	cmd.Flags().StringVar(&token, "token", "", "API key or JWT of the caller (default: the environment variable COUNTERSIGN_TOKEN)")
	return cmd
}

// serveMCP serves the gateway over t as token's identity until the client
// closes the connection or ctx ends.
func serveMCP(ctx context.Context, f *setupFlags, token string, t mcp.Transport) error {
	f.role = "mcp"
	rt, err := build(ctx, f, nil)
	if err != nil {
		return err
	}
	defer rt.close()
	authn, err := rt.authenticator()
	if err != nil {
		return err
	}
	cred, err := auth.AuthenticateCredential(ctx, authn, token)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return &exitErr{exitUnauth, "unauthenticated: the token was refused; check --token or COUNTERSIGN_TOKEN"}
	case err != nil:
		return fmt.Errorf("authenticate: %w", err)
	}
	// No worker runs here: a task's approval would wait for another
	// process's, so the stdio gateway offers no tasks.
	gw, err := rt.gateway(authn, false)
	if err != nil {
		return err
	}
	if gw == nil {
		return &exitErr{exitUsage, f.config + ": the mcp section names no servers"}
	}
	gctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gw.Run(gctx) })
	defer func() {
		stop()
		wg.Wait()
	}()
	wctx, cancel := context.WithTimeout(ctx, mcpConnectWait)
	_ = gw.WaitConnected(wctx)
	cancel()
	for _, d := range gw.Down() {
		rt.log.Warn("mcp upstream not connected yet", "upstream", d.Name, "err", d.Reason)
	}
	return gw.ServeCredential(ctx, t, token, cred)
}
