import { checkAlertOptions } from "../../../alerts.js";
import { resolveStore } from "../../../store.js";
import { DEFAULT_HOST, DEFAULT_PORT, serve } from "../../http/serve.js";
import { usageError } from "../CliError.js";
import { requireJournalFile } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { alertTuning } from "./worker.js";

export interface ServeCommandOptions {
  readonly db?: string;
  readonly port?: number;
  readonly host?: string;
  readonly tokenFile?: string;
  readonly allowHost?: ReadonlyArray<string>;
  /** POST alerts here (decision 0065). */
  readonly notifyUrl?: string;
  /** The panel's address alerts link to (default: where it listens). */
  readonly panelUrl?: string;
  readonly json?: boolean;
}

/**
 * `holdfast serve`: the JSON API, the live event stream and the Recovery panel, until SIGINT or
 * SIGTERM. Prints where it listens and where the token is (never the token).
 */
export const serveCommand = async (options: ServeCommandOptions, io: Io): Promise<number> => {
  requireJournalFile(resolveStore(options.db).store);
  if (options.port !== undefined && (!Number.isInteger(options.port) || options.port > 65_535)) {
    throw usageError(
      `--port ${String(options.port)} is not a port number`,
      "pass 0–65535 (0 picks a free one)",
    );
  }
  if (options.notifyUrl !== undefined) {
    try {
      checkAlertOptions({ url: options.notifyUrl, ...alertTuning() });
    } catch (error) {
      throw usageError(
        `--notify-url: ${(error as Error).message}`,
        "pass an http(s) URL of a webhook that takes a JSON POST",
      );
    }
  }
  const server = await serve({
    ...(options.db === undefined ? {} : { store: options.db }),
    port: options.port ?? DEFAULT_PORT,
    host: options.host ?? DEFAULT_HOST,
    ...(options.tokenFile === undefined ? {} : { tokenFile: options.tokenFile }),
    ...(options.allowHost === undefined ? {} : { allowedHosts: options.allowHost }),
    ...(options.notifyUrl === undefined
      ? {}
      : {
          alerts: {
            url: options.notifyUrl,
            ...(options.panelUrl === undefined ? {} : { panelUrl: options.panelUrl }),
            ...alertTuning(),
          },
        }),
  });
  const tokenWhere =
    server.token.from === "environment"
      ? "HOLDFAST_TOKEN"
      : server.token.from === "option"
        ? "the option given"
        : `${server.token.path}${server.token.from === "file-created" ? " (made now, mode 0600)" : ""}`;
  if (options.json) {
    await io.out.json({
      url: server.url,
      panelUrl: server.panelUrl,
      host: server.host,
      port: server.port,
      journal: server.location,
      token: { from: server.token.from, ...(server.token.path ? { path: server.token.path } : {}) },
    });
  } else {
    await io.out.lines([
      `holdfast serve: the Recovery panel at ${server.panelUrl}`,
      `  API      ${server.url}/api`,
      `  journal  ${server.location} (read-only for reads; decisions through an operator runtime)`,
      `  token    ${tokenWhere}: sign in with it, or send Authorization: Bearer <token>`,
      ...(options.notifyUrl === undefined
        ? []
        : ["  alerts   POSTed to the --notify-url given (held, crash-looped and stalled runs)"]),
      "  Ctrl-C stops it",
    ]);
  }
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await server.close();
  if (!options.json) await io.out.line("holdfast serve: stopped");
  return 0;
};
