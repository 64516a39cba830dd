package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// connectionSizes are B8's sizes: its own flags, which main's -quick
// replaces by quickB8Sizes.
type connectionSizes struct {
	LongPolls int // concurrent wait-mode calls
	Streams   int // concurrent event streams
	// Tenants share the calls and the streams: each stream is one
	// approver's of one tenant and sees that tenant's proposals.
	Tenants int
	// Idle is how long the server is watched with everything open and
	// nothing happening.
	Idle time.Duration
}

// b8Sizes are the flags' values; the tests set them.
var b8Sizes = connectionSizes{LongPolls: 10000, Streams: 1000, Tenants: 100, Idle: idleWindow}

// quickB8Sizes replace them in a -quick run.
var quickB8Sizes = connectionSizes{LongPolls: 1000, Streams: 100, Tenants: 10, Idle: idleWindow}

const (
	// connInFlight bounds the calls sent but not yet stored, so that the
	// server's listen backlog and the store's writer are not what is
	// measured; all of them block at once in the end.
	connInFlight = 256
	// connOpeners is how many streams are being opened at once.
	connOpeners = 64
	// connDeciders approve the proposals over HTTP.
	connDeciders = 32
	// connWait is each call's wait_seconds: docs/api.md's maximum.
	connWait = 60
	// connDeadline bounds each phase; past it the scenario fails.
	connDeadline = 5 * time.Minute
)

func init() {
	flag.IntVar(&b8Sizes.LongPolls, "longpolls", b8Sizes.LongPolls, "B8: concurrent wait-mode calls (long-polls) on one server")
	flag.IntVar(&b8Sizes.Streams, "streams", b8Sizes.Streams, "B8: concurrent event streams (GET /v1/events) on the same server")
	flag.IntVar(&b8Sizes.Tenants, "conn-tenants", b8Sizes.Tenants, "B8: tenants the calls and streams are spread over")
	flag.DurationVar(&b8Sizes.Idle, "b8-idle", b8Sizes.Idle, "B8: how long the server is watched with everything open and nothing happening")
	register(scenario{ID: "B8", order: 80, perStore: true,
		Title: "Connections: long-polls and event streams on one server",
		Method: fmt.Sprintf("The server is a process of its own (this binary re-executed: the real server.New and its http.Server, API keys, metrics, "+
			"request logs discarded and warnings to standard error, over B5's engine: one no-op action in wait mode, asked of role:finance) on a loopback port; this process is "+
			"every client, so each side holds one end of each connection under its own file-descriptor limit. The calls and the streams are "+
			"spread over T tenants: per tenant one agent makes the calls and S÷T approvers (role finance, each its own key) hold one "+
			"`GET /v1/events` stream each, which sees every proposal of its tenant. First the S streams are opened (%d at a time; established "+
			"when the `retry:` frame arrived), then the N calls are sent (`POST /v1/calls`, mode wait, wait_seconds %d, at most %d sent and "+
			"not yet stored); each stores its proposal and blocks. A call answered `pending` (its wait ran out) is repeated with the same tool "+
			"call id, as docs/api.md says, and counted as a re-poll; a call or a decision answered 503 or 429 is an error, and is repeated after its Retry-After (at most %d times) so that the run completes. Memory is the server's: VmRSS (/proc/PID/status) and Go heap objects + "+
			"goroutine stacks (runtime/metrics after GCs until they stop shrinking), with the streams open minus before (÷ S), then with the "+
			"calls blocked as well minus with the streams alone (÷ N); file descriptors are /proc/PID/fd of each process. Then %d clients "+
			"list each tenant's pending proposals and approve every one over HTTP; every call must return succeeded with its own proposal "+
			"and receipt, and every stream must receive its tenant's created, decided and settled events, each exactly once. Errors: any "+
			"non-200 answer, any transport error (a reset, a refused connection), a wrong outcome, a missing or extra event. Then the streams "+
			"and the idle connections are closed and the server watched until it holds no client connection (http.Server.ConnState) and its "+
			"goroutines are back to what they were before.",
			connOpeners, connWait, connInFlight, connRetries, connDeciders),
		run: connections})
}

