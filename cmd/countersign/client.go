package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/plaintext"
)

// Exit codes of the client commands (documented in the README and `--help`).
const (
	exitOK          = 0
	exitError       = 1 // any other failure
	exitUsage       = 2 // bad flags or arguments
	exitUnreachable = 3 // the server could not be reached
	exitUnauth      = 4 // 401: missing or bad token
	exitForbidden   = 5 // 403: the token's actor may not do this
	exitNotFound    = 6 // 404: no such proposal (or action)
	exitRefused     = 7 // the server answered, but the decision did not apply (conflict, expired, invalid state)
)

// exitError carries an exit code with its message.
type exitErr struct {
	code int
	msg  string
}

func (e *exitErr) Error() string { return e.msg }

func exitCode(err error) int {
	var e *exitErr
	if errors.As(err, &e) {
		return e.code
	}
	return exitError
}

// client talks to a countersign server.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newClient(server, token string) (*client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &exitErr{exitUsage, fmt.Sprintf("--server %q: want an http(s) URL such as http://127.0.0.1:8080", server)}
	}
	if token == "" {
		return nil, &exitErr{exitUsage, "no token: pass --token or set COUNTERSIGN_TOKEN (an API key or a JWT)"}
	}
	return &client{base: u, token: token, http: &http.Client{Timeout: 90 * time.Second}}, nil
}

// apiError is the server's error body.
type apiError struct {
	Status string `json:"status"`
	Error  struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

// do sends a request and decodes a 2xx JSON answer into out. Failures become
// exitErr with a helpful message.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body, out any) (http.Header, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Countersign-Via", "cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") {
			return nil, &exitErr{exitUnreachable, fmt.Sprintf("cannot reach the server at %s: %v\nIs `countersign serve` running? Set --server or COUNTERSIGN_URL.", c.base, err)}
		}
		return nil, &exitErr{exitUnreachable, fmt.Sprintf("cannot reach the server at %s: %v", c.base, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var ae apiError
		_ = json.Unmarshal(data, &ae)
		msg := ae.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(string(data))
		}
		// The message and the code are the server's text, printed to a terminal.
		msg, code := plaintext.Line(msg), plaintext.Line(ae.Error.Code)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return nil, &exitErr{exitUnauth, "unauthenticated (401): the token was refused; check --token or COUNTERSIGN_TOKEN"}
		case http.StatusForbidden:
			return nil, &exitErr{exitForbidden, "forbidden (403): " + msg}
		case http.StatusNotFound:
			return nil, &exitErr{exitNotFound, "not found (404): " + msg}
		case http.StatusConflict:
			return nil, &exitErr{exitRefused, "refused (409): " + msg}
		}
		return nil, &exitErr{exitError, fmt.Sprintf("%s (%d): %s", code, resp.StatusCode, msg)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("decode the server's answer: %s", plaintext.Line(err.Error()))
		}
	}
	return resp.Header, nil
}

// idSegment is id as one segment of a URL's path, or a not-found error for
// the ids no resource has that a path would not keep as a segment of its
// own: "." and "..", which path cleaning removes, naming another resource.
func idSegment(kind, id string) (string, error) {
	if id == "" || id == "." || id == ".." {
		return "", &exitErr{exitNotFound, fmt.Sprintf("not found: no %s %q", kind, id)}
	}
	return url.PathEscape(id), nil
}
