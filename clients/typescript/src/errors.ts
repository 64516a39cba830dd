// CountersignError: what an error answer of the API says, typed.

import type { components } from "./schema.js";

/** A stable error code of the API (UPPER_SNAKE), or NETWORK/INVALID_RESPONSE for failures the client saw itself. */
export type ErrorCode = components["schemas"]["ErrorObject"]["code"] | "INVALID_RESPONSE" | (string & {});

/**
 * An error answer of the API: its HTTP status and the body's
 * `{"error": {"code", "message", "details"}}`. An answer that is not the
 * API's error shape (a proxy's HTML page) still becomes one, with code
 * INVALID_RESPONSE and the status it came with.
 */
export class CountersignError extends Error {
  override readonly name = "CountersignError";
  /** The HTTP status (400, 404, 409, 503, …). */
  readonly status: number;
  /** The API's error code: INVALID_INPUT, NOT_FOUND, INVALID_STATE, … */
  readonly code: ErrorCode;
  /** The body's details: the problems of a bad body or input, or an INVALID_STATE's status. */
  readonly details: unknown;
  /** Seconds the server asked to wait (Retry-After), when it said. */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: ErrorCode, message: string, details?: unknown, retryAfter?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter;
  }

  /** fromResponse reads an error answer; it never throws. */
  static async fromResponse(res: Response): Promise<CountersignError> {
    const retryAfter = parseRetryAfter(res.headers.get("Retry-After"));
    let text = "";
    try {
      text = await res.text();
    } catch {
      // The body broke off: the status alone is the answer.
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const err = isObject(body) && isObject(body.error) ? body.error : undefined;
    if (err && typeof err.code === "string" && typeof err.message === "string") {
      return new CountersignError(res.status, err.code, err.message, err.details, retryAfter);
    }
    const snippet = text.length > 200 ? text.slice(0, 200) + "…" : text;
    return new CountersignError(
      res.status,
      "INVALID_RESPONSE",
      `HTTP ${res.status}${snippet ? ": " + snippet : ""}`,
      undefined,
      retryAfter,
    );
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** parseRetryAfter reads Retry-After's delay-seconds form; anything else is undefined. */
export function parseRetryAfter(v: string | null): number | undefined {
  if (v === null || !/^\s*\d+\s*$/.test(v)) return undefined;
  return Number(v.trim());
}
