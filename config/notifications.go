package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/redact"
	"go.yaml.in/yaml/v3"
)

// Defaults and bounds of a notifications entry.
const (
	// The notification deliverer's own defaults (notifications.DefaultTimeout,
	// …), read from internal/defaults, as the deliverer does.
	DefaultNotificationTimeout     = defaults.NotificationTimeout        // notifications[].timeout
	DefaultNotificationMaxAttempts = defaults.NotificationMaxAttempts    // notifications[].max_attempts
	DefaultNotificationBackoff     = defaults.NotificationBackoffInitial // notifications[].backoff.initial
	DefaultNotificationBackoffMax  = defaults.NotificationBackoffMax     // notifications[].backoff.max

	// MaxNotificationTimeout bounds one request: a worker slot is held
	// while it lasts.
	MaxNotificationTimeout = 5 * time.Minute
	// MaxNotificationAttempts bounds max_attempts.
	MaxNotificationAttempts = 1000
	// MaxNotificationBackoff bounds backoff.max.
	MaxNotificationBackoff = 24 * time.Hour
)

// NotificationEvents are the event types a receiver may be sent.
// proposal.escalated and proposal.reminder are the events of escalation
// and reminders (policy.rules[].escalate_after, remind_every).
var NotificationEvents = []string{
	"proposal.created", "proposal.decided", "proposal.settled", "proposal.expired",
	"proposal.superseded", "proposal.escalated", "proposal.reminder",
}

// Notification is one receiver of the notification outbox: each event of a
// type in Events is POSTed to URL as {"id", "type", "proposal", "at"},
// signed like the webhooks, with Idempotency-Key set to the notification's
// id, at least once.
type Notification struct {
	// URL receives the notifications: http:// or https://, unique in the file.
	URL string
	// Events are the event types it is sent, at least one.
	Events []string
	// SecretEnv names the environment variable whose raw value signs the
	// requests (Countersign-Signature). Required, and no other field may
	// name the same variable or hold the same value: a receiver holding
	// the webhook secret could sign execute requests every backend accepts
	// (see Config.CheckSecrets). See Config.NotificationSecret.
	SecretEnv string
	// Timeout bounds one request. Default DefaultNotificationTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts before a notification is failed.
	// Default DefaultNotificationMaxAttempts.
	MaxAttempts int
	// BackoffInitial is the delay after the first failed attempt; it
	// doubles after each, up to BackoffMax.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
}

func (d *decoder) notifications(c *Config, path string, n *yaml.Node) {
	c.Notifications = []Notification{}
	d.sequence(path, n, func(p string, v *yaml.Node) {
		nt := Notification{
			Timeout: DefaultNotificationTimeout, MaxAttempts: DefaultNotificationMaxAttempts,
			BackoffInitial: DefaultNotificationBackoff, BackoffMax: DefaultNotificationBackoffMax,
		}
		d.mapping(p, v, []key{
			{"url", text(d, &nt.URL)},
			{"events", texts(d, &nt.Events)},
			{"secret_env", text(d, &nt.SecretEnv)},
			{"timeout", d.duration(&nt.Timeout)},
			{"max_attempts", d.integer(&nt.MaxAttempts)},
			{"backoff", func(p string, v *yaml.Node) {
				d.mapping(p, v, []key{
					{"initial", d.duration(&nt.BackoffInitial)},
					{"max", d.duration(&nt.BackoffMax)},
				})
			}},
		})
		c.Notifications = append(c.Notifications, nt)
	})
}

func (v *validator) notifications(c *Config) {
	first := map[string]string{}
	for i := range c.Notifications {
		p := item("notifications", i)
		n := &c.Notifications[i]
		u, err := url.Parse(n.URL)
		switch {
		case n.URL == "":
			v.fail(p+".url", "is required")
		case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "":
			v.fail(p+".url", "want an absolute http:// or https:// URL without a #fragment")
		case u.User != nil:
			v.fail(p+".url", "must not hold credentials: requests are signed with secret_env's secret")
		default:
			if err := redact.CheckURL(n.URL); err != nil {
				v.fail(p+".url", "%v", err)
			} else if f, dup := first[n.URL]; dup {
				// Shown redacted: a query may hold the receiver's token.
				v.fail(p+".url", "%q is already the url of %s (line %d)", redact.URL(n.URL), f, v.line(f+".url"))
			} else {
				first[n.URL] = p
			}
		}
		if len(n.Events) == 0 {
			v.fail(p+".events", "name at least one of %s", strings.Join(NotificationEvents, ", "))
		}
		for j, e := range n.Events {
			switch {
			case !slices.Contains(NotificationEvents, e):
				v.fail(item(p+".events", j), "%q: want one of %s", e, strings.Join(NotificationEvents, ", "))
			case slices.Index(n.Events, e) < j:
				v.fail(item(p+".events", j), "%q is named twice", e)
			}
		}
		if n.SecretEnv == "" {
			v.fail(p+".secret_env", "is required: each receiver verifies its notifications with a secret of its own, which no backend holds")
		} else if err := checkEnvName(n.SecretEnv); err != nil {
			v.fail(p+".secret_env", "%v", err)
		}
		if n.Timeout > MaxNotificationTimeout {
			v.fail(p+".timeout", "%v: at most %v (a worker's slot is held while a request lasts)", n.Timeout, MaxNotificationTimeout)
		}
		if n.MaxAttempts < 1 || n.MaxAttempts > MaxNotificationAttempts {
			v.fail(p+".max_attempts", "%d: want 1..%d", n.MaxAttempts, MaxNotificationAttempts)
		}
		switch {
		case n.BackoffMax > MaxNotificationBackoff:
			v.fail(p+".backoff.max", "%v: at most %v", n.BackoffMax, MaxNotificationBackoff)
		case n.BackoffMax < n.BackoffInitial:
			v.fail(p+".backoff.max", "%v: must not be shorter than backoff.initial (%v)", n.BackoffMax, n.BackoffInitial)
		}
	}
}

// NotificationSecret returns the raw value of the environment variable
// that c.Notifications[i].SecretEnv names: the key of that receiver's
// signatures. It fails, wrapping ErrSecretUnset, when the field or the
// variable is empty; it never falls back to another secret.
func (c *Config) NotificationSecret(i int) ([]byte, error) {
	return secret(fmt.Sprintf("notifications[%d].secret_env", i), c.Notifications[i].SecretEnv)
}
