package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// callCounter counts the calls of every method of the store it wraps. It
// declares each method itself (TestCallCounterCountsEveryMethod checks),
// so that no call reaches the store uncounted.
type callCounter struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *callCounter) count(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[method]++
}

// take returns the counts since the last take and starts counting anew.
func (s *callCounter) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	if calls == nil {
		calls = map[string]int{}
	}
	return calls
}

// counting returns an opener of open's stores wrapped by c.
func counting(open storeOpener) (storeOpener, *callCounter) {
	c := &callCounter{}
	return func(t *testing.T, now func() time.Time) store.Store {
		c.Store = open(t, now)
		return c
	}, c
}

// The reads a call makes before it records anything are one LookupCall:
// never GetThread, GetProposalByToolCall or FindGrant. A new asked call
// makes one LookupCall and one CreateProposal; a replay one LookupCall and
// nothing else before it answers.
func TestCallReadsTheStoreOnceBeforeItRecords(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		open, c := counting(open)
		h := newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{grantRule()}})
		ctx := context.Background()
		require := func(what string, want map[string]int) {
			t.Helper()
			if got := c.take(); !maps.Equal(got, want) {
				t.Errorf("%s: store calls %v, want %v", what, got, want)
			}
		}

		res := h.call(refundCall("call_1", countersign.ModeTwoPhase, grantInput))
		if res.Status != countersign.ResultConfirmationRequired {
			t.Fatalf("new two-phase call = %+v, want confirmation required", res)
		}
		require("a new asked call", map[string]int{"LookupCall": 1, "CreateProposal": 1})
		h.call(refundCall("call_1", countersign.ModeTwoPhase, grantInput))
		require("its replay", map[string]int{"LookupCall": 1})
		h.call(refundCall("call_2", countersign.ModeIndependent, grantInput))
		require("a new independent call", map[string]int{"LookupCall": 1, "CreateProposal": 1})
		h.call(refundCall("call_2", countersign.ModeIndependent, grantInput))
		require("its replay", map[string]int{"LookupCall": 1})

		// Another actor's repeat, and his new call, in alice's thread.
		for _, tool := range []string{"call_1", "dave_1"} {
			foreign := refundCall(tool, countersign.ModeTwoPhase, grantInput)
			foreign.Identity = tDave
			var fe *countersign.ForbiddenError
			if res, err := h.engine.Call(ctx, foreign); !errors.As(err, &fe) {
				t.Fatalf("%s by another actor = %+v, %v; want *ForbiddenError", tool, res, err)
			}
			require("a call in another actor's thread", map[string]int{"LookupCall": 1})
		}
		// An input the schema refuses fails a new call after the lookup.
		var ie *countersign.InvalidInputError
		if res, err := h.engine.Call(ctx, refundCall("call_3", countersign.ModeTwoPhase, `{"amount":-1}`)); !errors.As(err, &ie) {
			t.Fatalf("invalid input = %+v, %v; want *InvalidInputError", res, err)
		}
		require("a new call with an invalid input", map[string]int{"LookupCall": 1})

		// With a live grant, the lookup finds it: no FindGrant.
		h.remember("call_4")
		c.take()
		res = h.call(refundCall("call_5", countersign.ModeWait, grantInput))
		if res.Status != countersign.ResultSucceeded || res.GrantID == "" {
			t.Fatalf("a call the grant approves = %+v, want succeeded by the grant", res)
		}
		calls := c.take()
		if calls["LookupCall"] != 1 || calls["CreateProposal"] != 1 {
			t.Errorf("a call a grant approves: store calls %v, want one LookupCall and one CreateProposal", calls)
		}
		for _, m := range []string{"GetThread", "GetProposalByToolCall", "FindGrant", "EnsureThread"} {
			if calls[m] != 0 {
				t.Errorf("a call a grant approves: store calls %v, want no %s", calls, m)
			}
		}
	})
}

