package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/server"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// The chat command is a person's side of a conversation with an agent: it
// posts a message to a thread (POST /v1/threads/{id}/messages) and prints
// the run the message starts as the server streams it, as AG-UI events.

// chatIdleTimeout is how long a stream may stay silent before the client
// stops following it. The server sends a heartbeat every 15 seconds while a
// run works, so silence this long means the connection is gone.
const chatIdleTimeout = 90 * time.Second

// maxChatLine bounds one line of standard input: a message is at most 32 KiB,
// and a longer one is the server's to refuse, naming the field.
const maxChatLine = 1 << 20

// maxShownArgs bounds the arguments of one tool call the client keeps to
// print; the rest is cut, as a long input would be on the line anyway.
const maxShownArgs = 64 << 10

// maxChunkBytes bounds the raw text of one server-sent event (its field
// names, comments and line ends with its data), so that a stream without
// blank lines cannot fill memory. event.DecodeFrames holds the data itself
// to event.MaxFrameBytes.
const maxChunkBytes = event.MaxFrameBytes + 64<<10

func chatCmd() *cobra.Command {
	var f clientFlags
	var agent string
	cmd := &cobra.Command{
		Use:   "chat THREAD [MESSAGE]",
		Short: "Send a message to a thread and print the run as it streams",
		Long: `Send MESSAGE to THREAD and print the agent's run as it streams: the
assistant's text, each tool call (action and input) and each tool result on
a line of its own, and, when a call waits for a human, "waiting for
approval: …" with the proposal's id. A message that is a decision ("yes",
"no", "yes #prp_…") decides the pending proposal it names instead of
starting a run, and the reply is printed.

Without MESSAGE, and with a terminal on standard input, chat is
interactive: it prompts "> ", sends each line, and before each prompt shows
the thread's pending proposals you can see (answer "yes" or "no") and how
the ones it showed were settled (an empty line just looks again). Ctrl-D
ends it. Without MESSAGE and without a terminal, each non-blank line of
standard input is sent as one message, in turn, each printed after "> "
above its answer, stopping at the first that fails:

  printf 'refund 40 EUR to c_9\n' | countersign chat t1

--json prints the server's JSON instead: each event of a run on a line of
its own, or the answer to a decision or a stored message.

Exit codes: 0 when the run finished or waits for approval; 1 when the run
failed (RUN_ERROR) or the stream broke; 7 when the thread is busy with
another run (THREAD_BUSY) or a decision did not apply; and the codes every
client command uses for the server's other refusals.`,
		Args: chatArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			s := &chatSession{c: c, thread: args[0], agent: agent, json: f.json,
				out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), watched: map[string]string{}}
			if len(args) == 2 {
				return s.send(cmd.Context(), args[1])
			}
			in := cmd.InOrStdin()
			if file, ok := in.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
				return s.converse(cmd.Context(), in)
			}
			return s.script(cmd.Context(), in)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "the agent to run (default: the server's default_agent)")
	return cmd
}

// chatArgs takes THREAD and an optional MESSAGE, with usage errors as exit
// code 2.
func chatArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return &exitErr{exitUsage, "chat needs a THREAD\nUsage: " + cmd.UseLine()}
	case len(args) > 2:
		return &exitErr{exitUsage, fmt.Sprintf("chat takes THREAD and one MESSAGE, got %d arguments: quote the message\nUsage: %s", len(args), cmd.UseLine())}
	case args[0] == "":
		return &exitErr{exitUsage, "THREAD is empty\nUsage: " + cmd.UseLine()}
	}
	return nil
}

// chatSession is one person's conversation in one thread.
type chatSession struct {
	c      *client
	thread string
	agent  string
	json   bool
	out    io.Writer
	errOut io.Writer
	// watched are the proposals the interactive session has shown, by id,
	// with the status it showed: it tells how each goes on until it settles.
	watched map[string]string
	// shownPending is the ids of the pending proposals last listed, so the
	// list is printed again only when it changes.
	shownPending string
}

// messageBody is the chat route's request.
type messageBody struct {
	Text  string `json:"text"`
	Agent string `json:"agent,omitempty"`
}

