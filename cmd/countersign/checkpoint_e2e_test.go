package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/internal/pgtest"
)

// keygen runs `countersign audit keygen` into a new directory and checks
// what it wrote: the private key only its owner may read, the public key
// as a PKIX PEM whose key_id it printed.
func keygen(t *testing.T) (priv, pub string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	out, code := cli(t, "audit", "keygen", dir)
	if code != 0 {
		t.Fatalf("audit keygen: exit %d: %s", code, out)
	}
	priv, pub = filepath.Join(dir, "audit-ed25519.pem"), filepath.Join(dir, "audit-ed25519.pub.pem")
	for path, mode := range map[string]os.FileMode{priv: 0o600, pub: 0o644, dir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Fatalf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), mode)
		}
	}
	data, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auditchain.ParsePublicKey(data)
	if err != nil || !strings.Contains(out, "key_id:      "+auditchain.KeyID(key)) {
		t.Fatalf("the public key: %v; keygen said %q", err, out)
	}
	if data, err := os.ReadFile(priv); err != nil || !strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("the private key: %v, %.30q", err, data)
	}
	if out, code := cli(t, "audit", "keygen", dir); code != exitUsage || !strings.Contains(out, "exists: keygen never overwrites a key") {
		t.Errorf("keygen into a directory with a key: exit %d, %q; want 2, no overwrite", code, out)
	}
	return priv, pub
}

// signedConfig writes a configuration on storeURL whose checkpoints are
// signed every second with the key at keyFile: two tenants, acme and
// globex, each with an agent, an approver and an operator.
func signedConfig(t *testing.T, storeURL, keyFile string) string {
	t.Helper()
	t.Setenv("E2E_AUDIT_SECRET", "s3cret-for-the-audit-e2e-test")
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_bob, tenant: acme, actor: bob, roles: [finance]}
    - {key: key_olga, tenant: acme, actor: olga, roles: [operator]}
    - {key: key_gina, tenant: globex, actor: gina, roles: [agent]}
    - {key: key_gus, tenant: globex, actor: gus, roles: [finance]}
    - {key: key_gwen, tenant: globex, actor: gwen, roles: [operator]}