// connectionSizesFor is B8's sizes for a run's configuration.
func connectionSizesFor(cfg config) connectionSizes {
	if cfg.Quick {
		return quickB8Sizes
	}
	return b8Sizes
}

// connServer is the server process, seen from the bench.
type connServer struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	in   io.WriteCloser
	out  *bufio.Scanner
	pid  int
	wait chan error
}

func startConnServer(e *env, spec connServerSpec) (*connServer, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := exec.Command(e.self)
	c.Env = append(os.Environ(), connServerEnv+"="+string(b))
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	s := &connServer{cmd: c, in: in, out: bufio.NewScanner(out), pid: c.Process.Pid, wait: make(chan error, 1)}
	s.out.Buffer(make([]byte, 64<<10), 1<<20)
	if !s.out.Scan() || !strings.HasPrefix(s.out.Text(), "READY ") {
		_ = in.Close()
		_ = c.Wait()
		return nil, fmt.Errorf("the server process did not start")
	}
	s.url = strings.TrimPrefix(s.out.Text(), "READY ")
	return s, nil
}

// ask sends the server process a command and decodes its answer.
func (s *connServer) ask(cmd string) (connStat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st connStat
	if _, err := io.WriteString(s.in, cmd+"\n"); err != nil {
		return st, fmt.Errorf("the server process: %w", err)
	}
	if !s.out.Scan() {
		return st, fmt.Errorf("the server process ended: %v", s.out.Err())
	}
	if err := json.Unmarshal(s.out.Bytes(), &st); err != nil {
		return st, err
	}
	if st.Error != "" {
		return st, fmt.Errorf("the server process: %s: %s", cmd, st.Error)
	}
	return st, nil
}