// chatAnswer is the chat route's JSON answer: a text decision's, a stored
// message's, or a finished run's when the server did not stream it.
type chatAnswer struct {
	ThreadID         string            `json:"thread_id"`
	Text             string            `json:"text"`
	ProposalDecision *decisionAnswer   `json:"proposal_decision"`
	Pending          []string          `json:"pending"`
	Message          *server.Message   `json:"message"`
	Run              *server.Run       `json:"run"`
	Messages         []*server.Message `json:"messages"`
}

// errIdle is the cause of a stream given up for silence.
var errIdle = fmt.Errorf("the server sent nothing, not even a heartbeat, for %s", chatIdleTimeout)

// send posts one message and prints what it started or decided.
func (s *chatSession) send(ctx context.Context, text string) error {
	path := "/v1/threads/" + url.PathEscape(s.thread) + "/messages"
	body := messageBody{Text: text, Agent: s.agent}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(chatIdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()

	resp, err := s.post(ctx, path, body)
	if err == nil && resp.StatusCode == http.StatusOK && isEventStream(resp.Header) {
		defer resp.Body.Close()
		return s.follow(ctx, &idleReader{r: resp.Body, idle: idle})
	}
	if ctx.Err() != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return stopped(ctx, "the answer to your message", s.thread)
	}
	// Any other answer (a decision, a stored message, an error, no answer
	// at all) is read by client.do, replayed to it, so that it means here
	// exactly what it means to every other command.
	var raw json.RawMessage
	if _, err := s.c.replaying(resp, err).do(ctx, "POST", path, nil, body, &raw); err != nil {
		return err
	}
	return s.answer(raw)
}

// post sends the message asking for the run as a stream. The stream lasts
// as long as the run: it has no overall deadline (client.http has one), only
// the idle one.
func (s *chatSession) post(ctx context.Context, path string, body messageBody) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", s.c.base.JoinPath(path).String(), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.c.token)
	req.Header.Set("Countersign-Via", "cli")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return (&http.Client{Transport: s.c.http.Transport}).Do(req)
}

// replayed answers a request with a response already received, or with the
// error of sending it.
type replayed struct {
	resp *http.Response
	err  error
}

func (r *replayed) RoundTrip(*http.Request) (*http.Response, error) {
	if r.err != nil {
		// client.do's http.Client names the request again.
		if ue, ok := errors.AsType[*url.Error](r.err); ok {
			return nil, ue.Err
		}
		return nil, r.err
	}
	if r.resp == nil {
		return nil, errors.New("no answer")
	}
	resp := r.resp
	r.resp = nil // one answer, read once
	return resp, nil
}

// replaying is c answering its next request with resp (or err): client.do
// then reads an answer this command received itself.
func (c *client) replaying(resp *http.Response, err error) *client {
	rc := *c
	rc.http = &http.Client{Transport: &replayed{resp: resp, err: err},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &rc
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// idleReader restarts the idle timer whenever the stream delivers bytes,
// heartbeats included.
type idleReader struct {
	r    io.Reader
	idle *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.idle.Reset(chatIdleTimeout)
	}
	return n, err
}

// stopped is the error of a request or stream cut short by the user
// (Ctrl-C) or by silence; what was asked goes on on the server.
func stopped(ctx context.Context, what, thread string) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, errIdle) {
		return &exitErr{exitError, fmt.Sprintf("stopped waiting for %s: %s; GET /v1/threads/%s shows how it went on",
			what, cause, plaintext.Line(url.PathEscape(thread)))}
	}
	return &exitErr{exitError, fmt.Sprintf("interrupted: stopped waiting for %s; it goes on on the server (GET /v1/threads/%s)",
		what, plaintext.Line(url.PathEscape(thread)))}
}

