// Package redact keeps the secrets a URL can carry out of text that leaves
// the process: errors stored as a notification's last_error or a proposal's
// outcome, log lines, API answers.
//
// A receiver's or a backend's URL may hold a token in its query string
// (https://hooks.example/in?token=…), in its userinfo (https://key@host/) or
// in its fragment, and net/http repeats the whole URL in every transport
// error (*url.Error). URLs finds every URL in a text (anything after a
// scheme's "://") and replaces its userinfo, each query value and its
// fragment with Mask, keeping the scheme, the host, the path and the query's
// keys, so an operator can still tell which endpoint failed. It reads URLs
// as they appear raw, quoted with %q or strconv.Quote, and inside JSON
// strings; where it cannot tell where a URL ends, it redacts more, never
// less.
//
// What URLs finds depends on a URL being written in RFC 3986's characters:
// a space in a query would end the URL early for any reader of the text.
// CheckURL refuses every other character, and the configuration, the
// webhook package and the notifications package check their URLs with it,
// so that every URL they hold is one URLs redacts whole.
package redact