// A read the policy allows makes one LookupCall, and in a thread that does
// not exist yet creates it after the lookup.
func TestAllowedReadLooksUpOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		open, c := counting(open)
		h := ownerHarness(t, open, &reads)
		look := &countersign.Call{Identity: tAlice, ThreadID: "t-new", ToolCallID: "look_1", Action: "crm.lookup", Input: json.RawMessage(`{}`)}
		c.take()
		h.call(look)
		if got, want := c.take(), map[string]int{"LookupCall": 1, "EnsureThread": 1}; !maps.Equal(got, want) {
			t.Errorf("a read in a new thread: store calls %v, want %v", got, want)
		}
		look.ToolCallID = "look_2"
		h.call(look)
		if got, want := c.take(), map[string]int{"LookupCall": 1}; !maps.Equal(got, want) {
			t.Errorf("a read in its thread: store calls %v, want %v", got, want)
		}
		if n := reads.Load(); n != 2 {
			t.Errorf("the reads ran %d times, want 2", n)
		}
		th, err := h.store.GetThread(context.Background(), &store.GetThreadParams{Tenant: "acme", ID: "t-new"})
		if err != nil || th.Owner != tAlice.Actor {
			t.Errorf("thread t-new = %+v, %v; want it owned by alice", th, err)
		}
	})
}

// TestCallCounterCountsEveryMethod checks that callCounter declares every
// method of store.Store, rather than letting the embedded store answer one
// uncounted: a method promoted from the embedded field is a wrapper the
// compiler generated.
func TestCallCounterCountsEveryMethod(t *testing.T) {
	t.Parallel()
	counter := reflect.TypeFor[*callCounter]()
	iface := reflect.TypeFor[store.Store]()
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
		m, ok := counter.MethodByName(name)
		if !ok {
			t.Fatalf("callCounter has no method %s", name)
		}
		f := runtime.FuncForPC(m.Func.Pointer())
		if file, _ := f.FileLine(f.Entry()); file == "<autogenerated>" {
			t.Errorf("callCounter does not count %s: declare it", name)
		}
	}
}

func (s *callCounter) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	s.count("CreateProposal")
	return s.Store.CreateProposal(ctx, params)
}

func (s *callCounter) GetProposal(ctx context.Context, params *store.GetProposalParams) (*cstype.Proposal, error) {
	s.count("GetProposal")
	return s.Store.GetProposal(ctx, params)
}

func (s *callCounter) ProposalTenant(ctx context.Context, id string) (string, error) {
	s.count("ProposalTenant")
	return s.Store.ProposalTenant(ctx, id)
}

func (s *callCounter) GetProposalByToolCall(ctx context.Context, params *store.GetProposalByToolCallParams) (*cstype.Proposal, error) {
	s.count("GetProposalByToolCall")
	return s.Store.GetProposalByToolCall(ctx, params)
}

func (s *callCounter) LookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	s.count("LookupCall")
	return s.Store.LookupCall(ctx, params)
}

func (s *callCounter) GetProposalByConfirmation(ctx context.Context, params *store.GetProposalByConfirmationParams) (*cstype.Proposal, error) {
	s.count("GetProposalByConfirmation")
	return s.Store.GetProposalByConfirmation(ctx, params)
}

func (s *callCounter) ListProposals(ctx context.Context, params *store.ListProposalsParams) (*cstype.ProposalPage, error) {
	s.count("ListProposals")
	return s.Store.ListProposals(ctx, params)
}

func (s *callCounter) Decide(ctx context.Context, params *store.DecideParams) (*store.DecideResult, error) {
	s.count("Decide")
	return s.Store.Decide(ctx, params)
}

func (s *callCounter) Cancel(ctx context.Context, params *store.CancelParams) (*store.TransitionResult, error) {
	s.count("Cancel")
	return s.Store.Cancel(ctx, params)
}

func (s *callCounter) Expire(ctx context.Context, params *store.ExpireParams) (*store.TransitionResult, error) {
	s.count("Expire")
	return s.Store.Expire(ctx, params)
}

func (s *callCounter) ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	s.count("ExpireDue")
	return s.Store.ExpireDue(ctx, params)
}

func (s *callCounter) EscalateDue(ctx context.Context, params *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	s.count("EscalateDue")
	return s.Store.EscalateDue(ctx, params)
}

func (s *callCounter) RemindDue(ctx context.Context, params *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	s.count("RemindDue")
	return s.Store.RemindDue(ctx, params)
}

func (s *callCounter) Claim(ctx context.Context, params *store.ClaimParams) (*cstype.Proposal, error) {
	s.count("Claim")
	return s.Store.Claim(ctx, params)
}

func (s *callCounter) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	s.count("ClaimBatch")
	return s.Store.ClaimBatch(ctx, params)
}

