package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/webhook"
)

// A backend written in Go checks each request's signature before anything
// else, against the raw body.
func ExampleVerify() {
	secret := []byte("the value of COUNTERSIGN_WEBHOOK_SECRET")
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"reason":"body too large"}`, http.StatusRequestEntityTooLarge)
			return
		}
		if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), 0); err != nil {
			http.Error(w, `{"reason":"bad signature"}`, http.StatusUnauthorized)
			return
		}
		// … decode the body, apply the operation at most once …
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"receipt":"rf_123","result":{"refunded":40}}`)
	}
	_ = handler

	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"operation_id":"op_1"}`)
	header := webhook.Sign(secret, at, body)
	fmt.Println(webhook.Verify(secret, header, body, at.Add(time.Minute), 0))
	fmt.Println(webhook.Verify(secret, header, []byte(`{"operation_id":"op_2"}`), at, 0) != nil)
	// Output:
	// <nil>
	// true
}

func ExampleNewAction() {
	refund, err := webhook.NewAction(webhook.Spec{
		Name:         "payments.refund",
		Version:      "1",
		Kind:         "write",
		Description:  "Refund a payment",
		InputSchema:  []byte(`{"type":"object","required":["amount","customer"],"properties":{"amount":{"type":"number"},"customer":{"type":"string"}}}`),
		Confirmation: countersign.Confirmation{Title: "Refund {amount} to {customer}", Verb: "Refund"},
		Prepare:      &webhook.Endpoint{URL: "http://127.0.0.1:9100/prepare", Timeout: 5 * time.Second},
		Execute:      &webhook.Endpoint{URL: "http://127.0.0.1:9100/execute"},
		Reconcile:    &webhook.Endpoint{URL: "http://127.0.0.1:9100/reconcile", Timeout: 5 * time.Second},
	}, webhook.Options{Secret: []byte("the value of COUNTERSIGN_WEBHOOK_SECRET")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(refund.Name(), refund.Version(), refund.Kind())
	// Output: payments.refund 1 write
}
