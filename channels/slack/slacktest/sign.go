package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	slackapi "github.com/slack-go/slack"
)

// Sign returns the headers Slack signs an interaction request with: the
// v0 HMAC-SHA256 of the timestamp ts and body under the app's signing
// secret.
func Sign(body string, ts time.Time, secret []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// Payload is a block_actions payload as Slack sends it when user (a Slack
// member id) of workspace team clicks button in a message of app, with
// responseURL for the ephemeral reply; it is built with slack-go's own
// types. Post it with FormBody and Sign.
func Payload(team, app, user, responseURL string, button Element) []byte {
	cb := slackapi.InteractionCallback{
		Type: slackapi.InteractionTypeBlockActions, Team: slackapi.Team{ID: team}, User: slackapi.User{ID: user},
		APIAppID: app, ResponseURL: responseURL,
		ActionCallback: slackapi.ActionCallbacks{BlockActions: []*slackapi.BlockAction{{
			ActionID: button.ActionID, BlockID: "countersign_actions", Type: "button", Value: button.Value,
			ActionTs: strconv.FormatInt(time.Now().Unix(), 10) + ".000100",
		}}},
	}
	b, err := json.Marshal(&cb)
	if err != nil {
		// An InteractionCallback of strings always marshals.
		panic(fmt.Sprintf("slacktest: marshal payload: %v", err))
	}
	return b
}