func (s *callCounter) RenewLease(ctx context.Context, params *store.RenewLeaseParams) (*cstype.Lease, error) {
	s.count("RenewLease")
	return s.Store.RenewLease(ctx, params)
}

func (s *callCounter) BeginRetry(ctx context.Context, params *store.BeginRetryParams) (*cstype.Proposal, error) {
	s.count("BeginRetry")
	return s.Store.BeginRetry(ctx, params)
}

func (s *callCounter) Settle(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	s.count("Settle")
	return s.Store.Settle(ctx, params)
}

func (s *callCounter) SettleMany(ctx context.Context, params []*store.SettleParams) (results []*store.TransitionResult, errs []error, err error) {
	s.count("SettleMany")
	return s.Store.SettleMany(ctx, params)
}

func (s *callCounter) Resolve(ctx context.Context, params *store.ResolveParams) (*store.TransitionResult, error) {
	s.count("Resolve")
	return s.Store.Resolve(ctx, params)
}

func (s *callCounter) FindGrant(ctx context.Context, params *store.FindGrantParams) (*cstype.Grant, error) {
	s.count("FindGrant")
	return s.Store.FindGrant(ctx, params)
}

func (s *callCounter) ListGrants(ctx context.Context, params *store.ListGrantsParams) ([]*cstype.Grant, error) {
	s.count("ListGrants")
	return s.Store.ListGrants(ctx, params)
}

func (s *callCounter) RevokeGrant(ctx context.Context, params *store.RevokeGrantParams) (*cstype.Grant, error) {
	s.count("RevokeGrant")
	return s.Store.RevokeGrant(ctx, params)
}

func (s *callCounter) EnsureThread(ctx context.Context, params *store.EnsureThreadParams) (*cstype.Thread, error) {
	s.count("EnsureThread")
	return s.Store.EnsureThread(ctx, params)
}

func (s *callCounter) GetThread(ctx context.Context, params *store.GetThreadParams) (*cstype.Thread, error) {
	s.count("GetThread")
	return s.Store.GetThread(ctx, params)
}

func (s *callCounter) DeleteThread(ctx context.Context, params *store.GetThreadParams) error {
	s.count("DeleteThread")
	return s.Store.DeleteThread(ctx, params)
}

func (s *callCounter) ListMessages(ctx context.Context, params *store.ListMessagesParams) ([]*cstype.Message, error) {
	s.count("ListMessages")
	return s.Store.ListMessages(ctx, params)
}

func (s *callCounter) CountByStatus(ctx context.Context) (map[cstype.Status]int, error) {
	s.count("CountByStatus")
	return s.Store.CountByStatus(ctx)
}

func (s *callCounter) ListEvents(ctx context.Context, params *store.ListEventsParams) ([]*cstype.Event, error) {
	s.count("ListEvents")
	return s.Store.ListEvents(ctx, params)
}

func (s *callCounter) LastEventID(ctx context.Context, params *store.LastEventIDParams) (int64, error) {
	s.count("LastEventID")
	return s.Store.LastEventID(ctx, params)
}

func (s *callCounter) AcquireSealLease(ctx context.Context, params *store.AcquireSealLeaseParams) (*store.SealLease, error) {
	s.count("AcquireSealLease")
	return s.Store.AcquireSealLease(ctx, params)
}

func (s *callCounter) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	s.count("SealEvents")
	return s.Store.SealEvents(ctx, params)
}

func (s *callCounter) ReleaseSealLease(ctx context.Context, params *store.ReleaseSealLeaseParams) error {
	s.count("ReleaseSealLease")
	return s.Store.ReleaseSealLease(ctx, params)
}

func (s *callCounter) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*cstype.AuditEvent, error) {
	s.count("ListAudit")
	return s.Store.ListAudit(ctx, params)
}

func (s *callCounter) ListProposalAudit(ctx context.Context, params *store.ListProposalAuditParams) ([]*cstype.AuditEvent, error) {
	s.count("ListProposalAudit")
	return s.Store.ListProposalAudit(ctx, params)
}

func (s *callCounter) ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error) {
	s.count("ListChainHeads")
	return s.Store.ListChainHeads(ctx, params)
}

func (s *callCounter) WriteCheckpoints(ctx context.Context, params *store.WriteCheckpointsParams) (*store.SealLease, error) {
	s.count("WriteCheckpoints")
	return s.Store.WriteCheckpoints(ctx, params)
}

