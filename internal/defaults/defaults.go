// Package defaults holds the defaults that the configuration file states
// and the packages that apply them share: the PostgreSQL store's pool, the
// MCP gateway's hold and the notification deliverer's retries. It imports
// nothing, so that package config can name them without importing a store
// driver, the gateway or the deliverer, while those packages define their
// exported defaults from these, and the two cannot drift apart.
package defaults

import "time"

// PostgresMaxConns is pgstore.DefaultMaxConns (postgres.max_conns).
const PostgresMaxConns = 16

// MCPHold is mcpgateway.DefaultHold (mcp.hold).
const MCPHold = 50 * time.Second

// The notification deliverer's defaults (notifications[].timeout,
// max_attempts, backoff.initial and backoff.max).
const (
	NotificationTimeout        = 5 * time.Second
	NotificationMaxAttempts    = 10
	NotificationBackoffInitial = time.Second
	NotificationBackoffMax     = 10 * time.Minute
)
