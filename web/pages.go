package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
)

// pageData is what every page's template receives.
type pageData struct {
	Title string
	// Pending counts the pending proposals that wait for the signed-in
	// actor's decision (Engine.WaitingFor): not those it only sees.
	Pending int
	More    bool // more waiting than counted
	Session *countersign.Session
	// Proposal is the id a proposal page follows in the event stream.
	Proposal string
	Data     any
}

// CSRF is the session's token for the page's forms.
func (d *pageData) CSRF() string {
	if d.Session == nil {
		return ""
	}
	return d.Session.CSRF
}

// FullTitle is the document title, with the count of what waits for the
// actor. A proposal's title is the agent's text: plain text, as on the
// page.
func (d *pageData) FullTitle() string {
	t := plaintext.Line(d.Title) + " · Countersign"
	switch {
	case d.Session == nil:
		return t
	case d.More:
		return fmt.Sprintf("(%d+) %s", d.Pending, t)
	case d.Pending > 0:
		return fmt.Sprintf("(%d) %s", d.Pending, t)
	}
	return t
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"left": func(t time.Time) string { return remaining(time.Until(t)) },
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"pretty": prettyJSON,
	// Every text of a record the page shows goes through line or text:
	// what an agent (or any actor) chose is shown as plain text, its
	// invisible and control characters as \u{XXXX} (internal/plaintext).
	// html/template escapes the markup; these make what is left visible.
	// Values a form or link sends back (filters, hidden fields, URLs) stay
	// exact.
	"line": plaintext.Line,
	"text": plaintext.Multiline,
	// channel names a decision's channel: "Slack", "email", or the
	// recorded via as plain text.
	"channel": channelName,
}

// remaining says how long until a deadline, as the script's countdown does.
func remaining(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %02dm %02ds left", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm %02ds left", m, s)
	}
	return fmt.Sprintf("%ds left", s)
}

