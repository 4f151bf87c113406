import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/** The environment variable that sets the server's token instead of the token file. */
export const TOKEN_VARIABLE = "HOLDFAST_TOKEN";
/** The browser session cookie (HttpOnly, SameSite=Strict). */
export const SESSION_COOKIE = "holdfast_session";
/** The header a script sends the CSRF token in (forms send the `_csrf` field). */
export const CSRF_HEADER = "x-csrf-token";

const MIN_TOKEN_LENGTH = 24;

export interface TokenSource {
  readonly token: string;
  /** Where it came from: the environment, the caller, or the file (made now or read). */
  readonly from: "environment" | "option" | "file-created" | "file";
  /** The token file, when the token is kept in one. */
  readonly path?: string;
}

/**
 * The server's token: the caller's, else `HOLDFAST_TOKEN`, else the token file (made on first use:
 * 32 random bytes, base64url, mode 0600, created exclusively so two servers starting at once
 * agree). A token shorter than 24 characters is refused: it guards decisions on real effects.
 */
export const loadToken = (tokenFile: string, given?: string): TokenSource => {
  const check = (token: string, from: string): string => {
    const trimmed = token.trim();
    if (trimmed.length < MIN_TOKEN_LENGTH) {
      throw new Error(
        `the token from ${from} is ${trimmed.length} characters long; use at least ${MIN_TOKEN_LENGTH} random characters (e.g. \`openssl rand -base64 32\`)`,
      );
    }
    return trimmed;
  };
  if (given !== undefined) return { token: check(given, "the options"), from: "option" };
  const fromEnvironment = process.env[TOKEN_VARIABLE];
  if (fromEnvironment !== undefined && fromEnvironment !== "") {
    return { token: check(fromEnvironment, TOKEN_VARIABLE), from: "environment" };
  }
  if (existsSync(tokenFile)) {
    chmodSync(tokenFile, 0o600);
    return { token: check(readFileSync(tokenFile, "utf8"), tokenFile), from: "file", path: tokenFile };
  }
  mkdirSync(dirname(tokenFile), { recursive: true, mode: 0o700 });
  const token = randomBytes(32).toString("base64url");
  try {
    const fd = openSync(tokenFile, "wx", 0o600);
    try {
      writeSync(fd, `${token}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return loadToken(tokenFile, given);
    throw error;
  }
  return { token, from: "file-created", path: tokenFile };
};

const digest = (text: string): Buffer => createHash("sha256").update(text).digest();

/** Compare a presented token with the server's in constant time. */
export const tokenMatches = (presented: string, token: string): boolean =>
  timingSafeEqual(digest(presented), digest(token));

export interface Session {
  readonly id: string;
  readonly csrf: string;
  /** Who logged in (shown on the page, recorded as `decidedBy`). */
  readonly name: string;
  readonly expiresAt: number;
}

/**
 * Browser sessions, in memory: a restart logs everyone out (the token logs them in again). Bounded:
 * past `max` sessions the oldest goes.
 */
export class Sessions {
  readonly #sessions = new Map<string, Session>();
  constructor(
    private readonly ttlMs = 12 * 60 * 60 * 1000,
    private readonly max = 1000,
  ) {}

  create(name: string): Session {
    const session: Session = {
      id: randomBytes(32).toString("base64url"),
      csrf: randomBytes(32).toString("base64url"),
      name,
      expiresAt: Date.now() + this.ttlMs,
    };
    this.#sessions.set(session.id, session);
    while (this.#sessions.size > this.max) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    return session;
  }

  get(id: string | undefined): Session | null {
    if (id === undefined) return null;
    const session = this.#sessions.get(id);
    if (!session) return null;
    if (session.expiresAt <= Date.now()) {
      this.#sessions.delete(id);
      return null;
    }
    return session;
  }

  end(id: string | undefined): void {
    if (id !== undefined) this.#sessions.delete(id);
  }
}

/** Loopback hosts: the only ones served without an explicit token. */
export const isLoopback = (host: string): boolean =>
  host === "127.0.0.1" || host === "::1" || host === "localhost" || /^127(\.\d{1,3}){3}$/.test(host);

/**
 * The Host header values this server answers (DNS rebinding: a page on another name that resolves
 * to 127.0.0.1 must not reach the API): the bound host and, on loopback, its usual names, each with
 * the port.
 */
export const allowedHosts = (host: string, port: number, extra: ReadonlyArray<string> = []): Set<string> => {
  const names = new Set<string>([host.includes(":") ? `[${host}]` : host]);
  if (isLoopback(host)) for (const name of ["127.0.0.1", "localhost", "[::1]"]) names.add(name);
  const hosts = new Set<string>();
  for (const name of names) hosts.add(`${name}:${port}`.toLowerCase());
  for (const name of extra) hosts.add(name.toLowerCase());
  return hosts;
};

/**
 * Whether a cookie-authenticated mutation comes from this server's own pages: the `Origin` (or,
 * without one, `Sec-Fetch-Site`) must say same origin. A request with neither is refused: every
 * browser this panel supports sends one of them on a POST.
 */
export const sameOrigin = (
  headers: { readonly origin?: string | undefined; readonly secFetchSite?: string | undefined },
  host: string,
): { readonly ok: true } | { readonly ok: false; readonly why: string } => {
  if (headers.origin !== undefined && headers.origin !== "null") {
    let originHost: string;
    try {
      originHost = new URL(headers.origin).host.toLowerCase();
    } catch {
      return { ok: false, why: `the Origin header ${JSON.stringify(headers.origin)} is not a URL` };
    }
    return originHost === host.toLowerCase()
      ? { ok: true }
      : { ok: false, why: `the request comes from another origin (${headers.origin})` };
  }
  if (headers.origin === "null") return { ok: false, why: "the request comes from an opaque origin" };
  if (headers.secFetchSite === "same-origin") return { ok: true };
  if (headers.secFetchSite !== undefined)
    return { ok: false, why: `the request is ${headers.secFetchSite} (Sec-Fetch-Site)` };
  return { ok: false, why: "the request carries neither Origin nor Sec-Fetch-Site" };
};

/**
 * The Content-Security-Policy of every page: scripts and styles only from this server, no inline
 * script or style, no framing, forms post only here.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");