func (s *callCounter) ListCheckpoints(ctx context.Context, params *store.ListCheckpointsParams) ([]*cstype.Checkpoint, error) {
	s.count("ListCheckpoints")
	return s.Store.ListCheckpoints(ctx, params)
}

func (s *callCounter) Close() error {
	s.count("Close")
	return s.Store.Close()
}

func (s *callCounter) CreateSession(ctx context.Context, params *store.CreateSessionParams) error {
	s.count("CreateSession")
	return s.Store.CreateSession(ctx, params)
}

func (s *callCounter) GetSession(ctx context.Context, params *store.GetSessionParams) (*store.Session, error) {
	s.count("GetSession")
	return s.Store.GetSession(ctx, params)
}

func (s *callCounter) GetSessions(ctx context.Context, params *store.GetSessionsParams) ([]*store.Session, error) {
	s.count("GetSessions")
	return s.Store.GetSessions(ctx, params)
}

func (s *callCounter) DeleteSession(ctx context.Context, params *store.DeleteSessionParams) error {
	s.count("DeleteSession")
	return s.Store.DeleteSession(ctx, params)
}

func (s *callCounter) DeleteExpiredSessions(ctx context.Context, params *store.DeleteExpiredSessionsParams) (int, error) {
	s.count("DeleteExpiredSessions")
	return s.Store.DeleteExpiredSessions(ctx, params)
}

func (s *callCounter) IssueEmailLinks(ctx context.Context, params *store.IssueEmailLinksParams) (*store.IssueEmailLinksResult, error) {
	s.count("IssueEmailLinks")
	return s.Store.IssueEmailLinks(ctx, params)
}

func (s *callCounter) MarkEmailLinksSent(ctx context.Context, params *store.MarkEmailLinksSentParams) error {
	s.count("MarkEmailLinksSent")
	return s.Store.MarkEmailLinksSent(ctx, params)
}

func (s *callCounter) GetEmailLink(ctx context.Context, params *store.GetEmailLinkParams) (*store.EmailLink, error) {
	s.count("GetEmailLink")
	return s.Store.GetEmailLink(ctx, params)
}

func (s *callCounter) ListEmailLinks(ctx context.Context, params *store.ListEmailLinksParams) ([]*store.EmailLink, error) {
	s.count("ListEmailLinks")
	return s.Store.ListEmailLinks(ctx, params)
}

func (s *callCounter) SpendEmailLink(ctx context.Context, params *store.SpendEmailLinkParams) (*store.EmailLink, error) {
	s.count("SpendEmailLink")
	return s.Store.SpendEmailLink(ctx, params)
}

func (s *callCounter) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	s.count("PostMessage")
	return s.Store.PostMessage(ctx, params)
}

func (s *callCounter) GetRun(ctx context.Context, params *store.GetRunParams) (*cstype.Run, error) {
	s.count("GetRun")
	return s.Store.GetRun(ctx, params)
}

func (s *callCounter) ListRuns(ctx context.Context, params *store.ListRunsParams) ([]*cstype.Run, error) {
	s.count("ListRuns")
	return s.Store.ListRuns(ctx, params)
}

func (s *callCounter) UpdateRun(ctx context.Context, params *store.UpdateRunParams) (*cstype.Run, error) {
	s.count("UpdateRun")
	return s.Store.UpdateRun(ctx, params)
}

func (s *callCounter) ClaimRuns(ctx context.Context, params *store.ClaimRunsParams) ([]*cstype.Run, error) {
	s.count("ClaimRuns")
	return s.Store.ClaimRuns(ctx, params)
}

func (s *callCounter) CancelRun(ctx context.Context, params *store.CancelRunParams) (*cstype.Run, error) {
	s.count("CancelRun")
	return s.Store.CancelRun(ctx, params)
}

func (s *callCounter) SetNotificationTargets(ctx context.Context, params *store.SetNotificationTargetsParams) error {
	s.count("SetNotificationTargets")
	return s.Store.SetNotificationTargets(ctx, params)
}

func (s *callCounter) ClaimNotifications(ctx context.Context, params *store.ClaimNotificationsParams) ([]*cstype.OutboxEntry, error) {
	s.count("ClaimNotifications")
	return s.Store.ClaimNotifications(ctx, params)
}