// prettyJSON indents a JSON document for reading; anything else as it is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// parsePages parses each page with the shared layout.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web: parse layout: %w", err)
	}
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(assets, n)
		if err != nil {
			return nil, fmt.Errorf("web: parse %s: %w", n, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes a page. The pending count is read for signed-in pages.
func (in *Inbox) render(w http.ResponseWriter, r *http.Request, status int, name string, d *pageData) {
	if d.Session != nil {
		d.Pending, d.More = in.pending(r.Context(), d.Session.Identity)
	}
	var b bytes.Buffer
	if err := in.pages[name].ExecuteTemplate(&b, "layout", d); err != nil {
		in.log.Error("inbox: render page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// pendingCount bounds the count of what waits for the actor in the title.
const pendingCount = 100

// pending counts the pending proposals that wait for id's decision in the
// inbox, up to pendingCount, as the engine answers (Engine.WaitingFor).
func (in *Inbox) pending(ctx context.Context, id countersign.Identity) (int, bool) {
	n, more, err := in.engine.WaitingFor(ctx, id, via, pendingCount)
	if err != nil {
		return 0, false
	}
	return n, more
}

// via is the channel of the inbox's decisions.
const via = "web"

// statusChoice is one option of the list's status filter.
type statusChoice struct {
	Value, Label string
	Selected     bool
}

// listItem is one proposal of the list, and what the list says of it
// beyond its status.
type listItem struct {
	*cstype.Proposal
	Note string
}

// listGroup is one part of a list page: what waits for the actor, what
// waits for others, and the rest.
type listGroup struct {
	// ID names the group in the page; Heading is "" for a list that is
	// not split.
	ID, Heading string
	Items       []listItem
	Empty       string // said when Items is empty; the group is left out when "" too
}

type listData struct {
	Status   string
	Statuses []statusChoice
	Action   string
	Actions  []string
	Thread   string
	Groups   []listGroup
	Next     string // the next page's URL, "" on the last
	First    string // the first page's URL, "" on the first
	Empty    string
}

func (in *Inbox) handleList(w http.ResponseWriter, r *http.Request) error {
	sess, err := in.session(r)
	if err != nil {
		return err
	}
	if sess == nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return nil
	}
	q := r.URL.Query()
	d := &listData{Status: q.Get("status"), Action: q.Get("action"), Thread: threadFilter(q)}
	if d.Status == "" {
		d.Status = string(cstype.StatusPending)
	}
	params := countersign.ListParams{Action: d.Action, ThreadID: d.Thread, After: q.Get("after"), Limit: PageSize}
	switch {
	case d.Status == "all":
	case cstype.Status(d.Status).Valid():
		params.Statuses = []cstype.Status{cstype.Status(d.Status)}
	default:
		return errPage(http.StatusBadRequest, "Bad filter", "Unknown status "+strconv.Quote(d.Status)+".")
	}
	d.Statuses = append(d.Statuses, statusChoice{Value: "all", Label: "any status", Selected: d.Status == "all"})
	for _, s := range cstype.Statuses {
		d.Statuses = append(d.Statuses, statusChoice{Value: string(s), Label: string(s), Selected: d.Status == string(s)})
	}
	for _, a := range in.engine.Actions() {
		d.Actions = append(d.Actions, a.Name())
	}
	if d.Action != "" && !slices.Contains(d.Actions, d.Action) {
		d.Actions = append(d.Actions, d.Action)
	}
	page, err := in.engine.List(r.Context(), sess.Identity, params)
	switch {
	case errors.Is(err, cstype.ErrInvalidCursor):
		return errPage(http.StatusBadRequest, "Bad page", "That page link is not valid any more; start from the first page.")
	case errors.Is(err, cstype.ErrInvalidParams):
		return errPage(http.StatusBadRequest, "Bad filter", "The filter is not valid.")
	case err != nil:
		return err
	}
	d.Groups = in.groups(r.Context(), sess.Identity, page.Proposals, d.Status)
	filter := url.Values{}
	filter.Set("status", d.Status)
	if d.Action != "" {
		filter.Set("action", d.Action)
	}
	if d.Thread != "" {
		filter.Set("thread", d.Thread)
	}
	if params.After != "" {
		d.First = "/?" + filter.Encode()
	}
	if page.Next != "" {
		filter.Set("after", page.Next)
		d.Next = "/?" + filter.Encode()
	}
	if d.Status == string(cstype.StatusPending) {
		d.Empty = "Nothing waits for you."
	} else {
		d.Empty = "No proposals match."
	}
	in.render(w, r, http.StatusOK, "list", &pageData{Title: "Inbox", Session: sess, Data: d})
	return nil
}

// groups splits a list page's proposals, in their order, as the engine
// says each stands for id (Engine.Turn): those waiting for id's decision,
// the pending ones waiting for others (id decided them already, or does
// not decide them), then the rest. A list of one status other than pending
// is not split.
func (in *Inbox) groups(ctx context.Context, id countersign.Identity, ps []*cstype.Proposal, status string) []listGroup {
	now := in.now()
	if len(ps) == 0 {
		return nil
	}
	if status != string(cstype.StatusPending) && status != "all" {
		g := listGroup{ID: "proposals"}
		for _, p := range ps {
			g.Items = append(g.Items, listItem{Proposal: p, Note: listNote(p, now)})
		}
		return []listGroup{g}
	}
	yours := listGroup{ID: "yours", Heading: "Waiting for you", Empty: "Nothing waits for you."}
	others := listGroup{ID: "others", Heading: "Waiting for others"}
	rest := listGroup{ID: "rest", Heading: "Everything else"}
	for _, p := range ps {
		t := in.engine.Turn(ctx, id, p, via)
		switch {
		case t.Yours:
			// What it needs is worth saying only beyond the reader's own
			// approval.
			note := ""
			if t.Needed > 1 {
				note = neededWords(t, p.Requester)
			}
			yours.Items = append(yours.Items, listItem{Proposal: p, Note: note})
		case p.Status == cstype.StatusPending:
			others.Items = append(others.Items, listItem{Proposal: p, Note: waitingNote(t, p.Requester)})
		default:
			rest.Items = append(rest.Items, listItem{Proposal: p, Note: listNote(p, now)})
		}
	}
	return []listGroup{yours, others, rest}
}

// threadFilter is the thread a filter form or link asks for. The form's
// box shows the thread as plain text (a thread id an agent chose may hold
// invisible characters); while the box still holds what the page showed,
// thread_exact carries the exact id it stands for.
func threadFilter(q url.Values) string {
	t := q.Get("thread")
	if exact := q.Get("thread_exact"); exact != "" && plaintext.Line(exact) == t {
		return exact
	}
	return t
}

// proposalData is what the proposal page shows.
type proposalData struct {
	P         *cstype.Proposal
	Approvals int
	// Turn is where the proposal stands for the actor, as the engine says:
	// the form offers Approve when Turn.Yours and Reject when Turn.Reject
	// (the engine still has the last word).
	Turn countersign.Turn
	// Needed says what approvals it still needs, from whom; Instead who
	// decides when the actor does not.
	Needed, Instead string
	// Conversation is what led to the call; Input the call's input for
	// reading (nil: the JSON alone), InputJSON its exact JSON.
	Conversation *conversationView
	Input        *inputValue
	InputJSON    string
	CanResolve   bool
	// Fate says what approving does, or what became of it; Runs what runs,
	// as whom, executed by whom.
	Fate, Runs   string
	Remember     []rememberChoice
	RememberNote string
	Result       string // the last action's result, in words
	Problem      string // why the last action was refused
	Trail        *trailView
	// Announced says where the approver channels announced the proposal.
	Announced []announcedGroup
	// StepUp is set when approving needs the actor's passkey (passkeys.go).
	StepUp *stepUpView
}

// proposal loads a proposal the signed-in actor may see, as the engine
// decides: 404 when no tenant has it, 403 when another tenant does or the
// actor may not see it, as the API answers.
func (in *Inbox) proposal(ctx context.Context, id countersign.Identity, pid string) (*cstype.Proposal, error) {
	p, err := in.engine.Proposal(ctx, id, pid)
	if _, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return nil, errPage(http.StatusForbidden, "Not yours", "You may not see this proposal.")
	}
	if errors.Is(err, countersign.ErrNotFound) {
		return nil, errPage(http.StatusNotFound, "Not found", "There is no such proposal.")
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// resultAwaitingCaller is the result of an approval that only the agent's
// next call runs (DecideResult.AwaitingCaller).
const resultAwaitingCaller = "awaiting_caller"

// results are the decision answers in words.
var results = map[string]string{
	string(countersign.DecideApplied):   "Your decision was recorded.",
	resultAwaitingCaller:                "Your approval was recorded. It has not run: it runs only when the agent calls again, before the deadline below; otherwise it lapses without running.",
	string(countersign.DecideUnchanged): "You had already made this decision; nothing changed.",
	string(countersign.DecideConflict):  "Not recorded: a different decision already stands, or the proposal is no longer pending.",
	string(countersign.DecideExpired):   "Not recorded: the proposal expired first, and an expired proposal authorizes nothing.",
	"resolved":                          "Resolved: the outcome and your note were recorded.",
	"resolve_conflict":                  "Not resolved: the proposal is no longer reconciling or unknown.",
}

func (in *Inbox) handleProposal(w http.ResponseWriter, r *http.Request) error {
	return in.showProposal(w, r, http.StatusOK, results[r.URL.Query().Get("result")], "")
}

func (in *Inbox) showProposal(w http.ResponseWriter, r *http.Request, status int, result, problem string) error {
	sess := sessionOf(r)
	p, err := in.proposal(r.Context(), sess.Identity, r.PathValue("id"))
	if err != nil {
		return err
	}
	d := &proposalData{P: p, Approvals: p.Approvals(), Result: result, Problem: problem,
		Input: readInput(p.Input), InputJSON: prettyJSON(p.Input)}
	may := in.engine.Permissions(r.Context(), sess.Identity, p, via)
	d.Turn = in.engine.Turn(r.Context(), sess.Identity, p, via)
	d.Needed, d.Instead = neededWords(d.Turn, p.Requester), insteadWords(d.Turn, p.Requester)
	d.CanResolve = may.Resolve
	conv, err := in.engine.ProposalConversation(r.Context(), sess.Identity, p.ID, conversationShown)
	if err != nil {
		return err
	}
	d.Conversation = newConversationView(conv, p.Requester, p.Action, p.CreatedAt)
	d.Fate, d.Runs = fate(p, in.now()), whatRuns(p)
	d.Remember, d.RememberNote = rememberChoices(p, may.Remember), rememberNote(p)
	if d.StepUp, err = in.stepUpFor(r.Context(), sess, p, d.Turn); err != nil {
		return err
	}
	trail, err := in.engine.ProposalTrail(r.Context(), sess.Identity, p.ID)
	if err != nil {
		return err
	}
	d.Trail = newTrailView(trail)
	announced, err := in.engine.Announcements(r.Context(), sess.Identity, p.ID)
	if err != nil {
		return err
	}
	d.Announced = announcedWords(announced)
	title := p.Confirmation.Title
	if title == "" {
		title = p.Action
	}
	in.render(w, r, status, "proposal", &pageData{Title: title, Session: sess, Proposal: p.ID, Data: d})
	return nil
}

func (in *Inbox) handleDecide(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	pid := r.PathValue("id")
	if _, err := in.proposal(r.Context(), sess.Identity, pid); err != nil {
		return err
	}
	f := r.PostForm
	var err error
	dec := &countersign.Decision{
		Identity: sess.Identity, ProposalID: pid, Via: via,
		Verdict: countersign.Verdict(f.Get("verdict")), Reason: strings.TrimSpace(f.Get("reason")),
		Remember: countersign.Scope(f.Get("remember")),
	}
	if dec.Verdict == countersign.Reject {
		dec.Remember = "" // the radio buttons go with the approval only
	} else {
		// The step-up's passkey assertion, which the page's script adds
		// (passkeys.go); the engine checks and spends it.
		if dec.Assertion, err = ceremonyField(r, "assertion"); err != nil {
			return err
		}
	}
	res, err := in.engine.Decide(r.Context(), dec)
	if se, ok := errors.AsType[*countersign.StepUpRequiredError](err); ok {
		return in.showProposal(w, r, http.StatusForbidden, "", stepUpProblem(se))
	}
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return in.showProposal(w, r, http.StatusForbidden, "", "You may not decide this proposal: "+fe.Reason+".")
	}
	if ie, ok := errors.AsType[*countersign.InvalidRememberError](err); ok {
		return in.showProposal(w, r, http.StatusBadRequest, "", "That approval cannot be remembered so: "+ie.Reason+". Nothing was decided.")
	}
	switch {
	case errors.Is(err, countersign.ErrInvalidCall):
		return in.showProposal(w, r, http.StatusBadRequest, "", "That decision is not valid: choose approve or reject, and remember only with an approval.")
	case errors.Is(err, cstype.ErrNotFound):
		return errPage(http.StatusNotFound, "Not found", "There is no such proposal.")
	case err != nil:
		return err
	}
	result := string(res.Status)
	if res.AwaitingCaller {
		result = resultAwaitingCaller
	}
	http.Redirect(w, r, "/proposals/"+url.PathEscape(pid)+"?result="+url.QueryEscape(result), http.StatusSeeOther)
	return nil
}

func (in *Inbox) handleResolve(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	pid := r.PathValue("id")
	if _, err := in.proposal(r.Context(), sess.Identity, pid); err != nil {
		return err
	}
	f := r.PostForm
	note := strings.TrimSpace(f.Get("note"))
	if note == "" {
		return in.showProposal(w, r, http.StatusBadRequest, "", "Write a note: what did you check, and what did you find?")
	}
	status := cstype.Status(f.Get("status"))
	_, err := in.engine.Resolve(r.Context(), sess.Identity, pid, status, strings.TrimSpace(f.Get("receipt")), note, via)
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return in.showProposal(w, r, http.StatusForbidden, "", "You may not resolve this proposal: "+fe.Reason+".")
	}
	result := "resolved"
	switch {
	case errors.Is(err, countersign.ErrInvalidCall):
		return in.showProposal(w, r, http.StatusBadRequest, "", "Choose succeeded or failed.")
	case errors.Is(err, cstype.ErrNotFound):
		return errPage(http.StatusNotFound, "Not found", "There is no such proposal.")
	case errors.Is(err, cstype.ErrConflict):
		result = "resolve_conflict"
	case err != nil:
		return err
	}
	http.Redirect(w, r, "/proposals/"+url.PathEscape(pid)+"?result="+result, http.StatusSeeOther)
	return nil
}
