package config

import (
	"cmp"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of the approver channels (docs/api.md Part 3, "Slack approvals"
// and "Email approvals").
const (
	DefaultSlackAPIURL = "https://slack.com/api/" // channels.slack.api_url
	DefaultSlackPost   = SlackPostDM              // channels.slack.post
	DefaultSMTPPort    = 587                      // channels.email.smtp.port
	DefaultSMTPTLS     = SMTPStartTLS             // channels.email.smtp.tls
	DefaultLinkTTL     = 72 * time.Hour           // channels.email.link_ttl
	// MaxLinkTTL bounds link_ttl: a link lives at most as long as its
	// proposal anyway, and a month-old mail should not still decide.
	MaxLinkTTL = 30 * 24 * time.Hour
)

// SlackPostDM is channels.slack.post's value for a direct message to each
// approver; any other value is the id of the Slack channel to post in.
const SlackPostDM = "dm"

// The channels.email.smtp.tls values.
const (
	SMTPNone     = "none"
	SMTPStartTLS = "starttls"
	SMTPTLS      = "tls"
)

// Channels are the approver channels: where proposals are announced to
// their approvers, who decide from there. Each belongs to one tenant and
// names its actors explicitly; a nil channel is not configured (its routes
// answer 404).
type Channels struct {
	Slack *SlackChannel
	Email *EmailChannel
}

// ChannelActor is one actor a channel may announce to, and as whom its
// clicks and links decide: {tenant, actor, kind: human, roles}.
type ChannelActor struct {
	// Actor is the actor id (the key under users or addresses).
	Actor string
	// SlackID is the Slack user id (U…, W…); Email the address. One of
	// them, by channel.
	SlackID string
	Email   string
	Roles   []string
}

// SlackChannel is channels.slack.
type SlackChannel struct {
	// Tenant is the tenant every click decides in. Required.
	Tenant string
	// TeamID is the Slack workspace (T…); an interaction from another is
	// refused. Required.
	TeamID string
	// AppID, when set, is the Slack app (A…) whose interactions are
	// accepted (the payload's api_app_id).
	AppID string
	// BotTokenEnv and SigningSecretEnv name the variables holding the
	// bot's token (xoxb-…) and the app's signing secret. Required.
	BotTokenEnv      string
	SigningSecretEnv string
	// APIURL is Slack's Web API base. Default DefaultSlackAPIURL; tests
	// point it at a local fake.
	APIURL string
	// Users are the mapped actors, in the file's order of keys.
	Users []ChannelActor
	// Post is "dm" (each approver gets a direct message with the input and
	// buttons) or a channel id (one post without the input).
	Post string
}

// SMTP is how an email channel sends.
type SMTP struct {
	Host string
	// Port default DefaultSMTPPort.
	Port int
	// UsernameEnv and PasswordEnv name the variables holding the
	// credentials; both empty for a server that takes none.
	UsernameEnv, PasswordEnv string
	// TLS is none, starttls or tls. Default DefaultSMTPTLS.
	TLS string
}

// EmailChannel is channels.email.
type EmailChannel struct {
	// Tenant is the tenant every link decides in. Required.
	Tenant string
	SMTP   SMTP
	// From is the sender's address. Required.
	From string
	// Addresses are the mapped actors, in the file's order of keys.
	Addresses []ChannelActor
	// LinkTTL bounds a link's life (and the proposal's expiry does too).
	// Default DefaultLinkTTL.
	LinkTTL time.Duration
}

// Actor returns the mapped actor with Slack id id, or false.
func (s *SlackChannel) Actor(id string) (ChannelActor, bool) {
	i := slices.IndexFunc(s.Users, func(a ChannelActor) bool { return a.SlackID == id })
	if i < 0 {
		return ChannelActor{}, false
	}
	return s.Users[i], true
}

// Actor returns the mapped actor of address addr (compared without case),
// or false.
func (e *EmailChannel) Actor(addr string) (ChannelActor, bool) {
	i := slices.IndexFunc(e.Addresses, func(a ChannelActor) bool { return strings.EqualFold(a.Email, addr) })
	if i < 0 {
		return ChannelActor{}, false
	}
	return e.Addresses[i], true
}

func (d *decoder) channels(c *Config, path string, n *yaml.Node) {
	d.mapping(path, n, []key{
		{"slack", func(p string, v *yaml.Node) {
			s := &SlackChannel{APIURL: DefaultSlackAPIURL, Post: DefaultSlackPost}
			d.mapping(p, v, []key{
				{"tenant", text(d, &s.Tenant)},
				{"team_id", text(d, &s.TeamID)},
				{"app_id", text(d, &s.AppID)},
				{"bot_token_env", text(d, &s.BotTokenEnv)},
				{"signing_secret_env", text(d, &s.SigningSecretEnv)},
				{"api_url", text(d, &s.APIURL)},
				{"users", d.channelActors(&s.Users, "slack_id")},
				{"post", text(d, &s.Post)},
			})
			c.Channels.Slack = s
		}},
		{"email", func(p string, v *yaml.Node) {
			e := &EmailChannel{SMTP: SMTP{Port: DefaultSMTPPort, TLS: DefaultSMTPTLS}, LinkTTL: DefaultLinkTTL}
			d.mapping(p, v, []key{
				{"tenant", text(d, &e.Tenant)},
				{"smtp", func(p string, v *yaml.Node) {
					d.mapping(p, v, []key{
						{"host", text(d, &e.SMTP.Host)},
						{"port", d.integer(&e.SMTP.Port)},
						{"username_env", text(d, &e.SMTP.UsernameEnv)},
						{"password_env", text(d, &e.SMTP.PasswordEnv)},
						{"tls", text(d, &e.SMTP.TLS)},
					})
				}},
				{"from", text(d, &e.From)},
				{"addresses", d.channelActors(&e.Addresses, "email")},
				{"link_ttl", d.duration(&e.LinkTTL)},
			})
			c.Channels.Email = e
		}},
	})
}

// channelActors decodes {actor: {<idKey>: …, roles: […]}, …}.
func (d *decoder) channelActors(out *[]ChannelActor, idKey string) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			d.fail(path, n, "want a mapping of actor ids to {%s, roles}, not %s", idKey, describe(n))
			return
		}
		list := []ChannelActor{}
		for _, p := range d.pairs(path, n, 0) {
			sub := child(path, p.k.Value)
			d.lines[sub] = p.k.Line
			a := ChannelActor{Actor: p.k.Value}
			id := &a.SlackID
			if idKey == "email" {
				id = &a.Email
			}
			d.mapping(sub, resolve(p.v), []key{
				{idKey, text(d, id)},
				{"roles", texts(d, &a.Roles)},
			})
			list = append(list, a)
		}
		*out = list
	}
}