webhook_secret_env: E2E_AUDIT_SECRET
worker: {poll_interval: 50ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"]}
actions:
  - name: payments.refund
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    execute: {url: "http://127.0.0.1:1/execute", timeout: 1s}
audit:
  signing_key_file: %q
  checkpoint_every: 1s
`, storeURL, keyFile)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// twoRejected makes four events in the agent's tenant: two proposals made
// and rejected.
func twoRejected(t *testing.T, base, agent, approver string) {
	t.Helper()
	for i := range 2 {
		out := postOK(t, base, agent, "/v1/calls", fmt.Sprintf(
			`{"thread_id":"t1","tool_call_id":"c%d","action":"payments.refund","input":{"amount":%d,"customer":"c_%d"},"wait_seconds":0}`, i, i+1, i))
		id := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no proposal id in %s", out)
		}
		postOK(t, base, approver, "/v1/proposals/"+id[1]+"/reject", `{"reason":"no"}`)
	}
}

// until runs the CLI with args until its output matches want, and returns
// that output.
func until(t *testing.T, want *regexp.Regexp, args ...string) string {
	t.Helper()
	for {
		out, _ := cli(t, args...)
		if want.MatchString(out) {
			return out
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%v: %q, never %s", args, out, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// chainDB rewrites a store's chain behind the server, as one with write
// access to the database and without the signing key could.
type chainDB interface {
	exec(t *testing.T, query string, args ...any)
	// relink stores prev and hash as the links of the tenant's event at seq.
	relink(t *testing.T, tenant string, seq int64, prev, hash string)
	// truncate removes the tenant's events from seq on, and their links.
	truncate(t *testing.T, tenant string, from int64)
	// param is the n-th query parameter's placeholder.
	param(n int) string
}

// rewrite edits the actor of the tenant's event at seq and recomputes the
// links of every event from there, from an export of the chain: the chain
// still holds by itself.
func rewrite(t *testing.T, db chainDB, tenant string, export []string, seq int64) {
	t.Helper()
	db.exec(t, `UPDATE events SET actor = 'mallory' WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = `+db.param(1)+` AND seq = `+db.param(2)+`)`, tenant, seq)
	var prev string
	for _, l := range export {
		var e auditchain.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Hash == "" {
			continue // a checkpoint or the exported_at line
		}
		if e.Seq >= seq {
			if e.Seq == seq {
				e.Actor = "mallory"
			}
			e.PrevHash = prev
			e.Hash = auditchain.Hash(&e)
			db.relink(t, tenant, e.Seq, e.PrevHash, e.Hash)
		}
		prev = e.Hash
	}
}

type sqliteChain struct{ db *sql.DB }

func (s sqliteChain) param(n int) string { return fmt.Sprintf("?%d", n) }

func (s sqliteChain) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	res, err := s.db.ExecContext(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("%s %v: no row changed", query, args)
	}
}

func (s sqliteChain) relink(t *testing.T, tenant string, seq int64, prev, hash string) {
	t.Helper()
	// The event's hash is its 32 bytes in its block's hashes; its prev_hash
	// the block's own when it is the block's first.
	var first int64
	var hashes []byte
	if err := s.db.QueryRowContext(t.Context(), `SELECT first_seq, hashes FROM audit_blocks WHERE tenant = ? AND ? BETWEEN first_seq AND last_seq`, tenant, seq).Scan(&first, &hashes); err != nil {
		t.Fatal(err)
	}
	h, _ := hex.DecodeString(hash)
	copy(hashes[32*(seq-first):], h)
	s.exec(t, `UPDATE audit_blocks SET hashes = ? WHERE tenant = ? AND first_seq = ?`, hashes, tenant, first)
	if seq == first {
		p, _ := hex.DecodeString(prev)
		s.exec(t, `UPDATE audit_blocks SET prev_hash = ? WHERE tenant = ? AND first_seq = ?`, p, tenant, first)
	}
}

func (s sqliteChain) truncate(t *testing.T, tenant string, from int64) {
	t.Helper()
	s.exec(t, `DELETE FROM events WHERE id IN (SELECT event_id FROM audit_chain WHERE tenant = ? AND seq >= ?)`, tenant, from)
	if _, err := s.db.ExecContext(t.Context(), `DELETE FROM audit_blocks WHERE tenant = ? AND first_seq >= ?`, tenant, from); err != nil {
		t.Fatal(err)
	}
	var first int64
	var ids string
	var hashes []byte
	err := s.db.QueryRowContext(t.Context(), `SELECT first_seq, ids, hashes FROM audit_blocks WHERE tenant = ? AND last_seq >= ?`, tenant, from).Scan(&first, &ids, &hashes)
	if errors.Is(err, sql.ErrNoRows) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var list []int64
	if err := json.Unmarshal([]byte(ids), &list); err != nil {
		t.Fatal(err)
	}
	keep := from - first
	kept, _ := json.Marshal(list[:keep])
	s.exec(t, `UPDATE audit_blocks SET last_id = ?, last_seq = ?, ids = ?, hashes = ? WHERE tenant = ? AND first_seq = ?`,
		list[keep-1], from-1, string(kept), hashes[:32*keep], tenant, first)
}

type pgChain struct{ conn *pgx.Conn }

func (p pgChain) param(n int) string { return fmt.Sprintf("$%d", n) }

func (p pgChain) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	tag, err := p.conn.Exec(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if tag.RowsAffected() == 0 {
		t.Fatalf("%s %v: no row changed", query, args)
	}
}

func (p pgChain) relink(t *testing.T, tenant string, seq int64, prev, hash string) {
	p.exec(t, `UPDATE audit_chain SET prev_hash = $3, hash = $4 WHERE tenant = $1 AND seq = $2`, tenant, seq, prev, hash)
}

func (p pgChain) truncate(t *testing.T, tenant string, from int64) {
	p.exec(t, `DELETE FROM events WHERE id IN (SELECT event_id FROM audit_chain WHERE tenant = $1 AND seq >= $2)`, tenant, from)
	p.exec(t, `DELETE FROM audit_chain WHERE tenant = $1 AND seq >= $2`, tenant, from)
}

func TestAuditCheckpointsOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testAuditCheckpoints(t, "sqlite:"+path, sqliteChain{db})
}

func TestAuditCheckpointsOnPostgreSQL(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	u, err := url.Parse(pgtest.PoolDSN(pgtest.DSN()))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testAuditCheckpoints(t, u.String(), pgChain{conn})
}

// testAuditCheckpoints runs serve with a signing key from `audit keygen`
// on storeURL: the chain and its checkpoints export and verify with the
// public key, offline and against the server; a forged or replayed
// signature, another key, a file cut short or stale fail; and a chain
// rewritten with recomputed hashes, or cut short, in the database fails
// `audit verify --public-key`, while verify without a key (no head kept)
// still holds, as it did before checkpoints.
func testAuditCheckpoints(t *testing.T, storeURL string, db chainDB) {
	priv, pub := keygen(t)
	s := startServer(t, "--config", signedConfig(t, storeURL, priv))
	acme := []string{"--server", s.base, "--token", "key_olga"}
	globex := []string{"--server", s.base, "--token", "key_gwen"}
	twoRejected(t, s.base, "key_alice", "key_bob")
	twoRejected(t, s.base, "key_gina", "key_gus")
	// The freshness bound is two checkpoint_every (1s here); a loaded
	// machine can delay a round past it, so the checks that are not about
	// freshness allow a minute.
	keyed := func(args ...string) []string { return append(args, "--public-key", pub, "--checkpoint-every", "30s") }
	for _, tenant := range [][]string{acme, globex} {
		until(t, regexp.MustCompile(`^holds: seq 1 to 4, head 4:[0-9a-f]{64}; signed: \d+ checkpoints, the newest of seq 4 at \S+ by key [0-9a-f]{16}\n$`),
			keyed(append([]string{"audit", "verify"}, tenant...)...)...)
	}

	// The export: events, a checkpoint line after each event signed, the
	// exported_at line last.
	out, code := cli(t, append([]string{"audit", "export"}, acme...)...)
	if code != 0 {
		t.Fatalf("audit export: exit %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var cps []int
	for i, l := range lines {
		if strings.HasPrefix(l, `{"checkpoint":{"tenant":"acme",`) {
			cps = append(cps, i)
		}
	}
	if len(cps) == 0 || !strings.HasPrefix(lines[len(lines)-1], `{"exported_at":"`) || !strings.Contains(lines[len(lines)-2], `"seq":4,`) {
		t.Fatalf("export = %q, want checkpoint lines, the last of seq 4, then exported_at", out)
	}
	write := func(name string, ls []string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole := write("whole.jsonl", lines)
	newest := lines[len(lines)-2]
	var exportedAt struct {
		At string `json:"exported_at"`
	}
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &exportedAt)
	at := regexp.MustCompile(`"at":"[^"]+"`)
	// Replayed: the newest checkpoint's signature on a fresher time.
	replayed := slicesWith(lines, len(lines)-2, at.ReplaceAllString(newest, `"at":"`+exportedAt.At+`"`))
	// Forged: another key's signature under the server key's id.
	_, otherPub := keygen(t)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"the export", []string{"audit", "verify", whole, "--public-key", pub}, 0, "holds: seq 1 to 4, head 4:"},
		{"the export, no key", []string{"audit", "verify", whole}, 0, "holds: seq 1 to 4, head 4:"},
		{"a replayed signature", []string{"audit", "verify", write("replayed.jsonl", replayed), "--public-key", pub}, exitBroken, "broken at seq 4: the checkpoint's signature does not verify\n"},
		{"another key", []string{"audit", "verify", whole, "--public-key", otherPub}, exitBroken, "matches no given public key"},
		{"both keys", []string{"audit", "verify", whole, "--public-key", otherPub, "--public-key", pub}, 0, "holds"},
		{"cut before exported_at", []string{"audit", "verify", write("cut.jsonl", lines[:len(lines)-1]), "--public-key", pub}, exitBroken, "broken at seq 5: the export has no exported_at line"},
		{"stale", []string{"audit", "verify", write("stale.jsonl", slicesWith(lines, len(lines)-1, `{"exported_at":"`+later+`"}`)), "--public-key", pub}, exitBroken, "broken at seq 5: the newest signed checkpoint (seq 4"},
		{"not a key", []string{"audit", "verify", whole, "--public-key", priv}, exitUsage, `want "PUBLIC KEY" (PKIX)`},
		{"no key file", []string{"audit", "verify", whole, "--public-key", filepath.Join(t.TempDir(), "none.pem")}, exitUsage, "no such file"},
		{"--checkpoint-every alone", []string{"audit", "verify", whole, "--checkpoint-every", "1m"}, exitUsage, "pass --public-key"},
	}
	for _, tc := range cases {
		out, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
	if out, code := cli(t, "audit", "verify", whole, "--public-key", pub); !strings.Contains(out, "signed: ") || code != 0 {
		t.Errorf("verify of the export names no checkpoint: %q", out)
	}

	// acme's chain rewritten in the database, every hash from seq 2
	// recomputed: verify without a key holds; with it, the checkpoint of
	// seq 4 no longer matches. The running sealer refuses to sign it.
	rewrite(t, db, "acme", lines, 2)
	if out, code := cli(t, append([]string{"audit", "verify"}, acme...)...); code != 0 || !strings.HasPrefix(out, "holds: seq 1 to 4") {
		t.Errorf("verify of the rewritten chain without a key: exit %d, %q; want it to hold, as before checkpoints", code, out)
	}
	if out, code := cli(t, keyed(append([]string{"audit", "verify"}, acme...)...)...); code != exitBroken ||
		!regexp.MustCompile(`^broken at seq [234]: hash differs from the signed checkpoint's: the chain was rewritten\n$`).MatchString(out) {
		t.Errorf("verify --public-key of the rewritten chain: exit %d, %q; want 8, the checkpoint's hash differs", code, out)
	}
	for !strings.Contains(s.output(), "no checkpoint is signed for it") {
		select {
		case <-t.Context().Done():
			t.Fatalf("the sealer did not refuse the rewritten chain:\n%s", s.output())
		case <-time.After(100 * time.Millisecond):
		}
	}

	// globex's chain cut short after seq 2: verify without a key holds;
	// with it, the checkpoint of seq 4 covers an event the chain lacks.
	db.truncate(t, "globex", 3)
	if out, code := cli(t, append([]string{"audit", "verify"}, globex...)...); code != 0 || !strings.HasPrefix(out, "holds: seq 1 to 2") {
		t.Errorf("verify of the truncated chain without a key: exit %d, %q; want it to hold, as before checkpoints", code, out)
	}
	if out, code := cli(t, keyed(append([]string{"audit", "verify"}, globex...)...)...); code != exitBroken ||
		!regexp.MustCompile(`^broken at seq ([34]): a signed checkpoint covers seq ([34]), but the events before it end at seq 2: the chain was cut short\n$`).MatchString(out) {
		t.Errorf("verify --public-key of the truncated chain: exit %d, %q; want 8, the checkpoint beyond its end", code, out)
	}
	// And with the checkpoints that show it deleted too: the newest left
	// goes stale, for the sealer signs the cut chain no more.
	db.exec(t, `DELETE FROM audit_checkpoints WHERE tenant = `+db.param(1)+` AND seq >= 3`, "globex")
	until(t, regexp.MustCompile(`^broken at seq \d: (the newest signed checkpoint \(seq [12], at \S+\) is more than 2s older than now|no checkpoint signed by a given public key)`),
		append([]string{"audit", "verify", "--public-key", pub, "--checkpoint-every", "1s"}, globex...)...)
	if out, code := cli(t, append([]string{"audit", "verify"}, globex...)...); code != 0 {
		t.Errorf("verify without a key after the checkpoints were deleted: exit %d, %q", code, out)
	}
}

