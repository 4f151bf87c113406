/**
 * Secret masking, applied to every argument, result, checkpoint, document and error before it is
 * written anywhere (law 8). Three nets, in order:
 *  1. registered secret values (exact match, also inside longer strings), in their raw,
 *     JSON-escaped and URL-encoded forms;
 *  2. values under key names that mean "secret" (`password`, `token`, `api_key`, `authorization`, …);
 *  3. shapes of credentials in any string: provider API keys, bearer tokens, JWTs, private keys, the
 *     password of a URL (`scheme://user:secret@host`) and secret query or form parameters
 *     (`?api_key=…`, `&password=…`, `sig=…`).
 * Each match becomes `«secret:NAME»`.
 */

export const maskToken = (name: string): string => `«secret:${name}»`;

/** Key names (lowercased, `-`/`_` removed) whose value is always a secret. */
const SECRET_KEYS = new Set([
  "password",
  "passwd",
  "pwd",
  "passphrase",
  "secret",
  "clientsecret",
  "token",
  "accesstoken",
  "refreshtoken",
  "idtoken",
  "sessiontoken",
  "authtoken",
  "bearertoken",
  "apikey",
  "xapikey",
  "authorization",
  "proxyauthorization",
  "cookie",
  "setcookie",
  "privatekey",
  "accesskey",
  "secretaccesskey",
  "credentials",
  "credential",
]);
/** Suffixes that make any key a secret key (`dbPassword`, `stripeSecret`, `openaiApiKey`). */
const SECRET_SUFFIXES = ["password", "passwd", "secret", "apikey", "privatekey", "accesstoken", "authtoken"];

const normalizeKey = (key: string): string => key.toLowerCase().replace(/[-_\s.]/g, "");

export const isSecretKey = (key: string): boolean => {
  const k = normalizeKey(key);
  return SECRET_KEYS.has(k) || SECRET_SUFFIXES.some((s) => k.endsWith(s));
};

/**
 * Whether masking replaces the value under `key` whole, whatever its type (`«secret:key»`): the key
 * names a secret and the value is not null.
 */
export const masksWhole = (key: string, value: unknown): boolean =>
  isSecretKey(key) && value !== null && value !== undefined;

/** Query parameter names (normalized) that carry secrets in URLs, beyond the secret key names. */
const SECRET_PARAMS = new Set(["key", "sig", "signature", "code"]);
/** Suffixes of query parameter names that carry secrets (`X-Amz-Signature`, `X-Amz-Security-Token`). */
const SECRET_PARAM_SUFFIXES = ["token", "signature", "credential"];

/** Whether a URL query or form parameter of this name carries a secret (`password`, `api_key`, `sig`, …). */
export const isSecretParam = (name: string): boolean => {
  const k = normalizeKey(name);
  return isSecretKey(name) || SECRET_PARAMS.has(k) || SECRET_PARAM_SUFFIXES.some((s) => k.endsWith(s));
};

/** A value masked already: by this masker, or as `maskUrl` prints a password (`****`). */
const MASK_TOKEN = /^(?:«secret:[^»]*»|\*{4,})$/;

/**
 * The password of a URL's user-info. WHATWG URL reads the user up to the first `:` and the
 * password up to the last `@` before the host, so a raw `@` in a password is part of it.
 */