var (
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,31}$`)
	slackTeamID    = regexp.MustCompile(`^[TE][A-Z0-9]{2,31}$`)
	slackAppID     = regexp.MustCompile(`^A[A-Z0-9]{2,31}$`)
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,31}$`)
)

// channels checks public_url, channels and the rules' notify and step_up
// against them.
func (v *validator) channels(c *Config) {
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		switch {
		case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.fail("public_url", "want an absolute http:// or https:// URL, such as https://countersign.acme.example")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			v.fail("public_url", "want a URL without credentials, a query or a #fragment: links are built under it")
		}
	}
	configured := map[string]bool{"slack": c.Channels.Slack != nil, "email": c.Channels.Email != nil}
	if (configured["slack"] || configured["email"]) && c.PublicURL == "" {
		v.fail("public_url", "is required with channels: buttons and links point at it (never at a request's Host)")
	}
	if s := c.Channels.Slack; s != nil {
		p := "channels.slack"
		v.channelTenant(p, s.Tenant)
		switch {
		case s.TeamID == "":
			v.fail(p+".team_id", "is required: interactions from another workspace are refused")
		case !slackTeamID.MatchString(s.TeamID):
			v.fail(p+".team_id", "%q: want a Slack team id such as T0ACME", s.TeamID)
		}
		if s.AppID != "" && !slackAppID.MatchString(s.AppID) {
			v.fail(p+".app_id", "%q: want a Slack app id such as A0APPROVE", s.AppID)
		}
		v.channelEnv(p+".bot_token_env", s.BotTokenEnv, true, "SLACK_BOT_TOKEN")
		v.channelEnv(p+".signing_secret_env", s.SigningSecretEnv, true, "SLACK_SIGNING_SECRET")
		if u, err := url.Parse(s.APIURL); err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			v.fail(p+".api_url", "want an absolute http:// or https:// URL without credentials, such as %s", DefaultSlackAPIURL)
		}
		if s.Post != SlackPostDM && !slackChannelID.MatchString(s.Post) {
			v.fail(p+".post", "%q: want dm or a Slack channel id such as C0APPROVALS", s.Post)
		}
		v.channelActors(p+".users", s.Users, "slack_id", func(a ChannelActor) string { return a.SlackID },
			func(id string) bool { return slackUserID.MatchString(id) }, "a Slack user id such as U0BOB")
	}
	if e := c.Channels.Email; e != nil {
		p := "channels.email"
		v.channelTenant(p, e.Tenant)
		if e.SMTP.Host == "" || !isToken(e.SMTP.Host) {
			v.fail(p+".smtp.host", "is required: the SMTP server's host name or address")
		}
		if e.SMTP.Port < 1 || e.SMTP.Port > 65535 {
			v.fail(p+".smtp.port", "%d: want a port between 1 and 65535", e.SMTP.Port)
		}
		if !slices.Contains([]string{SMTPNone, SMTPStartTLS, SMTPTLS}, e.SMTP.TLS) {
			v.fail(p+".smtp.tls", "%q: want none, starttls or tls", e.SMTP.TLS)
		}
		v.channelEnv(p+".smtp.username_env", e.SMTP.UsernameEnv, false, "SMTP_USER")
		v.channelEnv(p+".smtp.password_env", e.SMTP.PasswordEnv, false, "SMTP_PASS")
		if (e.SMTP.UsernameEnv == "") != (e.SMTP.PasswordEnv == "") {
			v.fail(p+".smtp", "username_env and password_env go together: name both, or neither for a server that takes no credentials")
		}
		if a, err := mail.ParseAddress(e.From); err != nil || a.Name != "" {
			v.fail(p+".from", "%q: want one plain address, such as approvals@acme.example", e.From)
		}
		if e.LinkTTL <= 0 || e.LinkTTL > MaxLinkTTL {
			v.fail(p+".link_ttl", "%v: want a positive duration up to %v", e.LinkTTL, MaxLinkTTL)
		}
		v.channelActors(p+".addresses", e.Addresses, "email", func(a ChannelActor) string { return strings.ToLower(a.Email) },
			func(id string) bool {
				a, err := mail.ParseAddress(id)
				return err == nil && a.Name == "" && a.Address == id
			},
			"a plain address such as bob@acme.example")
	}
	for i, r := range c.PolicySpec.Rules {
		switch {
		case r.StepUp != "" && c.PublicURL == "":
			v.fail(item("policy.rules", i)+".step_up", "needs public_url: a passkey is bound to the origin people reach the inbox at, and every refusal links to it")
		case r.StepUp != "" && publicHostIsIP(c.PublicURL):
			v.fail(item("policy.rules", i)+".step_up", "needs a public_url whose host is a domain name (localhost works for development): WebAuthn binds a passkey to a domain, never to an IP address")
		}
		for j, n := range r.Notify {
			if (n == "slack" || n == "email") && !configured[n] {
				v.fail(item(item("policy.rules", i)+".notify", j), "%q: channels.%s is not configured, so nothing could be announced there", n, n)
			}
		}
	}
}