// stop ends the server process: its standard input closes and it shuts
// its HTTP server down.
func (s *connServer) stop() {
	_ = s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// connSnapshot is one moment of the server process.
type connSnapshot struct {
	rss, goMem      uint64
	stacks          uint64
	fds, goroutines int
	poolTotal       int
	poolInUse       int
}

func (s *connServer) snapshot() (connSnapshot, error) {
	st, err := s.ask("mem")
	if err != nil {
		return connSnapshot{}, err
	}
	return connSnapshot{rss: procRSS(s.pid), goMem: st.GoMemory, stacks: st.Stacks, fds: countFDs(s.pid), goroutines: st.Goroutines,
		poolTotal: st.PoolTotal, poolInUse: st.PoolInUse}, nil
}

// procRSS is a process's VmRSS in bytes (0 if unreadable).
func procRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// countFDs is how many file descriptors a process holds open ("self" for
// this one).
func countFDs(pid int) int {
	dir := "/proc/self/fd"
	if pid > 0 {
		dir = fmt.Sprintf("/proc/%d/fd", pid)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	return len(ents)
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// connErrors counts B8's errors and keeps the first few.
type connErrors struct {
	n     atomic.Int64
	mu    sync.Mutex
	first []string
}

func (c *connErrors) add(format string, args ...any) {
	if c.n.Add(1) <= 5 {
		c.mu.Lock()
		c.first = append(c.first, fmt.Sprintf(format, args...))
		c.mu.Unlock()
	}
}

func (c *connErrors) err() error {
	if c.n.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%d errors, the first: %s", c.n.Load(), strings.Join(c.first, "; "))
}

// connStream is one event stream's client.
type connStream struct {
	tenant int
	key    string
	counts map[string]int // event name → events received
	ids    map[string]bool
	mu     sync.Mutex
	dupes  int
	// complete is closed once it has received want events.
	want     int
	got      atomic.Int64
	complete chan struct{}
	doneAt   atomic.Int64
}

// connPoll is one long-poll's client.
type connPoll struct {
	tenant   int
	tool     string
	repolls  int
	retries  int // repeats after a 503 or 429 (each also counted as an error)
	result   callAnswer
	receipt  string
	returned atomic.Int64 // unix ns
	approved atomic.Int64 // unix ns: its approval was sent (the try that succeeded)
}

// connTransport is a client transport that keeps every connection it
// opens (there is one per concurrent request).
func connTransport(conns int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

func connections(e *env) ([]Figure, error) {
	sz := connectionSizesFor(e.cfg)
	if sz.LongPolls <= 0 || sz.Idle <= 0 || sz.Streams < 0 || sz.Tenants <= 0 || sz.Streams%sz.Tenants != 0 {
		return nil, fmt.Errorf("-longpolls %d, -streams %d, -conn-tenants %d: want positive numbers (no streams at all: 0), the streams a multiple of the tenants", sz.LongPolls, sz.Streams, sz.Tenants)
	}
	load := loadAverage()
	spec, cleanup, err := e.target.spec()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cs := connServerSpec{Store: spec, MaxConns: e.cfg.PGMaxConns, Tenants: sz.Tenants, Approvers: max(1, sz.Streams/sz.Tenants)}
	idleStat, idleStatEnd := "stat", "stat"
	if dir := e.cfg.IdleProfiles; dir != "" {
		cs.IdleProfile, _ = filepath.Abs(filepath.Join(dir, "b8-"+e.target.name+"-idle.prof"))
		idleStat, idleStatEnd = "profile", "unprofile"
	}
	srv, err := startConnServer(e, cs)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	ctx, cancelAll := context.WithCancel(e.ctx)
	defer cancelAll()
	var errs connErrors
	n, s, T := sz.LongPolls, sz.Streams, sz.Tenants

	pollTr, streamTr, decideTr := connTransport(n), connTransport(s), connTransport(connDeciders)
	defer pollTr.CloseIdleConnections()
	defer streamTr.CloseIdleConnections()
	defer decideTr.CloseIdleConnections()
	pollClient := &http.Client{Transport: pollTr, Timeout: 2 * connWait * time.Second}
	streamClient := &http.Client{Transport: streamTr}
	decideClient := &http.Client{Transport: decideTr, Timeout: time.Minute}

	// call makes one wait-mode call and decodes its answer.
	call := func(ctx context.Context, key string, body map[string]any) (callAnswer, string, error) {
		var ans struct {
			callAnswer
			Receipt  string `json:"receipt"`
			Proposal struct {
				ID string `json:"id"`
			} `json:"proposal"`
		}
		err := doJSON(ctx, pollClient, http.MethodPost, srv.url+"/v1/calls", key, body, &ans)
		if ans.ProposalID == "" {
			ans.ProposalID = ans.Proposal.ID
		}
		return ans.callAnswer, ans.Receipt, err
	}
	// decide approves; again accepts "unchanged", for a repeat of a request
	// whose answer was lost.
	decide := func(ctx context.Context, t int, id string, again bool) error {
		var ans decisionAnswer
		if err := doJSON(ctx, decideClient, http.MethodPost, srv.url+"/v1/proposals/"+id+"/approve", connDeciderKey(t), map[string]any{"reason": "ok"}, &ans); err != nil {
			return err
		}
		if ans.Status != "applied" && !(again && ans.Status == "unchanged") {
			return fmt.Errorf("approve %s: %q", id, ans.Status)
		}
		return nil
	}

	// Warm up: one call approved and one stream opened and closed, so that
	// the baseline holds what any of them needs once.
	if err := connWarmUp(ctx, srv, call, decide, streamClient); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	time.Sleep(500 * time.Millisecond)
	base, err := srv.snapshot()
	if err != nil {
		return nil, err
	}
	clientBase := countFDs(0)

	// The streams.
	streams := make([]*connStream, s)
	perTenant := make([]int, T) // calls per tenant
	for i := range n {
		perTenant[i%T]++
	}
	for j := range streams {
		t := j % T
		streams[j] = &connStream{tenant: t, key: connApproverKey(t, j/T), counts: map[string]int{}, ids: map[string]bool{},
			want: 3 * perTenant[t], complete: make(chan struct{})}
	}
	streamCtx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	var streamsDone sync.WaitGroup
	opening := newBar(s, "B8 %s: open event streams", e.target.title)
	openStart := time.Now()
	err = parallel(s, connOpeners, func(_, j int) error {
		established := make(chan error, 1)
		streamsDone.Add(1)
		go func() {
			defer streamsDone.Done()
			streams[j].run(streamCtx, streamClient, srv.url, established, &errs)
		}()
		if err := <-established; err != nil {
			return err
		}
		opening.add(1)
		return nil
	})
	opening.done()
	streamsOpen := time.Since(openStart)
	if err != nil {
		return nil, fmt.Errorf("open the streams: %w", err)
	}
	time.Sleep(500 * time.Millisecond)
	withStreams, err := srv.snapshot()
	if err != nil {
		return nil, err
	}

	// The long-polls.
	polls := make([]*connPoll, n)
	var (
		sent, returned atomic.Int64
		callsDone      sync.WaitGroup
	)
	creating := newBar(n, "B8 %s: long-polls blocked", e.target.title)
	establishStart := time.Now()
	var created int64
	for i := range polls {
		p := &connPoll{tenant: i % T, tool: fmt.Sprint("lp", i)}
		polls[i] = p
		for int64(i)-created >= connInFlight {
			st, err := srv.ask("stat")
			if err != nil {
				return nil, err
			}
			created = st.Created - 1 // the warm-up's
			creating.set(int(created))
			if int64(i)-created >= connInFlight {
				time.Sleep(2 * time.Millisecond)
			}
			if time.Since(establishStart) > connDeadline {
				return nil, fmt.Errorf("%d of %d calls stored after %s", created, n, connDeadline)
			}
		}
		sent.Add(1)
		callsDone.Add(1)
		go func() {
			defer callsDone.Done()
			defer returned.Add(1)
			body := map[string]any{"thread_id": fmt.Sprint("th", i/T%64), "tool_call_id": p.tool, "action": "noop",
				"input": map[string]any{}, "mode": "wait", "wait_seconds": connWait}
			for {
				ans, receipt, err := call(ctx, connAgentKey(p.tenant), body)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.add("call %s: %v", p.tool, err)
					if d, ok := retryLater(err); ok && p.retries < connRetries {
						// As docs/api.md asks of a client: repeat it later.
						p.retries++
						time.Sleep(d)
						continue
					}
					return
				}
				if ans.Status == "pending" {
					p.repolls++
					continue
				}
				p.result, p.receipt = ans, receipt
				p.returned.Store(time.Now().UnixNano())
				return
			}
		}()
	}
	for created < int64(n) {
		st, err := srv.ask("stat")
		if err != nil {
			return nil, err
		}
		created = st.Created - 1
		creating.set(int(created))
		if created < int64(n) {
			time.Sleep(5 * time.Millisecond)
		}
		if time.Since(establishStart) > connDeadline || errs.n.Load() > 0 {
			creating.done()
			cancelAll()
			callsDone.Wait()
			if err := errs.err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%d of %d calls stored after %s", created, n, connDeadline)
		}
	}
	established := time.Since(establishStart)
	creating.done()
	// Every proposal is stored; give the last calls time to block.
	time.Sleep(500 * time.Millisecond)
	if r := returned.Load(); r != 0 {
		cancelAll()
		callsDone.Wait()
		return nil, fmt.Errorf("%d calls returned before their approval: %v", r, errs.err())
	}
	// The streams deliver their tenants' creations (a proposal read each,
	// per stream) for a while after the calls are stored: wait until they
	// have, so that the snapshot and the idle window measure a server with
	// nothing to do, not that backlog.
	deliverStart := time.Now()
	for _, st := range streams {
		for st.got.Load() < int64(st.want/3) {
			if time.Since(deliverStart) > connDeadline {
				cancelAll()
				callsDone.Wait()
				return nil, fmt.Errorf("stream of tenant %d: %d of its %d creations within %s", st.tenant, st.got.Load(), st.want/3, connDeadline)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	delivered := time.Since(deliverStart)
	all, err := srv.snapshot()
	if err != nil {
		return nil, err
	}
	clientPeak := countFDs(0)
	// Nothing happens for a while: what do the blocked calls and the open
	// streams cost?
	idle0, err := srv.ask(idleStat)
	if err != nil {
		return nil, err
	}
	idleStart := time.Now()
	time.Sleep(sz.Idle)
	idle1, err := srv.ask(idleStatEnd)
	if err != nil {
		return nil, err
	}
	idleElapsed := time.Since(idleStart)

	// Approve them all: each tenant's decider lists its pending proposals.
	want := map[string]string{} // tool call id → proposal id
	for t := range T {
		var page struct {
			Proposals []struct {
				ID         string `json:"id"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"proposals"`
		}
		for after := ""; ; {
			u := srv.url + "/v1/proposals?status=pending&limit=1000"
			if after != "" {
				u += "&after=" + url.QueryEscape(after)
			}
			next, err := getJSON(ctx, decideClient, u, connDeciderKey(t), &page)
			if err != nil {
				return nil, fmt.Errorf("list tenant %d: %w", t, err)
			}
			for _, p := range page.Proposals {
				want[p.ToolCallID] = p.ID
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	if len(want) != n {
		return nil, fmt.Errorf("%d pending proposals listed, want %d", len(want), n)
	}
	readsBefore, err := srv.ask("stat")
	if err != nil {
		return nil, err
	}
	approving := newBar(n, "B8 %s: approve", e.target.title)
	approveStart := time.Now()
	var lastApproved, decideRetries atomic.Int64
	tenantApproved := make([]atomic.Int64, T) // each tenant's last approval, sent
	err = parallel(n, connDeciders, func(_, i int) error {
		for try := 0; ; try++ {
			sent := time.Now().UnixNano()
			err := decide(ctx, polls[i].tenant, want[polls[i].tool], try > 0)
			if err == nil {
				polls[i].approved.Store(sent)
				storeMax(&tenantApproved[polls[i].tenant], sent)
				break
			}
			errs.add("%v", err)
			d, ok := retryLater(err)
			if !ok || try >= connRetries {
				return nil
			}
			// As docs/api.md asks of a client: repeat it later.
			decideRetries.Add(1)
			time.Sleep(d)
		}
		storeMax(&lastApproved, time.Now().UnixNano())
		approving.add(1)
		return nil
	})
	approving.done()
	if err != nil {
		return nil, err
	}
	allReturned := make(chan struct{})
	go func() { callsDone.Wait(); close(allReturned) }()
	select {
	case <-allReturned:
	case <-time.After(connDeadline):
		r := returned.Load()
		cancelAll()
		<-allReturned
		return nil, fmt.Errorf("the calls did not all return within %s of their approvals (%d returned): %v", connDeadline, r, errs.err())
	}
	var lastReturned int64
	repolls, callRetries := 0, 0
	var release []time.Duration // each call: its approval sent → it returned
	for _, p := range polls {
		repolls += p.repolls
		callRetries += p.retries
		lastReturned = max(lastReturned, p.returned.Load())
		if r, a := p.returned.Load(), p.approved.Load(); r != 0 && a != 0 {
			release = append(release, time.Duration(r-a))
		}
		switch {
		case p.returned.Load() == 0:
			// Its error is counted.
		case p.result.Status != "succeeded" || p.receipt != "ok" || p.result.ProposalID != want[p.tool]:
			errs.add("call %s: status %q, receipt %q, proposal %q (want succeeded, ok, %s)", p.tool, p.result.Status, p.receipt, p.result.ProposalID, want[p.tool])
		}
	}
	// Every stream must have its events.
	deadline := time.After(connDeadline)
	var lastStream int64
	for _, st := range streams {
		select {
		case <-st.complete:
		case <-deadline:
		}
	}
	var streamDone []time.Duration // each stream: its tenant's last approval sent → it had every event
	for j, st := range streams {
		got := int(st.got.Load())
		lastStream = max(lastStream, st.doneAt.Load())
		if d, a := st.doneAt.Load(), tenantApproved[st.tenant].Load(); d != 0 && a != 0 {
			streamDone = append(streamDone, time.Duration(d-a))
		}
		if got != st.want {
			errs.add("stream %d (tenant %d): %d events, want %d", j, st.tenant, got, st.want)
		}
		st.mu.Lock()
		for _, name := range []string{"proposal.created", "proposal.decided", "proposal.settled"} {
			if c := st.counts[name]; c != st.want/3 {
				errs.add("stream %d: %d %s events, want %d", j, c, name, st.want/3)
			}
		}
		if st.dupes > 0 {
			errs.add("stream %d: %d events twice", j, st.dupes)
		}
		st.mu.Unlock()
	}
	released := time.Since(approveStart)
	readsAfter, err := srv.ask("stat")
	if err != nil {
		return nil, err
	}

	// Close the streams and the idle connections (long-polls', deciders');
	// the server must close every one and end their goroutines.
	closeStart := time.Now()
	closeStreams()
	streamsDone.Wait()
	pollTr.CloseIdleConnections()
	streamTr.CloseIdleConnections()
	decideTr.CloseIdleConnections()
	var leftConns int64
	for {
		st, err := srv.ask("stat")
		if err != nil {
			return nil, err
		}
		if leftConns = st.Conns; leftConns == 0 && st.Goroutines <= base.goroutines+5 {
			break
		}
		if time.Since(closeStart) > time.Minute {
			errs.add("a minute after closing, the server holds %d client connections and %d goroutines (%d before)", st.Conns, st.Goroutines, base.goroutines)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed := time.Since(closeStart)
	after, err := srv.snapshot()
	if err != nil {
		return nil, err
	}

	slices.Sort(release)
	slices.Sort(streamDone)
	k := "b8." + e.target.name
	nn, ss := thousands(fmt.Sprint(n)), thousands(fmt.Sprint(s))
	per := func(a, b uint64, count int) float64 { return (float64(a) - float64(b)) / float64(max(count, 1)) }
	events := 0
	for _, st := range streams {
		events += int(st.got.Load())
	}
	figs := []Figure{
		{Key: k + ".load", Label: "the machine's 1-minute load average at the start (2 cores, shared)", Value: load, Unit: ""},
		{Key: k + ".longpolls", Label: "concurrent wait-mode calls (long-polls)", Value: float64(n), Unit: "calls"},
		{Key: k + ".streams", Label: fmt.Sprintf("concurrent event streams, over %d tenants", T), Value: float64(s), Unit: "streams"},
		{Key: k + ".errors", Label: fmt.Sprintf("errors: non-200 answers, transport errors, wrong outcomes, missing or extra events (%s calls, %s streams)", nn, ss),
			Value: float64(errs.n.Load()), Unit: "errors"},
		{Key: k + ".rss_per_longpoll", Label: fmt.Sprintf("server RSS per blocked long-poll (%s blocked and the streams, minus the streams alone, ÷ N)", nn), Value: per(all.rss, withStreams.rss, n), Unit: "bytes"},
		{Key: k + ".go_per_longpoll", Label: "server Go heap objects + stacks per blocked long-poll", Value: per(all.goMem, withStreams.goMem, n), Unit: "bytes"},
		{Key: k + ".stacks_per_longpoll", Label: "of which goroutine stacks", Value: per(all.stacks, withStreams.stacks, n), Unit: "bytes"},
		{Key: k + ".goroutines_per_longpoll", Label: "server goroutines per blocked long-poll", Value: float64(all.goroutines-withStreams.goroutines) / float64(n), Unit: "goroutines"},
		{Key: k + ".server_fds", Label: fmt.Sprintf("server file descriptors with everything open (before: %d)", base.fds), Value: float64(all.fds), Unit: "fds"},
		{Key: k + ".client_fds", Label: fmt.Sprintf("client process file descriptors with everything open (before: %d)", clientBase), Value: float64(clientPeak), Unit: "fds"},
		{Key: k + ".idle_cpu", Label: fmt.Sprintf("server CPU with everything open and nothing happening (over %s)", sz.Idle),
			Value: 100 * time.Duration(idle1.CPU-idle0.CPU).Seconds() / idleElapsed.Seconds(), Unit: "% of a core"},
		{Key: k + ".idle_reads", Label: "server store reads (proposals, events) with everything open and nothing happening",
			Value: float64(idle1.Reads-idle0.Reads) / idleElapsed.Seconds(), Unit: "reads/s"},
		{Key: k + ".server_rss", Label: "server RSS with everything open", Value: float64(all.rss) / (1 << 20), Unit: "MiB"},
		{Key: k + ".establish_s", Label: fmt.Sprintf("first call sent → all %s stored (blocked 0.5 s later)", nn), Value: established.Seconds(), Unit: "s"},
		{Key: k + ".creations_delivered_s", Label: "then, until every stream has its tenant's creations (before the snapshot and the idle window)", Value: delivered.Seconds(), Unit: "s"},
		{Key: k + ".repolls", Label: fmt.Sprintf("re-polls (a call's %d s wait ran out, repeated)", connWait), Value: float64(repolls), Unit: "re-polls"},
		{Key: k + ".retries", Label: "requests repeated after a 503 or 429, as docs/api.md asks (calls, decisions; each is also an error)", Value: float64(callRetries) + float64(decideRetries.Load()), Unit: "requests"},
		{Key: k + ".approve_s", Label: fmt.Sprintf("first approval sent → last of %s approved (%d clients)", nn, connDeciders), Value: time.Duration(lastApproved.Load() - approveStart.UnixNano()).Seconds(), Unit: "s"},
		{Key: k + ".release_ms", Label: "last approval → last call returned succeeded", Value: ms(time.Duration(lastReturned - lastApproved.Load())), Unit: "ms"},
		{Key: k + ".release_p50_ms", Label: "an approval sent → its call returned succeeded, p50 over the calls", Value: ms(pct(release, 50)), Unit: "ms"},
		{Key: k + ".release_p99_ms", Label: "the same, p99", Value: ms(pct(release, 99)), Unit: "ms"},
		{Key: k + ".reads_per_approval", Label: "server store reads (proposals, events) from the first approval until every call returned and every stream is complete, ÷ N",
			Value: perOp(readsAfter.Reads-readsBefore.Reads, n), Unit: "reads"},
		{Key: k + ".released_s", Label: "first approval → every call returned and every stream complete", Value: released.Seconds(), Unit: "s"},
		{Key: k + ".close_ms", Label: fmt.Sprintf("streams and idle connections closed → server holds no client connection and its goroutines before (after: %d connections, %d goroutines, %d before; %d fds, %d before: the store's pool may have grown)", leftConns, after.goroutines, base.goroutines, after.fds, base.fds), Value: ms(closed), Unit: "ms"},
	}
	if s > 0 {
		figs = append(figs, []Figure{
			{Key: k + ".rss_per_stream", Label: fmt.Sprintf("server RSS per event stream (%s open minus before, ÷ S)", ss), Value: per(withStreams.rss, base.rss, s), Unit: "bytes"},
			{Key: k + ".go_per_stream", Label: "server Go heap objects + stacks per event stream", Value: per(withStreams.goMem, base.goMem, s), Unit: "bytes"},
			{Key: k + ".stacks_per_stream", Label: "of which goroutine stacks", Value: per(withStreams.stacks, base.stacks, s), Unit: "bytes"},
			{Key: k + ".goroutines_per_stream", Label: "server goroutines per event stream", Value: float64(withStreams.goroutines-base.goroutines) / float64(max(s, 1)), Unit: "goroutines"},
			{Key: k + ".streams_open_s", Label: fmt.Sprintf("open %s streams (%d at a time)", ss, connOpeners), Value: streamsOpen.Seconds(), Unit: "s"},
			{Key: k + ".streams_complete_ms", Label: "last approval → last stream has all its events", Value: ms(time.Duration(lastStream - lastApproved.Load())), Unit: "ms"},
			{Key: k + ".stream_done_p50_ms", Label: "its tenant's last approval sent → a stream has all its events, p50 over the streams", Value: ms(pct(streamDone, 50)), Unit: "ms"},
			{Key: k + ".stream_done_p99_ms", Label: "the same, p99", Value: ms(pct(streamDone, 99)), Unit: "ms"},
			{Key: k + ".events", Label: "events the streams received", Value: float64(events), Unit: "events"},
		}...)
	}
	if all.poolTotal > 0 {
		figs = append(figs, Figure{Key: k + ".pool", Label: fmt.Sprintf("PostgreSQL pool with everything blocked: connections open (of %d), %d in use", e.cfg.PGMaxConns, all.poolInUse), Value: float64(all.poolTotal), Unit: "connections"})
	}
	return figs, errs.err()
}

// connWarmUp makes one call, approves it and opens and closes one stream.
func connWarmUp(ctx context.Context, srv *connServer, call func(context.Context, string, map[string]any) (callAnswer, string, error),
	decide func(context.Context, int, string, bool) error, streamClient *http.Client) error {
	st := &connStream{key: connApproverKey(0, 0), counts: map[string]int{}, ids: map[string]bool{}, want: -1, complete: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	established := make(chan error, 1)
	var errs connErrors
	done := make(chan struct{})
	go func() { defer close(done); st.run(sctx, streamClient, srv.url, established, &errs) }()
	if err := <-established; err != nil {
		cancel()
		return err
	}
	ans, _, err := call(ctx, connAgentKey(0), map[string]any{"thread_id": "warm", "tool_call_id": "warm", "action": "noop", "input": map[string]any{}, "mode": "wait", "wait_seconds": 0})
	if err != nil {
		cancel()
		return err
	}
	if ans.Status != "pending" || ans.ProposalID == "" {
		cancel()
		return fmt.Errorf("the warm-up call answered %q", ans.Status)
	}
	if err := decide(ctx, 0, ans.ProposalID, false); err != nil {
		cancel()
		return err
	}
	ans, _, err = call(ctx, connAgentKey(0), map[string]any{"thread_id": "warm", "tool_call_id": "warm", "action": "noop", "input": map[string]any{}, "mode": "wait", "wait_seconds": connWait})
	if err == nil && ans.Status != "succeeded" {
		err = fmt.Errorf("the warm-up call answered %q after its approval", ans.Status)
	}
	// Its stream sees its three events before it closes.
	for err == nil && st.got.Load() < 3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if err == nil {
		err = errs.err()
	}
	return err
}

// run holds one event stream open until ctx ends, counting its events. It
// reports on established once the stream answered (or failed to).
func (st *connStream) run(ctx context.Context, client *http.Client, base string, established chan<- error, errs *connErrors) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	if err != nil {
		established <- err
		return
	}
	req.Header.Set("Authorization", "Bearer "+st.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		established <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		established <- fmt.Errorf("GET /v1/events: %s: %s", resp.Status, bytes.TrimSpace(b))
		return
	}
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	first := true
	var name, id string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if first {
				established <- fmt.Errorf("GET /v1/events: %w", err)
			} else if ctx.Err() == nil {
				errs.add("stream %s: %v", st.key, err)
			}
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case first && strings.HasPrefix(line, "retry:"):
			first = false
			established <- nil
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case line == "" && name != "":
			st.mu.Lock()
			if st.ids[id] {
				st.dupes++
			}
			st.ids[id] = true
			st.counts[name]++
			st.mu.Unlock()
			if int(st.got.Add(1)) == st.want {
				st.doneAt.Store(time.Now().UnixNano())
				close(st.complete)
			}
			name, id = "", ""
		}
	}
}

// doJSON sends a JSON body (nil: none) with a bearer token and decodes a
// 200 answer into out.
func doJSON(ctx context.Context, c *http.Client, method, u, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &statusError{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"),
			msg: fmt.Sprintf("%s %s: %s: %s", method, req.URL.Path, resp.Status, bytes.TrimSpace(raw))}
	}
	return json.Unmarshal(raw, out)
}

// statusError is an answer other than 200.
type statusError struct {
	code       int
	retryAfter string
	msg        string
}

func (e *statusError) Error() string { return e.msg }

// retryLater is how long to wait before repeating a request that failed
// with err, if docs/api.md says to repeat it (503 and 429 carry Retry-After).
func retryLater(err error) (time.Duration, bool) {
	var se *statusError
	if !errors.As(err, &se) || (se.code != http.StatusServiceUnavailable && se.code != http.StatusTooManyRequests) {
		return 0, false
	}
	secs, perr := strconv.Atoi(se.retryAfter)
	if perr != nil || secs < 0 {
		secs = 1
	}
	return time.Duration(secs) * time.Second, true
}

// connRetries bounds the repeats of one request answered 503 or 429.
const connRetries = 10

// getJSON is a GET of doJSON that also returns the next page's cursor.
func getJSON(ctx context.Context, c *http.Client, u, token string, out any) (next string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", req.URL.Path, resp.Status, bytes.TrimSpace(raw))
	}
	if h := resp.Header.Get("X-Action-Proposals-Next"); h != "" {
		if next, err = url.PathUnescape(h); err != nil {
			return "", err
		}
	}
	return next, json.Unmarshal(raw, out)
}

// storeMax raises a to v if v is higher.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
