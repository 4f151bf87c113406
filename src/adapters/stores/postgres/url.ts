import { isSecretParam } from "../../../events/index.js";

/** Is this store string a PostgreSQL URL? */
export const isPostgresUrl = (store: string): boolean => /^postgres(ql)?:\/\//.test(store);

/** What a URL that cannot be parsed is printed as: never the text itself, which may hold a password. */
export const UNPARSEABLE_URL = "«unparseable url»";

const MASK = "****";

/**
 * A store string as it may be printed: a URL with its password and every secret query parameter
 * (`password`, `sslpassword`, `token`, `api_key`, `sig`, …) replaced by `****`. The URL is parsed
 * (WHATWG `URL`, as `pg-connection-string` does for `pg`), never matched by a pattern, so an empty
 * user or a raw `@` in the password cannot leave part of it visible. A URL that does not parse is
 * {@link UNPARSEABLE_URL}; a file path (no `scheme://`) is returned as it is.
 *
 * @example
 * maskUrl("postgres://app:hunter2@db:5432/agents?schema=holdfast"); // "postgres://app:****@db:5432/agents?schema=holdfast"
 */
export const maskUrl = (url: string): string => {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return UNPARSEABLE_URL;
  }
  if (parsed.password !== "") parsed.password = MASK;
  const secret = [...new Set(parsed.searchParams.keys())].filter(isSecretParam);
  for (const name of secret) parsed.searchParams.set(name, MASK);
  return parsed.href;
};