// publicHostIsIP reports whether the public URL's host is an IP address.
func publicHostIsIP(publicURL string) bool {
	u, err := url.Parse(publicURL)
	if err != nil {
		return false
	}
	_, err = netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
	return err == nil
}

func (v *validator) channelTenant(p, tenant string) {
	if tenant == "" || !isToken(tenant) {
		v.fail(p+".tenant", "is required: the tenant its approvers decide in (a channel serves one tenant)")
	}
}

// channelEnv checks the name of a channel's secret variable; like
// apiKeyEnv, its errors never repeat a value that looks like the secret.
func (v *validator) channelEnv(path, name string, required bool, example string) {
	switch {
	case name == "" && required:
		v.fail(path, "is required: the environment variable that holds it, such as %s", example)
	case name == "":
	case looksLikeKey(name) || strings.HasPrefix(name, "xox"):
		v.fail(path, "looks like a secret, not the name of an environment variable: put it in the environment and name the variable here (and revoke it if this file was shared)")
	case !envName.MatchString(name):
		v.fail(path, "want an environment variable name (letters, digits and _), such as %s", example)
	}
}

// channelActors checks a channel's actors: each with a valid id, roles
// that are tokens, and no id shared by two actors (a click or a link must
// name one person).
func (v *validator) channelActors(p string, actors []ChannelActor, idKey string, id func(ChannelActor) string, valid func(string) bool, want string) {
	if len(actors) == 0 {
		v.fail(p, "name at least one actor: nobody could be announced to")
	}
	first := map[string]string{}
	for _, a := range actors {
		ap := child(p, a.Actor)
		if !isToken(a.Actor) {
			v.fail(ap, "%q: an actor id has no spaces or control characters", a.Actor)
		}
		raw := cmp.Or(a.SlackID, a.Email)
		switch k := id(a); {
		case raw == "":
			v.fail(ap+"."+idKey, "is required")
		case !valid(raw):
			v.fail(ap+"."+idKey, "%q: want %s", raw, want)
		case first[k] != "":
			v.fail(ap+"."+idKey, "%q is also %s's (line %d): a click or a link must name one actor", raw, first[k], v.line(child(p, first[k])))
		default:
			first[k] = a.Actor
		}
		for j, r := range a.Roles {
			if !isToken(r) {
				v.fail(item(ap+".roles", j), "%q: a role has no spaces or control characters", r)
			}
		}
	}
}
