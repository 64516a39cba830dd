// The text/event-stream parser (the WHATWG "event stream interpretation"),
// fed decoded text in chunks of any size.

/** One dispatched frame of an event stream. */
export interface SSEFrame {
  /** The frame's event name; "message" when it named none. */
  event: string;
  /** The data lines joined with "\n". */
  data: string;
  /** The frame's own id field, or undefined when it had none. */
  id: string | undefined;
}

/**
 * SSEParser turns event-stream text into frames. Lines end in LF, CRLF or
 * CR, even across chunks; comments and unknown fields are ignored; a frame
 * is dispatched at its blank line only, so text cut off mid-frame (a
 * dropped connection) yields nothing of it. Unlike a browser's
 * EventSource, an id is reported only with the frame that carried it: a
 * client resuming from the last dispatched id never skips a frame it did
 * not see.
 */
export class SSEParser {
  private buf = "";
  private sawCR = false;
  private started = false;
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  private hasData = false;
  /** The last valid retry field, in milliseconds. */
  retry: number | undefined;

  /** push parses text and returns the frames it completed. */
  push(text: string): SSEFrame[] {
    const out: SSEFrame[] = [];
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 10 /* \n */) {
        if (this.sawCR) {
          // The LF of a CRLF whose CR ended the line already.
          this.sawCR = false;
          start = i + 1;
          continue;
        }
        this.line(this.buf + text.slice(start, i), out);
        this.buf = "";
        start = i + 1;
      } else if (c === 13 /* \r */) {
        this.sawCR = true;
        this.line(this.buf + text.slice(start, i), out);
        this.buf = "";
        start = i + 1;
      } else {
        this.sawCR = false;
      }
    }
    this.buf += text.slice(start);
    return out;
  }

  private line(line: string, out: SSEFrame[]): void {
    if (line === "") {
      if (this.hasData) {
        out.push({ event: this.event || "message", data: this.data.join("\n"), id: this.id });
      }
      this.data = [];
      this.event = "";
      this.id = undefined;
      this.hasData = false;
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    let field = line;
    let value = "";
    if (colon >= 0) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    switch (field) {
      case "data":
        this.data.push(value);
        this.hasData = true;
        break;
      case "event":
        this.event = value;
        break;
      case "id":
        if (!value.includes("\u0000")) this.id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
    }
  }
}
