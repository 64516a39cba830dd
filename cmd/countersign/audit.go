package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/internal/plaintext"
)

// exitBroken is the exit code of `countersign audit verify` when the chain
// does not hold.
const exitBroken = 8

// maxAuditLine bounds one exported event (its detail is free text).
const maxAuditLine = 16 << 20

func auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Export and verify the audit log's hash chain and its signed checkpoints (operators)"}
	cmd.AddCommand(auditExportCmd(), auditVerifyCmd(), auditKeygenCmd())
	return cmd
}

func auditExportCmd() *cobra.Command {
	var cf clientFlags
	var after int64
	cmd := &cobra.Command{
		Use:   "export [--after SEQ] > FILE",
		Short: "Write the tenant's audit chain as JSON lines, one event a line, ascending seq, with its signed checkpoints",
		Long: `export writes the tenant's chain as JSON lines: every event after --after, in
seq order; after each event that a signed checkpoint covers, a line
{"checkpoint": {…}}; and last a line {"exported_at": "…"}, the time the
export began. "countersign audit verify FILE --public-key KEY" checks it all.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if after < 0 {
				return &exitErr{exitUsage, "--after: want a seq, an integer from 0"}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			// Taken before any page is read: every checkpoint the export
			// holds was signed no earlier than a checkpoint_every before it.
			began := time.Now()
			w := bufio.NewWriter(cmd.OutOrStdout())
			line := func(raw []byte) error {
				var b bytes.Buffer
				if err := json.Compact(&b, raw); err != nil {
					return fmt.Errorf("the server sent a line that is not JSON: %w", err)
				}
				b.WriteByte('\n')
				_, err := w.Write(b.Bytes())
				return err
			}
			err = c.auditStream(cmd.Context(), after, true, line, func(raw json.RawMessage) error {
				return line(append(append([]byte(`{"checkpoint":`), raw...), '}'))
			})
			if err == nil {
				err = line([]byte(`{"exported_at":"` + auditchain.FormatTime(began) + `"}`))
			}
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	cf.register(cmd)
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().Int64Var(&after, "after", 0, "export the events after this seq (default: the whole chain)")
	return cmd
}

func auditVerifyCmd() *cobra.Command {
	var cf clientFlags
	var after int64
	var prevHash, expect string
	var publicKeys []string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "verify [FILE] [--public-key PEM]…",
		Short: "Check a chain exported to FILE, or the tenant's chain on the server; exit 8 naming the first event that does not hold",
		Long: `verify checks every event's seq, its link to the event before (prev_hash) and
its hash. With FILE it reads an export offline; with no FILE it reads the
tenant's chain from the server (--server, --token). It exits 0 when the chain
holds, printing where it ends; otherwise it exits 8 and prints one line on
stdout, "broken at seq N: <reason>", for the first event that does not hold.

An operator with access to the database can rewrite the whole chain
consistently, or cut it short. With --public-key (the server's checkpoint
key, as "countersign audit keygen" wrote it; repeat it for every key the
chain was signed with), verify also checks the signed checkpoints: each must
be signed by one of the keys and match the chain's hash at its seq, at least
one must, and the newest must be no older than two --checkpoint-every (the
server's audit.checkpoint_every) before the export's exported_at, or, against
the server, before now. A chain rewritten or cut short then fails without a
head kept elsewhere. Without --public-key, checkpoints are passed over.

Or keep the head verify prints somewhere else, and pass it back with
--expect SEQ:HASH: the chain must still reach SEQ with that hash.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return &exitErr{exitUsage, "verify takes at most one file\nUsage: " + cmd.UseLine()}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			v := &auditchain.ExportVerifier{Chain: auditchain.Verifier{After: after, PrevHash: prevHash}, Every: every}
			if after < 0 {
				return &exitErr{exitUsage, "--after: want a seq, an integer from 0"}
			}
			if expect != "" {
				head, err := parseHead(expect)
				if err != nil {
					return err
				}
				v.Chain.Expect = head
			}
			keys, err := readPublicKeys(publicKeys)
			if err != nil {
				return err
			}
			switch {
			case every <= 0:
				return &exitErr{exitUsage, fmt.Sprintf("--checkpoint-every %v: want a positive duration, the server's audit.checkpoint_every", every)}
			case len(keys) == 0 && cmd.Flags().Changed("checkpoint-every"):
				return &exitErr{exitUsage, "--checkpoint-every judges signed checkpoints: pass --public-key"}
			}
			v.Keys = keys
			if len(args) == 1 {
				err = verifyFile(args[0], v.Line)
			} else {
				if after != 0 || prevHash != "" {
					return &exitErr{exitUsage, "--after and --prev-hash check part of an exported file: pass FILE"}
				}
				c, cerr := cf.client()
				if cerr != nil {
					return cerr
				}
				// Freshness is judged against when the reading began.
				v.Now = time.Now()
				err = c.auditStream(cmd.Context(), 0, len(keys) > 0, func(raw []byte) error { return v.Line(raw) }, func(raw json.RawMessage) error { return v.Checkpoint(raw) })
			}
			var res auditchain.ExportResult
			if err == nil {
				res, err = v.Finish()
			}
			var broken *auditchain.BreakError
			if errors.As(err, &broken) {
				fmt.Fprintln(cmd.OutOrStdout(), plaintext.Line(broken.Error()))
				return &exitErr{exitBroken, ""}
			}
			if err != nil {
				return err
			}
			head := res.Head
			if head.Seq == after && v.Chain.Expect == nil && len(keys) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "holds: no events after seq %d\n", after)
				return nil
			}
			signed := ""
			if n := res.Newest; n != nil {
				signed = plaintext.Line(fmt.Sprintf("; signed: %d checkpoints, the newest of seq %d at %s by key %s", res.Checkpoints, n.Seq, n.At, n.KeyID))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "holds: seq %d to %d, head %d:%s%s\n", after+1, head.Seq, head.Seq, head.Hash, signed)
			return nil
		},
	}
	cf.register(cmd)
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().Int64Var(&after, "after", 0, "FILE holds the events after this seq (an export made with --after)")
	cmd.Flags().StringVar(&prevHash, "prev-hash", "", "with --after: the hash of seq AFTER, which the first event must link to")
	cmd.Flags().StringVar(&expect, "expect", "", "SEQ:HASH, a head kept from an earlier verification, which the chain must still hold")
	cmd.Flags().StringArrayVar(&publicKeys, "public-key", nil, "a PEM file of a public key the checkpoints may be signed with (PKIX Ed25519); repeatable")
	cmd.Flags().DurationVar(&every, "checkpoint-every", auditchain.DefaultCheckpointEvery, "with --public-key: the server's audit.checkpoint_every; the newest checkpoint may be two of them old")
	return cmd
}

