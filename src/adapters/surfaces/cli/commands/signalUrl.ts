import { existsSync } from "node:fs";
import { resolveStore } from "../../../store.js";
import { loadToken, signalUrlPath, TOKEN_VARIABLE } from "../../http/security.js";
import { DEFAULT_HOST, DEFAULT_PORT, defaultTokenFile } from "../../http/serve.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import type { Io } from "../Output.js";

export interface SignalUrlOptions {
  /** Where a webhook sender reaches `holdfast serve` (default `http://127.0.0.1:4640`). */
  readonly base?: string;
  readonly tokenFile?: string;
  readonly db?: string;
  readonly json?: boolean;
}

/**
 * `holdfast signal-url <runId> <name>` (decision 0056): print the URL a webhook sender posts to,
 * recording signal `name` to `runId`. Its secret is derived from the server's token, so it reads the
 * same token `holdfast serve` uses (`HOLDFAST_TOKEN`, else the token file); it never makes one.
 */
export const signalUrlCommand = async (
  runId: string,
  name: string,
  options: SignalUrlOptions,
  io: Io,
): Promise<number> => {
  const base = (options.base ?? `http://${DEFAULT_HOST}:${DEFAULT_PORT}`).replace(/\/+$/, "");
  let parsed: URL;
  try {
    parsed = new URL(base);
  } catch {
    throw usageError(
      `--base ${JSON.stringify(base)} is not a URL`,
      "pass e.g. --base https://hooks.example.com",
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw usageError(`--base ${base} is not http(s)`, "pass e.g. --base https://hooks.example.com");
  const tokenFile = options.tokenFile ?? defaultTokenFile(resolveStore(options.db).store);
  if (!process.env[TOKEN_VARIABLE] && !existsSync(tokenFile))
    throw new CliError(
      ExitCode.failed,
      `no server token: ${TOKEN_VARIABLE} is not set and ${tokenFile} does not exist`,
      "run `holdfast serve` once (it makes the token file), or pass the --token-file it uses",
    );
  const token = loadToken(tokenFile).token;
  const url = `${base}${signalUrlPath(token, runId, name)}`;
  if (options.json) await io.out.json({ runId, name, url });
  else await io.out.lines([url]);
  return ExitCode.ok;
};
