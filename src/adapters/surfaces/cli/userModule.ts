import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { CliError, ExitCode } from "./CliError.js";

/**
 * Import a user's ES module given with `--module` (running its top-level code, as the application
 * does). A missing file or a failed import is a one-line error saying what the module must export.
 */
export const importUserModule = async (
  modulePath: string,
  mustExport: string,
): Promise<{ readonly path: string; readonly exported: Record<string, unknown> }> => {
  const path = resolve(modulePath);
  if (!existsSync(path)) {
    throw new CliError(
      ExitCode.failed,
      `there is no module at ${path}`,
      `pass --module with the ES module that exports ${mustExport}`,
    );
  }
  try {
    return { path, exported: (await import(pathToFileURL(path).href)) as Record<string, unknown> };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new CliError(
      ExitCode.failed,
      `cannot import ${path}: ${message}`,
      /\.[cm]?tsx?$/.test(path)
        ? "a TypeScript module needs tsx: run holdfast with NODE_OPTIONS='--import tsx', or point --module at the compiled .js your application loads"
        : "the module must be an ES module that Node can import from here",
    );
  }
};

const SECRETS_HINT =
  'export const secrets = { SMTP_PASSWORD: "…" } (string values), or export const secretEnv = ["SMTP_PASSWORD"] to name environment variables that hold them';

const isVariableName = (name: unknown): name is string =>
  typeof name === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name);

/**
 * The secrets a module registers for masking (law 8): `export const secrets = { NAME: value }`,
 * and `export const secretEnv = ["NAME"]` naming environment variables that hold them (the name
 * is the secret's name). Each value is checked here — a string of at least `minLength` characters,
 * a named variable set — with an error that names the secret and never prints a value.
 */
export const moduleSecrets = (
  path: string,
  exported: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  minLength: number,
): Record<string, string> => {
  const secrets: Record<string, string> = {};
  const add = (name: string, value: string, from: string) => {
    if (value.length < minLength)
      throw new CliError(
        ExitCode.failed,
        `the secret ${name} (${from}) is shorter than ${minLength} characters; masking it would garble ordinary text`,
        SECRETS_HINT,
      );
    if (secrets[name] !== undefined && secrets[name] !== value)
      throw new CliError(
        ExitCode.failed,
        `${path} names the secret ${name} twice, with two different values (\`secrets\` and \`secretEnv\`)`,
        "give each secret one name",
      );
    secrets[name] = value;
  };
  const given = exported.secrets;
  if (given !== undefined) {
    if (typeof given !== "object" || given === null || Array.isArray(given))
      throw new CliError(
        ExitCode.failed,
        `${path} exports \`secrets\`, but not as an object of secret values by name`,
        SECRETS_HINT,
      );
    for (const [name, value] of Object.entries(given)) {
      if (typeof value !== "string")
        throw new CliError(
          ExitCode.failed,
          `${path} exports \`secrets\` with ${name} as ${value === undefined ? "undefined (an unset variable?)" : `a ${typeof value}`}, not a string`,
          SECRETS_HINT,
        );
      add(name, value, "`secrets`");
    }
  }
  const named = exported.secretEnv;
  if (named !== undefined) {
    if (!Array.isArray(named) || !named.every(isVariableName))
      throw new CliError(
        ExitCode.failed,
        `${path} exports \`secretEnv\`, but not as an array of environment variable names`,
        SECRETS_HINT,
      );
    for (const name of named) {
      const value = env[name];
      if (value === undefined || value === "")
        throw new CliError(
          ExitCode.failed,
          `${name}, named in \`secretEnv\` of ${path}, is not set`,
          `set ${name} in the worker's environment, or take it out of secretEnv`,
        );
      add(name, value, "`secretEnv`");
    }
  }
  return secrets;
};
