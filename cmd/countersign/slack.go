package main

import (
	"fmt"
	"os"

	"github.com/countersign/countersign/channels/slack"
)

// slackChannel builds the Slack approver channel from channels.slack, or
// returns nil when it is not configured (its route is then not mounted and
// answers the API's 404).
func (rt *runtime) slackChannel() (*slack.Slack, error) {
	c := rt.cfg.Channels.Slack
	if c == nil {
		return nil, nil
	}
	token, secret := os.Getenv(c.BotTokenEnv), os.Getenv(c.SigningSecretEnv)
	switch {
	case token == "":
		return nil, &exitErr{exitUsage, fmt.Sprintf("channels.slack.bot_token_env: %s is not set", c.BotTokenEnv)}
	case secret == "":
		return nil, &exitErr{exitUsage, fmt.Sprintf("channels.slack.signing_secret_env: %s is not set", c.SigningSecretEnv)}
	}
	users := make(map[string]slack.User, len(c.Users))
	for _, u := range c.Users {
		users[u.Actor] = slack.User{SlackID: u.SlackID, Roles: u.Roles}
	}
	s, err := slack.New(slack.Options{Engine: rt.engine, Tenant: c.Tenant, TeamID: c.TeamID, AppID: c.AppID,
		BotToken: token, SigningSecret: []byte(secret), APIURL: c.APIURL, Users: users, Post: c.Post,
		PublicURL: rt.cfg.PublicURL, Logger: rt.log})
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	return s, nil
}