// answer prints the chat route's JSON answer.
func (s *chatSession) answer(raw json.RawMessage) error {
	var ans chatAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return fmt.Errorf("decode the server's answer: %s", plaintext.Line(err.Error()))
	}
	if s.json {
		if err := printJSON(s.out, raw); err != nil {
			return err
		}
	}
	switch {
	case ans.ProposalDecision != nil:
		d := ans.ProposalDecision
		if d.Proposal != nil {
			if _, ok := s.watched[d.Proposal.ID]; ok {
				s.watched[d.Proposal.ID] = d.Proposal.Status // printed here, not again
			}
		}
		if !s.json {
			status := ""
			if d.Proposal != nil {
				status = fmt.Sprintf(" (proposal %s is now %s)", d.Proposal.ID, d.Proposal.Status)
			}
			fmt.Fprintln(s.out, plaintext.Line(ans.Text+status))
		}
		if d.Status != "applied" && d.Status != "unchanged" {
			return &exitErr{exitRefused, plaintext.Line(describeAnswer(d.Status))}
		}
	case ans.Pending != nil:
		if !s.json {
			fmt.Fprintln(s.out, plaintext.Line(ans.Text))
		}
		return &exitErr{exitRefused, plaintext.Line("nothing decided: " + strings.Join(ans.Pending, ", ") +
			" are pending; add #id to say which")}
	case ans.Message != nil && ans.Run == nil:
		if !s.json {
			fmt.Fprintf(s.out, "message %s stored in thread %s; no agent runs here: an external agent reads it\n",
				plaintext.Line(ans.Message.ID), plaintext.Line(s.thread))
		}
	case ans.Run != nil && !s.json:
		// A server that did not stream answers once the run has finished or
		// parked, with its messages, the user's first.
		p := &runPrinter{out: s.out}
		for _, m := range ans.Messages {
			p.message(m)
		}
		fmt.Fprintf(s.out, "run %s %s\n", plaintext.Line(ans.Run.ID), plaintext.Line(ans.Run.Status))
		if ans.Run.Status == "failed" {
			return &exitErr{exitError, "run failed: " + plaintext.Line(ans.Run.Error)}
		}
	}
	return nil
}

