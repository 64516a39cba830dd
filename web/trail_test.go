package web_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestProposalTrail: the proposal page lists the proposal's events, first
// unsealed, then each at its place in the audit chain, verified from the
// chain's start; the requester sees it as the approver does.
func TestProposalTrail(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.propose("t_trail", "c_trail", 7)
	bob := h.client()
	bob.signIn("key_bob")
	_, body := bob.get("/proposals/" + id)
	if !strings.Contains(body, `id="trail"`) || !strings.Contains(body, "proposal.created") {
		t.Fatalf("the proposal page has no audit trail with the creation:\n%s", body)
	}
	rows := regexp.MustCompile(`<tr class="trail-(\w+)"><td>(seq \d+|—)</td>`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body = bob.get("/proposals/" + id)
		got := rows.FindAllStringSubmatch(body, -1)
		if len(got) == 0 {
			t.Fatalf("no trail rows:\n%s", body)
		}
		sealed := true
		for _, r := range got {
			switch {
			case r[1] == "unsealed" && r[2] == "—":
				sealed = false
			case r[1] != "ok" || !strings.HasPrefix(r[2], "seq "):
				t.Fatalf("trail row %q: want unsealed without a seq, or ok with one", r[0])
			}
		}
		if sealed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events were never sealed:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(body, "The audit chain verifies from its start through seq ") || !strings.Contains(body, `<td class="verdict">verifies</td>`) {
		t.Errorf("a sealed trail does not say it verifies:\n%s", body)
	}
	if !regexp.MustCompile(`<code title="[0-9a-f]{64}">[0-9a-f]{12}…</code>`).MatchString(body) {
		t.Errorf("no event hash shown:\n%s", body)
	}
	// The requester reads the same trail.
	alice := h.client()
	alice.signIn("key_alice")
	if _, body := alice.get("/proposals/" + id); !strings.Contains(body, "The audit chain verifies from its start") {
		t.Errorf("the requester's page:\n%s", body)
	}
}