// TestServeRefusesABadSigningKey: serve does not start with a key file
// that group or others may read, that is not a PKCS#8 Ed25519 key, or that
// it cannot read; and `config validate`, which builds what serve builds
// before it binds, refuses it the same way.
func TestServeRefusesABadSigningKey(t *testing.T) {
	priv, pub := keygen(t)
	dir := t.TempDir()
	open := filepath.Join(dir, "open.pem")
	data, err := os.ReadFile(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, data, 0o600); err != nil || os.Chmod(open, 0o644) != nil {
		t.Fatal(err)
	}
	public := filepath.Join(dir, "public.pem")
	pubData, _ := os.ReadFile(pub)
	if err := os.WriteFile(public, pubData, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, want string
	}{
		{"mode 0644", open, "audit.signing_key_file " + open + ": mode 0644 lets group or others at it: chmod 600 it"},
		{"a public key", public, `audit.signing_key_file ` + public + `: a PEM block of type "PUBLIC KEY", want "PRIVATE KEY" (PKCS#8)`},
		{"no file", filepath.Join(dir, "none.pem"), "audit.signing_key_file " + filepath.Join(dir, "none.pem") + ": no such file or directory"},
	} {
		cfg := signedConfig(t, "sqlite:"+filepath.Join(t.TempDir(), "db"), tc.key)
		if out, code := cli(t, "config", "validate", cfg); code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("%s: config validate: exit %d, %q; want exit %d and %q, as serve refuses it", tc.name, code, out, exitUsage, tc.want)
		}
		if out, code := cli(t, "config", "validate", "--no-env", cfg); code != 0 {
			t.Errorf("%s: config validate --no-env: exit %d, %q; want valid (the file alone)", tc.name, code, out)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: serve: %v, %q; want exit 2 and %q", tc.name, err, out, tc.want)
		}
	}
}