// follow reads a run's event stream to its end and prints it.
func (s *chatSession) follow(ctx context.Context, body io.Reader) error {
	var (
		v     event.Verifier
		p     = &runPrinter{out: s.out, args: map[string]*toolCall{}}
		fr    = newFrameReader(body)
		runID string
		n     int
	)
	what := func() string {
		if runID == "" {
			return "the run"
		}
		return "run " + plaintext.Line(runID)
	}
	for {
		frames, err := fr.next()
		for _, data := range frames {
			e, perr := event.Parse(data)
			if perr != nil {
				p.endLine()
				return &exitErr{exitError, fmt.Sprintf("the server's event %d is not one this client reads: %s", n, plaintext.Line(perr.Error()))}
			}
			if verr := v.Check(e); verr != nil {
				p.endLine()
				return &exitErr{exitError, "the server's event stream breaks AG-UI's rules: " + plaintext.Line(verr.Error())}
			}
			n++
			if rs, ok := e.(*event.RunStarted); ok {
				runID = rs.RunID
			}
			if s.json {
				if err := printEventJSON(s.out, data); err != nil {
					return err
				}
			} else {
				p.event(e)
			}
			switch e := e.(type) {
			case *event.RunFinished:
				return nil
			case *event.RunError:
				code := ""
				if e.Code != "" {
					code = " (" + plaintext.Line(e.Code) + ")"
				}
				return &exitErr{exitError, fmt.Sprintf("%s failed%s: %s", what(), code, plaintext.Line(e.Message))}
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			p.endLine()
			return stopped(ctx, what(), s.thread)
		case errors.Is(err, io.EOF):
			p.endLine()
			return &exitErr{exitError, fmt.Sprintf("the event stream ended before %s did; GET /v1/threads/%s shows how it went on",
				what(), plaintext.Line(url.PathEscape(s.thread)))}
		default:
			p.endLine()
			return &exitErr{exitError, fmt.Sprintf("the event stream of %s broke: %s", what(), plaintext.Line(err.Error()))}
		}
	}
}

// printEventJSON prints one event's JSON on one line.
func printEventJSON(w io.Writer, data []byte) error {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(escapeJSON(b.Bytes()))
	return err
}

// frameReader hands over a server-sent event stream one event at a time, as
// it arrives. It only finds where an event ends (a blank line) and passes
// the event's text to event.DecodeFrames, which reads its fields: the SSE
// grammar lives there alone. A line ends with LF or CRLF here; an event
// whose lines end with a lone CR is handed over with the next one that ends
// otherwise, or at the end of the stream, which DecodeFrames splits as the
// standard says.
type frameReader struct {
	r       *bufio.Reader
	n       int  // events handed over so far
	started bool // a chunk was decoded: the next is not the stream's start
	eof     bool
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the data of the events up to the next blank line; at the
// end of the stream, the data of what is left and io.EOF. An error comes
// with the events before it.
func (f *frameReader) next() ([][]byte, error) {
	if f.eof {
		return nil, io.EOF
	}
	var chunk []byte
	lineStart := 0
	for {
		piece, err := f.r.ReadSlice('\n')
		if len(chunk)+len(piece) > maxChunkBytes {
			return nil, fmt.Errorf("event %d: over %d bytes without an end", f.n, maxChunkBytes)
		}
		chunk = append(chunk, piece...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the line goes on
		case errors.Is(err, io.EOF):
			f.eof = true
			frames, derr := f.decode(chunk)
			if derr != nil {
				return frames, derr
			}
			return frames, io.EOF
		case err != nil:
			return nil, err
		}
		if line := chunk[lineStart:]; string(line) == "\n" || string(line) == "\r\n" {
			return f.decode(chunk)
		}
		lineStart = len(chunk)
	}
}

func (f *frameReader) decode(chunk []byte) ([][]byte, error) {
	if f.started {
		// DecodeFrames drops a byte order mark that opens its input, as the
		// standard says of a stream's first line; a later chunk's is text.
		// A blank line first, which dispatches nothing, keeps it.
		chunk = append([]byte("\n"), chunk...)
	}
	f.started = true
	frames, err := event.DecodeFrames(bytes.NewReader(chunk))
	base := f.n
	f.n += len(frames)
	switch {
	case err == nil:
	case base == 0:
		return frames, err
	default:
		// DecodeFrames counts the chunk's events, from 0.
		return frames, fmt.Errorf("%d events in: %w", base, err)
	}
	return frames, nil
}

// runPrinter prints a run's events for a person: the assistant's text as
// it arrives, and each tool call, tool result and interrupt on a line.
//
// The assistant's text is the model's, and a model can be talked into
// writing anything, such as a line that reads "waiting for approval: …" or
// "tool result: succeeded". So its first line follows "assistant: " and
// every further line is indented: only the client's own lines begin at the
// margin with their words.
type runPrinter struct {
	out io.Writer
	// midLine: the last text printed did not end a line.
	midLine bool
	// label is the speaker of an open text message whose first line is not
	// printed yet; "" once it is.
	label string
	// args are the open tool calls.
	args map[string]*toolCall
}

type toolCall struct {
	name string
	args strings.Builder
	cut  bool
}

func (p *runPrinter) print(s string) {
	if s == "" {
		return
	}
	fmt.Fprint(p.out, s)
	p.midLine = !strings.HasSuffix(s, "\n")
}

// line prints s on a line of its own.
func (p *runPrinter) line(s string) {
	p.endLine()
	p.print(s + "\n")
}

func (p *runPrinter) endLine() {
	if p.midLine {
		p.print("\n")
	}
}

// textStart opens a text message by role (empty: the assistant).
func (p *runPrinter) textStart(role string) {
	p.endLine()
	p.label = cmp.Or(role, event.RoleAssistant)
}

// text prints a piece of an open text message, escaped, its lines after
// the speaker's label or indented.
func (p *runPrinter) text(delta string) {
	for i, part := range strings.Split(delta, "\n") {
		if i > 0 {
			p.print("\n")
		}
		if part == "" {
			continue
		}
		if !p.midLine {
			if p.label != "" {
				p.print(plaintext.Line(p.label) + ": ")
				p.label = ""
			} else {
				p.print("  ")
			}
		}
		p.print(plaintext.Line(part))
	}
}

func (p *runPrinter) event(e event.Event) {
	switch e := e.(type) {
	case *event.TextMessageStart:
		p.textStart(e.Role)
	case *event.TextMessageContent:
		p.text(e.Delta)
	case *event.TextMessageEnd:
		p.endLine()
		p.label = ""
	case *event.ToolCallStart:
		p.args[e.ToolCallID] = &toolCall{name: e.ToolCallName}
	case *event.ToolCallArgs:
		if c := p.args[e.ToolCallID]; c != nil {
			if c.args.Len()+len(e.Delta) > maxShownArgs {
				c.cut = true
				return
			}
			c.args.WriteString(e.Delta)
		}
	case *event.ToolCallEnd:
		if c := p.args[e.ToolCallID]; c != nil {
			delete(p.args, e.ToolCallID)
			args := c.args.String()
			if c.cut {
				args += "…"
			}
			p.toolCall(c.name, []byte(args))
		}
	case *event.ToolCallResult:
		p.toolResult([]byte(e.Content))
	case *event.RunFinished:
		if e.Outcome == nil {
			return
		}
		switch e.Outcome.Type {
		case event.OutcomeInterrupt:
			for _, in := range e.Outcome.Interrupts {
				title := in.Message
				if title == "" {
					title = in.Reason
				}
				p.line(plaintext.Line(fmt.Sprintf("waiting for approval: %s (proposal %s, answer yes/no)", title, in.ID)))
			}
		case event.OutcomeCancelled:
			p.line("the run was cancelled")
		}
	case *event.RunError:
		p.endLine()
	}
}

// toolCall prints a tool call: its action and its input, compact.
func (p *runPrinter) toolCall(action string, input []byte) {
	var b bytes.Buffer
	if json.Compact(&b, input) == nil {
		input = b.Bytes()
	}
	p.line("tool call: " + plaintext.Line(action+" "+truncate(string(input), 300)))
}

// toolResult prints a tool result: the status and summary of the call's
// answer, and the proposal or receipt it names.
func (p *runPrinter) toolResult(content []byte) {
	var r struct {
		Status     string `json:"status"`
		Summary    string `json:"summary"`
		Error      string `json:"error"`
		ProposalID string `json:"proposal_id"`
		Receipt    string `json:"receipt"`
	}
	if json.Unmarshal(content, &r) != nil || r.Status == "" {
		p.line("tool result: " + plaintext.Line(truncate(string(content), 300)))
		return
	}
	s := r.Status
	if what := cmp.Or(r.Summary, r.Error); what != "" {
		s += ": " + what
	}
	var refs []string
	if r.ProposalID != "" {
		refs = append(refs, "proposal "+r.ProposalID)
	}
	if r.Receipt != "" && !strings.Contains(s, r.Receipt) {
		refs = append(refs, "receipt "+r.Receipt)
	}
	if len(refs) > 0 {
		s += " (" + strings.Join(refs, ", ") + ")"
	}
	p.line("tool result: " + plaintext.Line(truncate(s, 300)))
}

// message prints one message of a run answered as JSON.
func (p *runPrinter) message(m *server.Message) {
	switch m.Role {
	case "assistant":
		if m.Text != "" {
			p.textStart(event.RoleAssistant)
			p.text(m.Text)
			p.endLine()
		}
		for _, c := range m.ToolCalls {
			p.toolCall(c.Action, c.Input)
		}
	case "tool":
		content := []byte(m.Result)
		if len(content) == 0 {
			content = []byte(m.Text)
		}
		p.toolResult(content)
	}
}

// script sends each non-blank line of in as a message, in turn, and stops
// at the first that fails. Each is printed, after "> ", above its answer.
func (s *chatSession) script(ctx context.Context, in io.Reader) error {
	lines := readLines(ctx, in)
	for {
		select {
		case <-ctx.Done():
			return &exitErr{exitError, "interrupted"}
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if l.err != nil {
				return l.err
			}
			if strings.TrimSpace(l.text) == "" {
				continue
			}
			if !s.json {
				// A transcript: each message above what it started.
				fmt.Fprintln(s.out, "> "+plaintext.Line(l.text))
			}
			if err := s.send(ctx, l.text); err != nil {
				return err
			}
		}
	}
}

// converse is the interactive session: before each prompt the pending
// proposals, then a line read and sent. An error is printed and the
// session goes on; Ctrl-D (or Ctrl-C at the prompt) ends it.
func (s *chatSession) converse(ctx context.Context, in io.Reader) error {
	if !s.json {
		fmt.Fprintf(s.out, "thread %s: type a message; \"yes\" or \"no\" answers a pending approval; Ctrl-D ends\n", plaintext.Line(s.thread))
	}
	lines := readLines(ctx, in)
	for {
		if !s.json {
			if err := s.showProposals(ctx); err != nil {
				s.report(err)
			}
		}
		fmt.Fprint(s.out, "> ")
		var l inputLine
		var ok bool
		select {
		case <-ctx.Done():
			fmt.Fprintln(s.out)
			return nil
		case l, ok = <-lines:
		}
		switch {
		case !ok:
			fmt.Fprintln(s.out)
			return nil
		case l.err != nil:
			return l.err
		case strings.TrimSpace(l.text) == "":
			continue
		}
		if err := s.send(ctx, l.text); err != nil {
			if ctx.Err() != nil {
				return err
			}
			s.report(err)
		}
	}
}

// report prints an error the way main does, and the session goes on.
func (s *chatSession) report(err error) {
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(s.errOut, "countersign:", msg)
	}
}

type inputLine struct {
	text string
	err  error
}

// readLines reads in line by line on a goroutine of its own, so that the
// session can stop while a read blocks (Ctrl-C on a terminal). The
// goroutine ends at the end of in, at an error, or once ctx is done and it
// would deliver the next line.
func readLines(ctx context.Context, in io.Reader) <-chan inputLine {
	lines := make(chan inputLine)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(nil, maxChatLine)
		for sc.Scan() {
			select {
			case lines <- inputLine{text: strings.TrimSuffix(sc.Text(), "\r")}:
			case <-ctx.Done():
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("a line of standard input is over %d bytes", maxChatLine)
			}
			select {
			case lines <- inputLine{err: &exitErr{exitError, "read standard input: " + err.Error()}}:
			case <-ctx.Done():
			}
		}
	}()
	return lines
}

