package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

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
	cmd := &cobra.Command{Use: "audit", Short: "Export and verify the audit log's hash chain (operators)"}
	cmd.AddCommand(auditExportCmd(), auditVerifyCmd())
	return cmd
}

func auditExportCmd() *cobra.Command {
	var cf clientFlags
	var after int64
	cmd := &cobra.Command{
		Use:   "export [--after SEQ] > FILE",
		Short: "Write the tenant's audit chain as JSON lines, one event a line, ascending seq",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if after < 0 {
				return &exitErr{exitUsage, "--after: want a seq, an integer from 0"}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			err = c.auditPages(cmd.Context(), after, func(raw json.RawMessage) error {
				var line bytes.Buffer
				if err := json.Compact(&line, raw); err != nil {
					return fmt.Errorf("the server sent an event that is not JSON: %w", err)
				}
				line.WriteByte('\n')
				_, err := w.Write(line.Bytes())
				return err
			})
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
	cmd := &cobra.Command{
		Use:   "verify [FILE]",
		Short: "Check a chain exported to FILE, or the tenant's chain on the server; exit 8 naming the first event that does not hold",
		Long: `verify checks every event's seq, its link to the event before (prev_hash) and
its hash. With FILE it reads an export offline; with no FILE it reads the
tenant's chain from the server (--server, --token). It exits 0 when the chain
holds, printing where it ends; otherwise it exits 8 and prints one line on
stdout, "broken at seq N: <reason>", for the first event that does not hold.

An operator with access to the database can rewrite the whole chain
consistently. Keep the head verify prints somewhere else, and pass it back
with --expect SEQ:HASH: the chain must still reach SEQ with that hash.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return &exitErr{exitUsage, "verify takes at most one file\nUsage: " + cmd.UseLine()}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			v := &auditchain.Verifier{After: after, PrevHash: prevHash}
			if after < 0 {
				return &exitErr{exitUsage, "--after: want a seq, an integer from 0"}
			}
			if expect != "" {
				head, err := parseHead(expect)
				if err != nil {
					return err
				}
				v.Expect = head
			}
			var err error
			if len(args) == 1 {
				err = verifyFile(args[0], v)
			} else {
				if after != 0 || prevHash != "" {
					return &exitErr{exitUsage, "--after and --prev-hash check part of an exported file: pass FILE"}
				}
				c, cerr := cf.client()
				if cerr != nil {
					return cerr
				}
				err = c.auditPages(cmd.Context(), 0, func(raw json.RawMessage) error { return v.Line(raw) })
			}
			var head auditchain.Head
			if err == nil {
				head, err = v.Finish()
			}
			var broken *auditchain.BreakError
			if errors.As(err, &broken) {
				fmt.Fprintln(cmd.OutOrStdout(), plaintext.Line(broken.Error()))
				return &exitErr{exitBroken, ""}
			}
			if err != nil {
				return err
			}
			if head.Seq == after && v.Expect == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "holds: no events after seq %d\n", after)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "holds: seq %d to %d, head %d:%s\n", after+1, head.Seq, head.Seq, head.Hash)
			return nil
		},
	}
	cf.register(cmd)
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().Int64Var(&after, "after", 0, "FILE holds the events after this seq (an export made with --after)")
	cmd.Flags().StringVar(&prevHash, "prev-hash", "", "with --after: the hash of seq AFTER, which the first event must link to")
	cmd.Flags().StringVar(&expect, "expect", "", "SEQ:HASH, a head kept from an earlier verification, which the chain must still hold")
	return cmd
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

// verifyFile feeds the lines of an export to v; blank lines are skipped.
func verifyFile(path string, v *auditchain.Verifier) error {
	f, err := os.Open(path)
	if err != nil {
		return &exitErr{exitUsage, err.Error()}
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			if verr := v.Line(line); verr != nil {
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
