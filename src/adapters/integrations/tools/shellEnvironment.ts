/**
 * What a shell command may see of holdfast's environment. A command is often chosen by a model, so
 * it gets an allowlist, not the process environment: the journal's key and store URL live there
 * (law 8).
 */
export interface ShellEnvironmentOptions {
  /**
   * More variables to pass from the process environment: exact names, or a prefix ending in `*`
   * (`"AWS_*"`). Added to `SHELL_ENVIRONMENT_DEFAULTS`.
   */
  readonly pass?: ReadonlyArray<string>;
  /** Variables set for every command (they win over passed ones). */
  readonly set?: Readonly<Record<string, string>>;
}

/** Passed to every command when present: what ordinary tools need to run, nothing more. */
export const SHELL_ENVIRONMENT_DEFAULTS: ReadonlyArray<string> = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "LANGUAGE",
  "LC_*",
  "TZ",
  "TMPDIR",
];

/** holdfast's own variables: never passed, whatever the options say. */
const RESERVED_PREFIX = "HOLDFAST_";

/** The variables whose values are the journal's secrets; a passed copy of one is left out too. */
const SECRET_VARIABLES = ["HOLDFAST_STORE", "HOLDFAST_ENCRYPTION_KEY", "HOLDFAST_ENCRYPTION_OLD_KEYS"];

const matches = (pattern: string, name: string): boolean =>
  pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : name === pattern;

/**
 * Refuse, when the tool is made, options that name one of holdfast's variables: asking for one is a
 * mistake worth hearing about. (A wider pattern such as `*` is allowed; those variables are left
 * out of it.)
 */
export const checkShellEnvironmentOptions = (options: ShellEnvironmentOptions): void => {
  for (const pattern of options.pass ?? []) {
    if (pattern.startsWith(RESERVED_PREFIX)) {
      throw new TypeError(
        `shell env.pass "${pattern}" would pass holdfast's own variables (${RESERVED_PREFIX}*), which may hold the journal's key or store URL; name the variables the command needs instead`,
      );
    }
  }
  for (const name of Object.keys(options.set ?? {})) {
    if (name.startsWith(RESERVED_PREFIX)) {
      throw new TypeError(
        `shell env.set "${name}" is one of holdfast's own variables (${RESERVED_PREFIX}*); choose another name`,
      );
    }
  }
};

/** The journal's secret values present in `source` (a list variable counts item by item). */
const secretValues = (source: NodeJS.ProcessEnv): string[] =>
  SECRET_VARIABLES.flatMap((name) => {
    const value = source[name];
    if (!value) return [];
    return [value, ...value.split(",").map((part) => part.trim())].filter((part) => part.length >= 8);
  });

/**
 * The environment of one command: the defaults and `pass` from `source`, then `set`. No
 * `HOLDFAST_*` variable is ever included, nor any value that carries the journal's store URL or
 * keys (as a `DATABASE_URL` copied from `HOLDFAST_STORE` would).
 */
export const shellEnvironment = (
  options: ShellEnvironmentOptions,
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> => {
  const patterns = [...SHELL_ENVIRONMENT_DEFAULTS, ...(options.pass ?? [])];
  const secrets = secretValues(source);
  const carriesSecret = (value: string): boolean => secrets.some((secret) => value.includes(secret));
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined || name.startsWith(RESERVED_PREFIX) || carriesSecret(value)) continue;
    if (patterns.some((pattern) => matches(pattern, name))) env[name] = value;
  }
  for (const [name, value] of Object.entries(options.set ?? {})) {
    if (!name.startsWith(RESERVED_PREFIX) && !carriesSecret(value)) env[name] = value;
  }
  return env;
};