// showProposals prints, when it changed, the thread's pending proposals the
// caller can see, with how to answer them, and how the proposals shown
// before went on since.
func (s *chatSession) showProposals(ctx context.Context) error {
	var page struct {
		Proposals []*server.Proposal `json:"proposals"`
	}
	q := url.Values{"status": {"pending"}, "thread_id": {s.thread}}
	if _, err := s.c.do(ctx, "GET", "/v1/proposals", q, nil, &page); err != nil {
		return err
	}
	pending := map[string]bool{}
	for _, p := range page.Proposals {
		pending[p.ID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(s.watched)) {
		if pending[id] {
			continue
		}
		var p server.Proposal
		if _, err := s.c.do(ctx, "GET", "/v1/proposals/"+url.PathEscape(id), nil, nil, &p); err != nil {
			return err
		}
		if p.Status == s.watched[id] {
			continue
		}
		line := fmt.Sprintf("proposal %s (%s) is now %s", p.ID, proposalTitle(&p), p.Status)
		if p.Outcome != nil && p.Outcome.Summary != "" {
			line += ": " + p.Outcome.Summary
		}
		fmt.Fprintln(s.out, plaintext.Line(line))
		s.watched[id] = p.Status
		if settled(p.Status) {
			delete(s.watched, id)
		}
	}
	ids := make([]string, 0, len(page.Proposals))
	for _, p := range page.Proposals {
		ids = append(ids, p.ID)
		s.watched[p.ID] = p.Status
	}
	key := strings.Join(ids, " ")
	if key == s.shownPending {
		return nil
	}
	s.shownPending = key
	for _, p := range page.Proposals {
		answer := "answer yes or no"
		if len(page.Proposals) > 1 {
			answer = fmt.Sprintf("answer yes #%s or no #%s", p.ID, p.ID)
		}
		fmt.Fprintln(s.out, plaintext.Line(fmt.Sprintf("pending approval: %s (proposal %s, approvers %s, expires %s; %s)",
			proposalTitle(p), p.ID, strings.Join(p.Approvers, ", "), p.ExpiresAt.Local().Format(time.DateTime), answer)))
	}
	return nil
}

func proposalTitle(p *server.Proposal) string {
	if p.Confirmation.Title != "" {
		return p.Confirmation.Title
	}
	return p.Preview
}

// settled reports whether a proposal's status is one it does not leave.
func settled(status string) bool {
	switch status {
	case "succeeded", "failed", "rejected", "expired", "superseded", "cancelled":
		return true
	}
	return false
}
