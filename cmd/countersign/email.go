package main

import (
	"fmt"
	"os"

	"github.com/countersign/countersign/channels/email"
)

// emailChannel builds channels.email, or nil when it is not configured.
// The SMTP credentials are read from the variables the file names; a named
// variable that is empty fails the start, naming it.
func (rt *runtime) emailChannel() (*email.Channel, error) {
	e := rt.cfg.Channels.Email
	if e == nil {
		return nil, nil
	}
	smtp := email.SMTP{Host: e.SMTP.Host, Port: e.SMTP.Port, TLS: email.TLSMode(e.SMTP.TLS)}
	for _, v := range []struct {
		field, env string
		out        *string
	}{
		{"channels.email.smtp.username_env", e.SMTP.UsernameEnv, &smtp.Username},
		{"channels.email.smtp.password_env", e.SMTP.PasswordEnv, &smtp.Password},
	} {
		if v.env == "" {
			continue
		}
		if *v.out = os.Getenv(v.env); *v.out == "" {
			return nil, &exitErr{exitUsage, fmt.Sprintf("config: environment variable %s (named by %s) is empty or unset", v.env, v.field)}
		}
	}
	addrs := make(map[string]email.Address, len(e.Addresses))
	for _, a := range e.Addresses {
		addrs[a.Actor] = email.Address{Email: a.Email, Roles: a.Roles}
	}
	c, err := email.New(email.Options{
		Engine: rt.engine, PublicURL: rt.cfg.PublicURL, Tenant: e.Tenant, From: e.From, Addresses: addrs,
		SMTP: smtp, LinkTTL: e.LinkTTL, Logger: rt.log,
	})
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	return c, nil
}
