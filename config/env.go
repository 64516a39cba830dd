package config

import (
	"fmt"
	"os"
)

// The environment variables that override a file's deployment settings.
const (
	EnvListen = "COUNTERSIGN_LISTEN" // overrides listen
	EnvStore  = "COUNTERSIGN_STORE"  // overrides store
)

// ApplyEnv overrides listen and store with COUNTERSIGN_LISTEN and
// COUNTERSIGN_STORE when they are set and not empty. Load calls it; call it
// yourself after Default or Parse. Secrets are not overrides: they are read
// when asked for, from the variables the file names (WebhookSecret,
// HS256Secret).
func (c *Config) ApplyEnv() error {
	var errs []*Error
	for _, o := range []struct {
		name string
		set  func(string) error
	}{{EnvListen, c.SetListen}, {EnvStore, c.SetStore}} {
		if v := os.Getenv(o.name); v != "" {
			if err := o.set(v); err != nil {
				errs = append(errs, &Error{Reason: "environment variable " + o.name + ": " + err.(*Error).Reason})
			}
		}
	}
	return join(errs)
}

// SetListen validates addr and makes it the listen address, as a command
// line flag does.
func (c *Config) SetListen(addr string) error {
	if err := checkListen(addr); err != nil {
		return &Error{Reason: fmt.Sprintf("listen: %v", err)}
	}
	c.Listen = addr
	c.forget("listen")
	return nil
}

// SetStore validates store (see ParseStore) and makes it the store, as a
// command line flag does.
func (c *Config) SetStore(store string) error {
	if _, _, err := ParseStore(store); err != nil {
		return &Error{Reason: fmt.Sprintf("store: %v", err)}
	}
	c.Store = store
	c.forget("store")
	return nil
}

// forget drops a field's line: its value no longer comes from the file.
func (c *Config) forget(path string) {
	if c.lines != nil {
		c.lines[path] = 0 // 0: no line
	}
}
