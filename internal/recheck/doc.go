// Package recheck ends open streams whose opener no longer stands, with one
// periodic check for all of them.
//
// docs/api.md (Part 3) asks every stream to end within a second of the
// credential that opened it being revoked. A check per stream costs a
// goroutine and a question per stream per period, however many streams
// share one credential or one session. A [Guard] holds the open streams by
// key (a token, a session): while it holds any, one goroutine calls its
// round every period with the keys it holds, once each, and the round ends
// the streams of a key that no longer stands ([Guard.End]). The goroutine
// ends as soon as the last stream is removed.
//
// The API's streams guard their bearer tokens with it (server,
// credentialguard.go), the inbox's its sessions (web, session.go).
package recheck
