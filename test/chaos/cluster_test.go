package chaos

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/servetest"
	"github.com/countersign/countersign/internal/tcpproxy"
)

const (
	tenant     = "acme"
	agentActor = "alice"
	agentKey   = "ck_chaos_alice"
	secretEnv  = "CS_CHAOS_WEBHOOK_SECRET"
	// lease is the execution lease: short, so that a fault's lapsed leases
	// are taken over within the run, and long enough that a busy machine's
	// renewals keep up.
	lease   = 4 * time.Second
	workers = 3
)

// approvers may decide every proposal (role finance); none is the requester.
var approvers = map[string]string{"bob": "ck_chaos_bob", "carol": "ck_chaos_carol", "dave": "ck_chaos_dave"}

// configYAML is the cluster's configuration: the three webhook actions on
// the backend, and rules that make every call wait for an approver, in
// independent mode (the call answers pending; a worker executes once it is
// approved) unless the call asks for wait. A call whose input says quorum 2
// needs two approvers.
func configYAML(storeURL, backendURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `store: {url: %q, connect_timeout: 5m}
auth:
  api_keys:
    - {key: %s, tenant: %s, actor: %s, roles: [agent]}
`, storeURL, agentKey, tenant, agentActor)
	for _, name := range []string{"bob", "carol", "dave"} {
		fmt.Fprintf(&b, "    - {key: %s, tenant: %s, actor: %s, roles: [finance]}\n", approvers[name], tenant, name)
	}
	fmt.Fprintf(&b, `webhook_secret_env: %s
worker: {poll_interval: 100ms, lease: %s, max_concurrency: 8, max_attempts: 5}
log: {requests: false}
metrics: {proposal_counts_every: 1h}
policy:
  default_ttl: 1h
  rules:
    - {match: "chaos.*", when: "input.quorum == 2", effect: ask, approvers: ["role:finance"], quorum: 2, mode: independent}
    - {match: "chaos.*", effect: ask, approvers: ["role:finance"], mode: independent}
actions:
`, secretEnv, lease)
	schema := `{type: object, required: [n, quorum], additionalProperties: false, properties: {n: {type: integer}, quorum: {type: integer}}}`
	for _, a := range actions {
		fmt.Fprintf(&b, "  - name: %s\n    input_schema: %s\n    execute: {url: %s/execute, timeout: 5s}\n", a, schema, backendURL)
		switch a {
		case actTransfer:
			fmt.Fprintf(&b, "    reconcile: {url: %s/reconcile, timeout: 5s}\n", backendURL)
		case actTag:
			b.WriteString("    idempotent: true\n")
		}
	}
	return b.String()
}

// proc is one process of the cluster.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
}

// cluster is serve and the workers on one store.
type cluster struct {
	t         *testing.T
	bin       string
	dir       string
	env       []string
	serveCfg  string
	workerCfg string
	base      string // serve's URL, the same across restarts
	listen    string
	// proxy, on PostgreSQL, is the workers' way to the database.
	proxy *tcpproxy.Proxy

	mu      sync.Mutex
	serve   *proc
	workers [workers]*proc
	// busy marks a slot (0: serve, 1..: workers) whose fault is under way.
	busy   [workers + 1]bool
	starts int
	errors []string // log lines at level ERROR (but 503 request logs), with their process
}

