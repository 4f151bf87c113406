import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
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

/**
 * The secret of a run's signal URL (decision 0056): an HMAC, under a key derived from the server's
 * token, of the run and the signal name. No table: the server recomputes it for each request, and
 * rotating the token revokes every URL. It authorizes one thing only: signals of `name` to `runId`.
 */
export const signalUrlToken = (serverToken: string, runId: string, name: string): string => {
  const key = createHmac("sha256", serverToken).update("holdfast signal url key").digest();
  return createHmac("sha256", key)
    .update(JSON.stringify([runId, name]))
    .digest("base64url");
};

/** The path (with its `?token=`) of a run's signal URL: `/hooks/runs/<runId>/signals/<name>?token=…`. */
export const signalUrlPath = (serverToken: string, runId: string, name: string): string =>
  `/hooks/runs/${encodeURIComponent(runId)}/signals/${encodeURIComponent(name)}?token=${signalUrlToken(serverToken, runId, name)}`;

/** A URL to print: its `token` query parameter replaced by `***` (logs, errors, screens). */
export const maskSignalUrl = (url: string): string => url.replace(/([?&]token=)[^&#]*/gi, "$1***");

/**
 * The headers a webhook's delivery id is read from, in this order (decision 0056); the first present
 * is the signal's id, so a retried delivery is recorded once. Without any: a digest of the body.
 * Not `X-Request-Id`: proxies and routers set a fresh one per request, so a retry would be another id.
 */
export const DELIVERY_ID_HEADERS = ["idempotency-key", "x-github-delivery", "x-delivery-id"] as const;

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
 * The panel's own host name on loopback, `holdfast-<port>-<12 hex>.localhost` (browsers resolve
 * `*.localhost` to loopback without asking DNS), or undefined when bound elsewhere. Cookies are not
 * isolated by port: a session cookie set for 127.0.0.1 goes to every other port on 127.0.0.1, where
 * anyone listening can replay it. A host-only cookie for this name does not — unless a page on
 * another port can navigate to the name on its own port (`http://<name>:<its port>/`, same site,
 * so the cookie goes along). Hence the name carries an HMAC of the token: it cannot be guessed, it
 * is stable while the token is, and the server tells it only to whoever holds the token.
 */
export const panelHostName = (host: string, port: number, token: string): string | undefined => {
  if (host !== "127.0.0.1" && host !== "localhost" && host !== "::1") return undefined;
  const tag = createHmac("sha256", token).update("holdfast panel host").digest("hex").slice(0, 12);
  return `holdfast-${port}-${tag}.localhost`;
};

/**
 * The loopback names (with the port) that answer the API but not the panel when the panel has a
 * host name of its own: a browser there is told to open the address `holdfast serve` printed (never
 * sent to it: that would tell the name to anyone), and a session cookie there counts for nothing.
 */
export const loopbackAliases = (host: string, port: number): Set<string> =>
  host === "127.0.0.1" || host === "localhost" || host === "::1"
    ? new Set(["127.0.0.1", "localhost", "[::1]"].map((name) => `${name}:${port}`))
    : new Set();

/**
 * The Host header values this server answers (DNS rebinding: a page on another name that resolves
 * to 127.0.0.1 must not reach the API): the bound host and, on loopback, its usual names, each with
 * the port.
 */
export const allowedHosts = (
  host: string,
  port: number,
  token: string,
  extra: ReadonlyArray<string> = [],
): Set<string> => {
  const names = new Set<string>([host.includes(":") ? `[${host}]` : host]);
  if (isLoopback(host)) for (const name of ["127.0.0.1", "localhost", "[::1]"]) names.add(name);
  const panel = panelHostName(host, port, token);
  if (panel !== undefined) names.add(panel);
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
 * Where to go after signing in: `next` only when it resolves to a path on `origin` (the WHATWG
 * parser turns `/\host` and `/<TAB>/host` into another host, so a prefix check is not enough),
 * as its path and query; else `/`.
 */
export const sameOriginPath = (next: string, origin: string): string => {
  try {
    const url = new URL(next, origin);
    return url.origin === new URL(origin).origin ? `${url.pathname}${url.search}` : "/";
  } catch {
    return "/";
  }
};

/** Request bodies (bytes): the sign-in form is tiny and open to anyone, so its cap is the smallest. */
export const BODY_LIMITS = {
  login: 4 * 1024,
  /** The panel's forms: the plan form carries a plan of up to 64 KiB, pretty-printed and form-encoded. */
  form: 512 * 1024,
  /** The bulk form: at most 100 `runId@version` boxes and a note (decision 0081). */
  bulk: 64 * 1024,
  api: 4 * 1024 * 1024,
} as const;

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
