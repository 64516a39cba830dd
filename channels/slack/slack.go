package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/notifications"
)

// Defaults of Options.
const (
	// DefaultAPIURL is Slack's Web API.
	DefaultAPIURL = slackapi.APIURL
	// DefaultPostLease bounds how long a delivery holds the post of one
	// message before another delivery may make it (with a new nonce).
	DefaultPostLease = time.Minute
	// DefaultTimeout bounds one Slack API request.
	DefaultTimeout = 10 * time.Second
	// MaxClockSkew is how far a request's timestamp may be from the clock
	// (Slack's own rule): older or newer requests are refused with 401.
	MaxClockSkew = 5 * time.Minute
	// maxBody bounds an interaction request's body. Slack's payloads for
	// a button click are a few kilobytes.
	maxBody = 256 << 10
)

// PostDM is Options.Post's value for a direct message to each approver.
const PostDM = "dm"

// User is one mapped Slack user: the actor a click of theirs decides as,
// with that actor's roles.
type User struct {
	SlackID string
	Roles   []string
}

// Options configures the channel. Zero fields take the documented
// defaults; the required ones fail New with the field's name.
type Options struct {
	// Engine decides and keeps the announcements. Required.
	Engine *countersign.Engine
	// Tenant is the one tenant the channel belongs to. Required.
	Tenant string
	// TeamID is the Slack workspace (team.id) whose clicks count. Required.
	TeamID string
	// AppID, when set, is the Slack app (api_app_id) whose clicks count.
	AppID string
	// BotToken authenticates the Web API calls. Required.
	BotToken string
	// SigningSecret verifies the interactions. Required.
	SigningSecret []byte
	// APIURL is the Web API's base URL, ending in "/". Default
	// DefaultAPIURL; tests point it at a fake.
	APIURL string
	// Users maps actors to Slack users. Required, and no two actors may
	// share a Slack id.
	Users map[string]User
	// Post is PostDM, or a channel id (C…, G…) for one post per proposal
	// that shows no input and no buttons. Default PostDM.
	Post string
	// PublicURL is the server's URL as people reach it: the links to the
	// inbox's proposal pages. Required.
	PublicURL string
	// HTTPClient makes the Web API calls and the ephemeral replies.
	// Default: a client with DefaultTimeout.
	HTTPClient *http.Client
	// PostLease is DefaultPostLease unless set.
	PostLease time.Duration
	// MaxAttempts and Backoff are the outbox's for the channel's
	// deliveries; zero takes the notifications package's defaults.
	MaxAttempts int
	Backoff     notifications.Backoff
	// Now is the clock the request timestamps are judged by. Default
	// time.Now.
	Now func() time.Time
	// Logger receives what a click's reply could not say. Default
	// slog.Default().
	Logger *slog.Logger
}

// Slack is a configured channel. It is safe for concurrent use.
type Slack struct {
	engine    *countersign.Engine
	tenant    string
	teamID    string
	appID     string
	secret    []byte
	api       *slackapi.Client
	apiURL    *url.URL
	users     map[string]User   // by actor
	bySlackID map[string]string // Slack id → actor
	post      string
	publicURL string
	client    *http.Client
	lease     time.Duration
	attempts  int
	backoff   notifications.Backoff
	now       func() time.Time
	log       *slog.Logger
}

var (
	slackID   = regexp.MustCompile(`^[UW][A-Z0-9]{1,20}$`)
	channelID = regexp.MustCompile(`^[CGD][A-Z0-9]{1,20}$`)
)