// readPublicKeys reads the --public-key files.
func readPublicKeys(paths []string) (auditchain.Keys, error) {
	var pubs []ed25519.PublicKey
	for _, p := range paths {
		data, err := readSmallFile(p)
		if err == nil {
			var pub ed25519.PublicKey
			if pub, err = auditchain.ParsePublicKey(data); err == nil {
				pubs = append(pubs, pub)
				continue
			}
		}
		return nil, &exitErr{exitUsage, fmt.Sprintf("--public-key %s: %v", p, err)}
	}
	if len(pubs) == 0 {
		return nil, nil
	}
	return auditchain.NewKeys(pubs...), nil
}

// maxKeyFile bounds a key file: a PEM key is a few hundred bytes.
const maxKeyFile = 64 << 10

// readSmallFile reads a key file of at most maxKeyFile bytes.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	return readKey(f)
}

func readKey(f *os.File) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes: not a key", maxKeyFile)
	}
	return data, nil
}

// unwrapPath drops the *fs.PathError around err, whose message repeats the
// path the caller names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// The files `countersign audit keygen DIR` writes.
const (
	signingKeyFile = "audit-ed25519.pem"
	publicKeyFile  = "audit-ed25519.pub.pem"
)

func auditKeygenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen DIR",
		Short: "Write a checkpoint signing key pair to DIR: " + signingKeyFile + " (private, PKCS#8, mode 0600) and " + publicKeyFile + " (public, PKIX)",
		Long: `keygen makes an Ed25519 key pair for signing the audit chain's checkpoints.
Point the server's audit.signing_key_file at the private key, which only the
server's user may read (serve refuses it otherwise), and give the public key
to whoever verifies: "countersign audit verify --public-key ` + publicKeyFile + `".
DIR is made (mode 0700) if it does not exist; a key already there is never
overwritten.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			priv, pub, err := auditchain.GenerateKey()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return &exitErr{exitUsage, fmt.Sprintf("%s: %v", dir, unwrapPath(err))}
			}
			privPath, pubPath := filepath.Join(dir, signingKeyFile), filepath.Join(dir, publicKeyFile)
			for _, p := range []string{privPath, pubPath} {
				if _, err := os.Lstat(p); err == nil {
					return &exitErr{exitUsage, p + " exists: keygen never overwrites a key"}
				}
			}
			if err := writeNew(privPath, priv, 0o600); err != nil {
				return err
			}
			if err := writeNew(pubPath, pub, 0o644); err != nil {
				return err
			}
			key, err := auditchain.ParsePublicKey(pub)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "private key: %s (mode 0600): set audit.signing_key_file to it\n", plaintext.Line(privPath))
			fmt.Fprintf(out, "public key:  %s: countersign audit verify --public-key %s\n", plaintext.Line(pubPath), plaintext.Line(pubPath))
			fmt.Fprintf(out, "key_id:      %s\n", auditchain.KeyID(key))
			return nil
		},
	}
}

// writeNew writes a file that must not exist yet, with exactly mode perm
// whatever the umask.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return &exitErr{exitUsage, fmt.Sprintf("%s: %v", path, unwrapPath(err))}
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readSigningKey reads audit.signing_key_file: a PKCS#8 PEM Ed25519 key
// that only its owner may read or write. Its errors name the field and the
// file, never the file's contents.
func readSigningKey(path string) (ed25519.PrivateKey, error) {
	fail := func(format string, args ...any) error {
		return &exitErr{exitUsage, fmt.Sprintf("audit.signing_key_file %s: ", path) + fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fail("%v", unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fail("%v", unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fail("not a regular file")
	}
	// A key that others can read is a key they can sign checkpoints with:
	// of a chain they rewrote. (Windows has no such bits to check.)
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && goruntime.GOOS != "windows" {
		return nil, fail("mode %04o lets group or others at it: chmod 600 it (only the server's user may read the key)", perm)
	}
	data, err := readKey(f)
	if err != nil {
		return nil, fail("%v", err)
	}
	key, err := auditchain.ParsePrivateKey(data)
	if err != nil {
		return nil, fail("%v (want an Ed25519 key as PKCS#8 PEM, such as countersign audit keygen writes)", err)
	}
	return key, nil
}

// parseHead reads --expect SEQ:HASH.
func parseHead(s string) (*auditchain.Head, error) {
	seq, hash, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 1 || len(hash) != 64 || strings.ToLower(hash) != hash {
		return nil, &exitErr{exitUsage, fmt.Sprintf("--expect %q: want SEQ:HASH, as verify prints them (a seq from 1, 64 hex digits)", s)}
	}
	return &auditchain.Head{Seq: n, Hash: hash}, nil
}

// verifyFile feeds the lines of an export to line; blank lines are
// skipped.
func verifyFile(path string, line func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return &exitErr{exitUsage, err.Error()}
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		l, err := readLine(r)
		if len(bytes.TrimSpace(l)) > 0 {
			if verr := line(l); verr != nil {
				return verr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// readLine reads one line of at most maxAuditLine bytes, without its end.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxAuditLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxAuditLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// auditPages reads the tenant's chain after seq after, page by page, and
// hands each event, as the server sent it, to fn.
func (c *client) auditPages(ctx context.Context, after int64, fn func(json.RawMessage) error) error {
	for {
		var page struct {
			Events []json.RawMessage `json:"events"`
			Next   *int64            `json:"next"`
		}
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"1000"}}
		if _, err := c.do(ctx, "GET", "/v1/audit", q, nil, &page); err != nil {
			return err
		}
		for _, raw := range page.Events {
			if err := fn(raw); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		if *page.Next <= after {
			return fmt.Errorf("the server's next page (after %d) does not move past %d", *page.Next, after)
		}
		after = *page.Next
	}
}

// auditStream reads the tenant's chain after seq after from the server and
// hands each event to event; with checkpoints, it also reads the tenant's
// signed checkpoints and hands each to checkpoint right after the event it
// covers, as an export holds them. Checkpoints signed while the chain was
// read cover events read on; those that cover events the chain does not
// hold (it was cut short) are handed on last, for verification to name.
func (c *client) auditStream(ctx context.Context, after int64, checkpoints bool, event func([]byte) error, checkpoint func(json.RawMessage) error) error {
	cps := &checkpointPages{c: c, after: after}
	last := after
	for pass := 0; ; pass++ {
		read := 0
		err := c.auditPages(ctx, last, func(raw json.RawMessage) error {
			var e struct {
				Seq *int64 `json:"seq"`
			}
			if err := json.Unmarshal(raw, &e); err != nil || e.Seq == nil {
				// Verification names it; the stream cannot place it.
				return event(raw)
			}
			read++
			if err := event(raw); err != nil {
				return err
			}
			last = *e.Seq
			if !checkpoints {
				return nil
			}
			return cps.through(ctx, last, checkpoint)
		})
		if err != nil || !checkpoints {
			return err
		}
		if pass > 0 && read == 0 {
			// Checkpoints of seqs the chain does not reach, read again:
			// they are handed on, and verification names the first.
			return cps.through(ctx, math.MaxInt64, checkpoint)
		}
		beyond, err := cps.refresh(ctx, last, checkpoint)
		if err != nil || !beyond {
			return err
		}
	}
}

// checkpointPages reads a tenant's checkpoints ahead of the events they
// cover, a page at a time.
type checkpointPages struct {
	c     *client
	after int64 // the seq the next page follows
	buf   []checkpointLine
	done  bool // the last page read was the last
}

type checkpointLine struct {
	seq int64
	raw json.RawMessage
}

// through hands every checkpoint of seq up to seq to fn, reading pages as
// it needs them.
func (p *checkpointPages) through(ctx context.Context, seq int64, fn func(json.RawMessage) error) error {
	for {
		for len(p.buf) > 0 && p.buf[0].seq <= seq {
			if err := fn(p.buf[0].raw); err != nil {
				return err
			}
			p.buf = p.buf[1:]
		}
		if len(p.buf) > 0 || p.done {
			return nil
		}
		if err := p.page(ctx); err != nil {
			return err
		}
	}
}

// refresh reads the checkpoints signed since the last page, once the events
// are read through seq last: those of seqs before last came too late to
// follow their events and are left out; those of last are handed to fn. It
// reports whether any of a later seq is left.
func (p *checkpointPages) refresh(ctx context.Context, last int64, fn func(json.RawMessage) error) (bool, error) {
	for p.done = false; !p.done; {
		if err := p.page(ctx); err != nil {
			return false, err
		}
	}
	p.buf = slices.DeleteFunc(p.buf, func(l checkpointLine) bool { return l.seq < last })
	if err := p.through(ctx, last, fn); err != nil {
		return false, err
	}
	return len(p.buf) > 0, nil
}

// page reads the next page of checkpoints into buf.
func (p *checkpointPages) page(ctx context.Context) error {
	var page struct {
		Checkpoints []json.RawMessage `json:"checkpoints"`
		Next        *int64            `json:"next"`
	}
	q := url.Values{"after": {strconv.FormatInt(p.after, 10)}, "limit": {"1000"}}
	if _, err := p.c.do(ctx, "GET", "/v1/audit/checkpoints", q, nil, &page); err != nil {
		return err
	}
	for _, raw := range page.Checkpoints {
		var c struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Seq <= p.after {
			return fmt.Errorf("the server sent a checkpoint out of order or without a seq after %d", p.after)
		}
		p.buf = append(p.buf, checkpointLine{seq: c.Seq, raw: raw})
		p.after = c.Seq
	}
	if page.Next == nil {
		p.done = true
	} else if *page.Next < p.after {
		return fmt.Errorf("the server's next page of checkpoints (after %d) goes back before %d", *page.Next, p.after)
	}
	return nil
}