func (s *callCounter) RecordDelivery(ctx context.Context, params *store.RecordDeliveryParams) (*cstype.OutboxEntry, error) {
	s.count("RecordDelivery")
	return s.Store.RecordDelivery(ctx, params)
}

func (s *callCounter) ListNotifications(ctx context.Context, params *store.ListNotificationsParams) ([]*cstype.OutboxEntry, error) {
	s.count("ListNotifications")
	return s.Store.ListNotifications(ctx, params)
}

func (s *callCounter) RetryNotification(ctx context.Context, params *store.RetryNotificationParams) (*cstype.OutboxEntry, error) {
	s.count("RetryNotification")
	return s.Store.RetryNotification(ctx, params)
}

func (s *callCounter) ClaimSlackPost(ctx context.Context, params *store.ClaimSlackPostParams) (*store.SlackPostClaim, error) {
	s.count("ClaimSlackPost")
	return s.Store.ClaimSlackPost(ctx, params)
}

func (s *callCounter) RecordSlackPost(ctx context.Context, params *store.RecordSlackPostParams) (*store.SlackAnnouncement, error) {
	s.count("RecordSlackPost")
	return s.Store.RecordSlackPost(ctx, params)
}

func (s *callCounter) RotateSlackNonce(ctx context.Context, params *store.RotateSlackNonceParams) (*store.SlackAnnouncement, error) {
	s.count("RotateSlackNonce")
	return s.Store.RotateSlackNonce(ctx, params)
}

func (s *callCounter) RetireSlackNonce(ctx context.Context, params *store.RetireSlackNonceParams) error {
	s.count("RetireSlackNonce")
	return s.Store.RetireSlackNonce(ctx, params)
}

func (s *callCounter) GetSlackAnnouncement(ctx context.Context, params *store.GetSlackAnnouncementParams) (*store.SlackAnnouncement, error) {
	s.count("GetSlackAnnouncement")
	return s.Store.GetSlackAnnouncement(ctx, params)
}

func (s *callCounter) ListSlackAnnouncements(ctx context.Context, params *store.ListSlackAnnouncementsParams) ([]*store.SlackAnnouncement, error) {
	s.count("ListSlackAnnouncements")
	return s.Store.ListSlackAnnouncements(ctx, params)
}

func (s *callCounter) CreatePasskeyEnrollment(ctx context.Context, params *store.CreatePasskeyEnrollmentParams) error {
	s.count("CreatePasskeyEnrollment")
	return s.Store.CreatePasskeyEnrollment(ctx, params)
}

func (s *callCounter) GetPasskeyEnrollment(ctx context.Context, params *store.GetPasskeyEnrollmentParams) (*store.PasskeyEnrollment, error) {
	s.count("GetPasskeyEnrollment")
	return s.Store.GetPasskeyEnrollment(ctx, params)
}

func (s *callCounter) CreatePasskey(ctx context.Context, params *store.CreatePasskeyParams) error {
	s.count("CreatePasskey")
	return s.Store.CreatePasskey(ctx, params)
}

func (s *callCounter) ListPasskeys(ctx context.Context, params *store.ListPasskeysParams) ([]*store.Passkey, error) {
	s.count("ListPasskeys")
	return s.Store.ListPasskeys(ctx, params)
}

func (s *callCounter) UpdatePasskey(ctx context.Context, params *store.UpdatePasskeyParams) error {
	s.count("UpdatePasskey")
	return s.Store.UpdatePasskey(ctx, params)
}

func (s *callCounter) DeletePasskey(ctx context.Context, params *store.DeletePasskeyParams) error {
	s.count("DeletePasskey")
	return s.Store.DeletePasskey(ctx, params)
}

func (s *callCounter) CreatePasskeyChallenge(ctx context.Context, params *store.CreatePasskeyChallengeParams) error {
	s.count("CreatePasskeyChallenge")
	return s.Store.CreatePasskeyChallenge(ctx, params)
}

func (s *callCounter) SpendPasskeyChallenge(ctx context.Context, params *store.SpendPasskeyChallengeParams) (*store.PasskeyChallenge, error) {
	s.count("SpendPasskeyChallenge")
	return s.Store.SpendPasskeyChallenge(ctx, params)
}

func (s *callCounter) SpendMCPNonce(ctx context.Context, params *store.SpendMCPNonceParams) (bool, error) {
	s.count("SpendMCPNonce")
	return s.Store.SpendMCPNonce(ctx, params)
}