// New validates opts and returns the channel.
func New(opts Options) (*Slack, error) {
	switch {
	case opts.Engine == nil:
		return nil, errors.New("slack: Options.Engine is required")
	case opts.Tenant == "":
		return nil, errors.New("slack: Options.Tenant is required")
	case opts.TeamID == "":
		return nil, errors.New("slack: Options.TeamID is required")
	case opts.BotToken == "":
		return nil, errors.New("slack: Options.BotToken is required")
	case len(opts.SigningSecret) == 0:
		return nil, errors.New("slack: Options.SigningSecret is required")
	case len(opts.Users) == 0:
		return nil, errors.New("slack: Options.Users is empty: map at least one actor to a Slack user")
	case opts.PostLease < 0:
		return nil, errors.New("slack: Options.PostLease is negative")
	}
	s := &Slack{
		engine: opts.Engine, tenant: opts.Tenant, teamID: opts.TeamID, appID: opts.AppID,
		secret: append([]byte(nil), opts.SigningSecret...), users: map[string]User{}, bySlackID: map[string]string{},
		post: cmp.Or(opts.Post, PostDM), lease: cmp.Or(opts.PostLease, DefaultPostLease),
		now: opts.Now, log: opts.Logger, client: opts.HTTPClient, attempts: opts.MaxAttempts, backoff: opts.Backoff,
	}
	if s.post != PostDM && !channelID.MatchString(s.post) {
		return nil, fmt.Errorf("slack: Options.Post %q: want %q or a channel id (C…)", s.post, PostDM)
	}
	for actor, u := range opts.Users {
		switch {
		case actor == "":
			return nil, errors.New("slack: Options.Users: an empty actor")
		case !slackID.MatchString(u.SlackID):
			return nil, fmt.Errorf("slack: Options.Users[%q].SlackID %q: want a Slack user id (U…)", actor, u.SlackID)
		}
		if other, dup := s.bySlackID[u.SlackID]; dup {
			return nil, fmt.Errorf("slack: Options.Users: %q and %q share the Slack id %s", other, actor, u.SlackID)
		}
		s.bySlackID[u.SlackID] = actor
		s.users[actor] = User{SlackID: u.SlackID, Roles: append([]string(nil), u.Roles...)}
	}
	pub, err := url.Parse(opts.PublicURL)
	if opts.PublicURL == "" || err != nil || (pub.Scheme != "http" && pub.Scheme != "https") || pub.Host == "" || pub.RawQuery != "" || pub.User != nil {
		return nil, fmt.Errorf("slack: Options.PublicURL %q: want an http or https URL", opts.PublicURL)
	}
	s.publicURL = strings.TrimSuffix(pub.String(), "/")
	apiURL := cmp.Or(opts.APIURL, DefaultAPIURL)
	if s.apiURL, err = url.Parse(apiURL); err != nil || (s.apiURL.Scheme != "http" && s.apiURL.Scheme != "https") ||
		s.apiURL.Host == "" || !strings.HasSuffix(apiURL, "/") {
		return nil, fmt.Errorf("slack: Options.APIURL %q: want an http or https URL ending in /", apiURL)
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: DefaultTimeout}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.api = slackapi.New(opts.BotToken, slackapi.OptionAPIURL(apiURL), slackapi.OptionHTTPClient(s.client))
	return s, nil
}

// identity is who a mapped actor decides as: a person of the channel's
// tenant with the configured roles.
func (s *Slack) identity(actor string) countersign.Identity {
	return countersign.Identity{Tenant: s.tenant, Actor: actor, Kind: countersign.KindHuman,
		Roles: append([]string(nil), s.users[actor].Roles...)}
}

// proposalURL is a proposal's page in the inbox, under the public URL.
func (s *Slack) proposalURL(id string) string {
	return s.publicURL + "/proposals/" + url.PathEscape(id)
}

// Channel is the channel as the notification outbox runs it
// (notifications.Options.Channels): named "slack", it receives Events and
// brings the proposal's messages up to date at each (Deliver).
func (s *Slack) Channel() notifications.Channel {
	return notifications.Channel{Name: "slack", Events: Events, MaxAttempts: s.attempts, Backoff: s.backoff,
		Deliver: func(ctx context.Context, d notifications.Delivery) error { return s.Deliver(ctx, d.Proposal) }}
}
