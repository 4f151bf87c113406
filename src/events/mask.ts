/**
 * Secret masking, applied to every argument, result, checkpoint, document and error before it is
 * written anywhere (law 8). Three nets, in order:
 *  1. registered secret values (exact match, also inside longer strings);
 *  2. values under key names that mean "secret" (`password`, `token`, `api_key`, `authorization`, …);
 *  3. well-known token shapes (provider API keys, bearer tokens, JWTs, private keys).
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

export interface Masker {
  /** A deep copy of `value` with every secret replaced by `«secret:NAME»`. */
  readonly mask: <A>(value: A) => A;
  /** The same for one string. */
  readonly maskString: (text: string) => string;
  /** Registered secret names (never the values). */
  readonly names: ReadonlyArray<string>;
}

/** The shortest value accepted as a registered secret; shorter ones would mask ordinary text. */
export const MIN_SECRET_LENGTH = 4;

export const makeMasker = (secrets: Readonly<Record<string, string>> = {}): Masker => {
  const registered = Object.entries(secrets)
    .filter(([, value]) => typeof value === "string" && value.length > 0)
    .map(([name, value]) => {
      if (value.length < MIN_SECRET_LENGTH) {
        throw new RangeError(
          `secret "${name}" is shorter than ${MIN_SECRET_LENGTH} characters; masking it would garble ordinary text. Register the real secret value.`,
        );
      }
      return { name, value };
    })
    // Longest first, so a secret that contains another is replaced whole.
    .sort((a, b) => b.value.length - a.value.length);

  const maskString = (text: string): string => {
    let out = text;
    for (const { name, value } of registered) {
      if (out.includes(value)) out = out.split(value).join(maskToken(name));
    }
    for (const { name, pattern, keep } of TOKEN_SHAPES) {
      pattern.lastIndex = 0;
      out = out.replace(pattern, `${keep ?? ""}${maskToken(name)}`);
    }
    return out;
  };

  const walk = (value: unknown, seen: WeakSet<object>): unknown => {
    if (typeof value === "string") return maskString(value);
    if (value === null || typeof value !== "object") return value;
    if (seen.has(value)) throw new TypeError("cannot mask a value with a circular reference");
    seen.add(value);
    try {
      if (Array.isArray(value)) return value.map((item) => walk(item, seen));
      if (value instanceof Error) {
        return { name: value.name, message: maskString(value.message) };
      }
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) {
        const maskedKey = maskString(key);
        if (isSecretKey(key) && item !== null && item !== undefined) {
          out[maskedKey] = maskToken(key);
        } else {
          out[maskedKey] = walk(item, seen);
        }
      }
      return out;
    } finally {
      seen.delete(value);
    }
  };

  return {
    mask: <A>(value: A): A => walk(value, new WeakSet()) as A,
    maskString,
    names: registered.map((s) => s.name),
  };
};