const URL_USERINFO = /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/[^\s/?#:@]*:)([^\s/?#]+)@/gi;

/**
 * `name=value` after `?`, `&` or `;` (a query or form body), or at the start of a word (`password=…`
 * in a log line). The value ends where a query value ends; a quoted value ends at its quote (looked
 * for within 1 KiB, so text full of unclosed quotes costs linear time).
 */
const PARAMETER = /(^|[?&;\s,({[])([A-Za-z][A-Za-z0-9_.-]*)=("[^"]{0,1024}"|'[^']{0,1024}'|[^&#\s"'<>]+)/g;

const maskShapes = (text: string): string => {
  let out = text;
  if (out.includes("://"))
    out = out.replace(URL_USERINFO, (match: string, head: string, password: string) =>
      MASK_TOKEN.test(password) ? match : `${head}${maskToken("url-password")}@`,
    );
  if (out.includes("="))
    out = out.replace(PARAMETER, (match: string, lead: string, name: string, value: string) => {
      if (MASK_TOKEN.test(value)) return match;
      // Short generic names (`key`, `sig`) are secrets only inside a query; `password=` anywhere.
      const inQuery = lead === "?" || lead === "&" || lead === ";";
      if (!(inQuery ? isSecretParam(name) : isSecretKey(name))) return match;
      return `${lead}${name}=${maskToken(name)}`;
    });
  return out;
};

const lowerHex = (text: string): string => text.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase());

/**
 * The forms a registered value takes when it has been through a JSON encoder or a URL: raw,
 * JSON-escaped (also with `\uXXXX` for non-ASCII), percent-encoded (either hex case), form-encoded
 * (`+` for spaces), and as a WHATWG URL writes a password.
 */
export const encodedForms = (value: string): ReadonlyArray<string> => {
  const json = JSON.stringify(value).slice(1, -1);
  const percent = encodeURIComponent(value);
  const form = new URLSearchParams([["", value]]).toString().slice(1);
  const userinfo = new URL("http://h");
  userinfo.password = value;
  return [
    ...new Set([
      value,
      json,
      json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
      percent,
      lowerHex(percent),
      form,
      lowerHex(form),
      userinfo.password,
      lowerHex(userinfo.password),
    ]),
  ];
};

/** Shapes of credentials that are secrets wherever they appear. */
const TOKEN_SHAPES: ReadonlyArray<{ name: string; pattern: RegExp; keep?: string }> = [
  {
    name: "private-key",
    pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  },
  { name: "bearer", pattern: /\b(Bearer\s+)[A-Za-z0-9._~+/-]{12,}=*/g, keep: "$1" },
  { name: "jwt", pattern: /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { name: "api-key", pattern: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}/g },
  { name: "github-token", pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})/g },
  { name: "aws-access-key", pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  { name: "slack-token", pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g },
  { name: "google-api-key", pattern: /\bAIza[0-9A-Za-z_-]{35}/g },
];

/**
 * Set `key` on `target` as an own, enumerable property. An assignment would treat `__proto__` as the
 * prototype: the key would vanish from what is stored, and the copy would inherit its value.
 */
export const setOwn = (target: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
};

export interface Masker {
  /** A deep copy of `value` with every secret replaced by `«secret:NAME»`. */
  readonly mask: <A>(value: A) => A;
  /**
   * `mask` without the key-name net: for maps whose keys are names but whose values are not what
   * those names hold (LangGraph's channel versions: `{ password: 3 }`).
   */
  readonly maskStrings: <A>(value: A) => A;
  /** The name of a registered secret whose raw or encoded form `bytes` hold (UTF-8), or null. */
  readonly registeredIn: (bytes: Uint8Array) => string | null;
  /** The same for one string. */
  readonly maskString: (text: string) => string;
  /** Registered secret names (never the values). */
  readonly names: ReadonlyArray<string>;
  /**
   * This masker, also replacing the exact values `learned` lists (`[name, value]`, e.g. what the
   * key-name net masked in a call's arguments, so an echo of it in the call's result or error is
   * masked too). Values shorter than {@link MIN_SECRET_LENGTH} are left out.
   */
  readonly withSecrets: (learned: ReadonlyArray<readonly [string, string]>) => Masker;
}

/**
 * The string values the key-name net replaces in `value` (`{ headers: { "X-Api-Key": "…" } }` →
 * `[["X-Api-Key", "…"]]`): a call's own credentials, to be masked wherever the call's answer echoes them.
 */
export const secretsByName = (value: unknown): Array<readonly [string, string]> => {
  const found: Array<readonly [string, string]> = [];
  const seen = new WeakSet<object>();
  const visit = (item: unknown): void => {
    if (item === null || typeof item !== "object" || seen.has(item)) return;
    seen.add(item);
    for (const [key, child] of Object.entries(item)) {
      if (isSecretKey(key) && typeof child === "string") {
        if (child.length >= MIN_SECRET_LENGTH && !MASK_TOKEN.test(child)) found.push([key, child]);
      } else visit(child);
    }
  };
  visit(value);
  return found;
};

/** The shortest value accepted as a registered secret; shorter ones would mask ordinary text. */
export const MIN_SECRET_LENGTH = 4;

export const makeMasker = (
  secrets: Readonly<Record<string, string>> = {},
  learned: ReadonlyArray<readonly [string, string]> = [],
): Masker => {
  const entries = [
    ...Object.entries(secrets).map(([name, value]) => ({ name, value, learned: false })),
    ...learned
      .filter(([, value]) => typeof value === "string" && value.length >= MIN_SECRET_LENGTH)
      .map(([name, value]) => ({ name, value, learned: true })),
  ].filter(({ value }) => typeof value === "string" && value.length > 0);
  for (const { name, value } of entries)
    if (value.length < MIN_SECRET_LENGTH)
      throw new RangeError(
        `secret "${name}" is shorter than ${MIN_SECRET_LENGTH} characters; masking it would garble ordinary text. Register the real secret value.`,
      );
  const registered = entries
    .flatMap(({ name, value, learned }) => encodedForms(value).map((form) => ({ name, form, learned })))
    // Longest first, so a secret that contains another is replaced whole.
    .sort((a, b) => b.form.length - a.form.length);

  const maskString = (text: string): string => {
    let out = text;
    for (const { name, form } of registered) {
      if (out.includes(form)) out = out.split(form).join(maskToken(name));
    }
    for (const { name, pattern, keep } of TOKEN_SHAPES) {
      pattern.lastIndex = 0;
      out = out.replace(pattern, `${keep ?? ""}${maskToken(name)}`);
    }
    return maskShapes(out);
  };

  const walk = (value: unknown, seen: WeakSet<object>, byName: boolean): unknown => {
    if (typeof value === "string") return maskString(value);
    if (value === null || typeof value !== "object") return value;
    if (seen.has(value)) throw new TypeError("cannot mask a value with a circular reference");
    seen.add(value);
    try {
      if (Array.isArray(value)) return value.map((item) => walk(item, seen, byName));
      if (value instanceof Error) {
        return { name: value.name, message: maskString(value.message) };
      }
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value))
        setOwn(out, maskString(key), byName ? under(key, item, seen) : walk(item, seen, false));
      return out;
    } finally {
      seen.delete(value);
    }
  };

  const under = (key: string, value: unknown, seen: WeakSet<object>): unknown =>
    masksWhole(key, value) ? maskToken(key) : walk(value, seen, true);

  const forms = registered
    .filter((s) => !s.learned)
    .map(({ name, form }) => ({ name, bytes: Buffer.from(form) }));

  const masker: Masker = {
    mask: <A>(value: A): A => walk(value, new WeakSet(), true) as A,
    maskStrings: <A>(value: A): A => walk(value, new WeakSet(), false) as A,
    registeredIn: (bytes: Uint8Array): string | null => {
      const haystack = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return forms.find((f) => haystack.includes(f.bytes))?.name ?? null;
    },
    maskString,
    names: [...new Set(registered.filter((s) => !s.learned).map((s) => s.name))],
    withSecrets: (more) => (more.length === 0 ? masker : makeMasker(secrets, [...learned, ...more])),
  };
  return masker;
};