// newCluster writes the configurations (serve on storeURL, the workers on
// workerURL) and picks serve's port; start starts the processes.
func newCluster(t *testing.T, bin, storeURL, workerURL string, be *backend, proxy *tcpproxy.Proxy) *cluster {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	c := &cluster{t: t, bin: bin, dir: dir, listen: listen, base: "http://" + listen, proxy: proxy,
		env:       append(os.Environ(), secretEnv+"="+string(be.secret)),
		serveCfg:  filepath.Join(dir, "serve.yaml"),
		workerCfg: filepath.Join(dir, "worker.yaml"),
	}
	for path, storeURL := range map[string]string{c.serveCfg: storeURL, c.workerCfg: workerURL} {
		if err := os.WriteFile(path, []byte(configYAML(storeURL, be.url)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.stop)
	return c
}

// launch starts a process and returns once it said ready, or it exited.
func (c *cluster) launch(name string, args ...string) *proc {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	pr, pw, err := os.Pipe()
	if err != nil {
		c.t.Error(err)
		return nil
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		c.t.Error(err)
		return nil
	}
	pw.Close()
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		said := false
		for sc.Scan() {
			line := sc.Text()
			if !said && (strings.HasPrefix(line, "countersign listening on") || strings.HasPrefix(line, "countersign worker running")) {
				said = true
				close(ready)
			}
			// A request answered 503 (the store cannot be reached) logs at
			// ERROR too; the clients count those.
			if strings.Contains(line, "level=ERROR") && !(strings.Contains(line, `msg="http request"`) && strings.Contains(line, "status=503")) {
				c.mu.Lock()
				c.errors = append(c.errors, name+": "+line)
				c.mu.Unlock()
			}
		}
		pr.Close()
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	select {
	case <-ready:
	case <-p.done:
	case <-time.After(5 * time.Minute): // a store that stays away: the fault schedule heals it
		c.t.Errorf("%s did not start", name)
	}
	return p
}

// start starts serve and the workers.
func (c *cluster) start() {
	c.t.Helper()
	c.restart(0)
	for i := 1; i <= workers; i++ {
		c.restart(i)
	}
}

// restart starts the process of slot i (0: serve, 1..: workers), which must
// not be running.
func (c *cluster) restart(i int) {
	var p *proc
	if i == 0 {
		p = c.launch("serve", "serve", "--listen", c.listen, "--config", c.serveCfg)
	} else {
		p = c.launch(fmt.Sprintf("worker%d", i), "worker", "--config", c.workerCfg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts++
	if i == 0 {
		c.serve = p
	} else {
		c.workers[i-1] = p
	}
}

func (c *cluster) slot(i int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i == 0 {
		return c.serve
	}
	return c.workers[i-1]
}

// claim marks slot i busy, or reports that it already is.
func (c *cluster) claim(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[i] {
		return false
	}
	c.busy[i] = true
	return true
}

func (c *cluster) release(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy[i] = false
}

// kill sends SIGKILL to slot i's process and reaps it.
func (c *cluster) kill(i int) {
	if p := c.slot(i); p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// signal sends sig to slot i's process.
func (c *cluster) signal(i int, sig syscall.Signal) {
	if p := c.slot(i); p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// freeze stops the process of slot i with SIGSTOP and returns once it has
// stopped.
func (c *cluster) freeze(i int) {
	if p := c.slot(i); p != nil {
		servetest.Stop(p.cmd.Process)
	}
}

// exited names the processes that exited although nobody killed them.
func (c *cluster) exited() []string {
	var out []string
	for i := 0; i <= workers; i++ {
		if p := c.slot(i); p != nil {
			select {
			case <-p.done:
				out = append(out, fmt.Sprintf("%s (%v)", p.name, p.cmd.ProcessState))
			default:
			}
		}
	}
	return out
}

// stop stops every process gracefully (SIGTERM), killing stragglers, and
// logs the error lines they wrote when the test failed.
func (c *cluster) stop() {
	var procs []*proc
	for i := 0; i <= workers; i++ {
		if p := c.slot(i); p != nil {
			procs = append(procs, p)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(40 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.mu.Lock()
	c.serve, c.workers = nil, [workers]*proc{}
	errs := c.errors
	c.mu.Unlock()
	if c.t.Failed() && len(errs) > 0 {
		if len(errs) > 100 {
			errs = errs[len(errs)-100:]
		}
		c.t.Logf("error lines of the processes (last %d):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// errorLines counts the ERROR lines the processes logged.
func (c *cluster) errorLines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errors)
}

// storeSetup is the store under test: the URL serve uses, the one the
// workers use (through the proxy on PostgreSQL), and the spec
// internal/workload opens for the checks.
type storeSetup struct {
	name                string
	serveURL, workerURL string
	spec                string
	proxy               *tcpproxy.Proxy // nil on SQLite
	// writeLocked, on SQLite, reports whether some process holds the
	// database's write lock; nil on PostgreSQL.
	writeLocked func() bool
}

func sqliteSetup(t *testing.T) storeSetup {
	s := servetest.SQLiteStore(t)
	path := strings.TrimPrefix(s, "sqlite:")
	return storeSetup{name: "sqlite", serveURL: s, workerURL: s, spec: s, writeLocked: func() bool { return servetest.SQLiteWriteLocked(path) }}
}

// postgresSetup is a schema of the test's own; serve reaches the server
// directly, the workers through a proxy the fault injector can black-hole.
// Without a reachable server the test skips, except in CI, where it fails.
func postgresSetup(t *testing.T) storeSetup {
	s := servetest.PostgresStore(t)
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("schema")
	// Serve handles the clients and runs a worker: a larger pool.
	serveURL := pgtest.WithParam(s, "pool_max_conns", "8")
	proxy, workerURL := pgtest.Proxied(t, s)
	return storeSetup{name: "postgres", serveURL: serveURL, workerURL: workerURL, spec: "postgres:" + schema, proxy: proxy}
}

// errorSample returns the first n ERROR lines the processes logged.
func (c *cluster) errorSample(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errors[:min(n, len(c.errors))]...)
}
