package config

import (
	"encoding/hex"
	"fmt"
)

// The credential kinds a key or a token may carry (docs/api.md Part 3,
// "Credentials: humans and agents").
const (
	kindHuman = "human"
	kindAgent = "agent"
)

// Warnings lists what the file leaves to a default that weakens the trust
// model without being an error: an API key without a kind, and JWTs without
// an explicit default_kind, are taken as a person's credentials. Each names
// the field, its line, the tenant and actor, and for a key the first 8 hex
// of its SHA-256, never the key. `serve` logs them and `config validate`
// prints them; neither refuses the file.
func (c *Config) Warnings() []string {
	var out []string
	for i, k := range c.Auth.APIKeys {
		if k.Kind != "" {
			continue
		}
		p := item("auth.api_keys", i)
		out = append(out, fmt.Sprintf("%s%s: no kind, so taken as human: tenant %s, actor %s, key sha256 %s…; "+
			"give an agent's key kind: agent, and a person's kind: human",
			p, c.at(p), k.Tenant, k.Actor, keyFingerprint(k)))
	}
	if j := c.Auth.JWT; j != nil && j.DefaultKind == "" {
		const p = "auth.jwt"
		out = append(out, fmt.Sprintf("%s%s: no default_kind, so a token without the %s claim is taken as human; "+
			"set default_kind: agent (or human) explicitly", p, c.at(p), j.Claims.Kind))
	}
	return out
}

// keyFingerprint is the first 8 hex digits of the SHA-256 of k's token: it
// tells an operator which key is meant without revealing it.
func keyFingerprint(k APIKey) string {
	d := k.Digest()
	return hex.EncodeToString(d[:4])
}

// at is " (line N)" for a field the file holds, or "".
func (c *Config) at(path string) string {
	if n, ok := c.lines[path]; ok && c.file != "" {
		return fmt.Sprintf(" (%s:%d)", c.file, n)
	} else if ok {
		return fmt.Sprintf(" (line %d)", n)
	}
	return ""
}
