import { existsSync, readFileSync } from "node:fs";
import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { createAdaptorServer } from "@hono/node-server";
import type { Hono } from "hono";
import type { Journal } from "../../../runtime/Journal.js";
import { type AlertOptions, type AlertSender, checkAlertOptions, startAlerts } from "../../alerts.js";
import { auditStore } from "../../auditStore.js";
import { localWorkerId } from "../../localWorker.js";
import type { Runtime } from "../../openRuntime.js";
import { isPostgresUrl, libsqlPath, maskUrl, openStore, openStoreReader, resolveStore } from "../../store.js";
import { CliError, ExitCode } from "../cli/CliError.js";
import { openOperatorRuntime } from "../cli/commands/decide.js";
import { createApp, type Env, type OperatorPort } from "./app.js";
import { vendorAssets } from "./assets.js";
import type { LiveOptions } from "./events.js";
import {
  allowedHosts,
  isLoopback,
  loadToken,
  loopbackAliases,
  panelHostName,
  signalUrlPath,
  TOKEN_VARIABLE,
  type TokenSource,
} from "./security.js";

export const DEFAULT_PORT = 4640;
export const DEFAULT_HOST = "127.0.0.1";

/** What `serve` listens on, which journal it reads, and how it authenticates. */
export interface ServeOptions {
  /** The journal: a file path or a `postgres://` URL (default `HOLDFAST_STORE`, else `.holdfast/journal.db`). */
  readonly store?: string;
  /** Default 4640; 0 picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. Any other host needs a token set explicitly (`token` or `HOLDFAST_TOKEN`). */
  readonly host?: string;
  /** The token (at least 24 characters); default `HOLDFAST_TOKEN`, else the token file. */
  readonly token?: string;
  /** Where the token file is (default `token` next to a libSQL journal, else `.holdfast/token`). */
  readonly tokenFile?: string;
  /**
   * The runtime to record decisions through when serving next to one (its agents continue the runs
   * at once). Without it, decisions go through an operator runtime of this server's own: no agents,
   * no recovery, never a worker's id — the runs continue where their agent runs.
   */
  readonly runtime?: Pick<
    Runtime,
    | "decide"
    | "grantRetry"
    | "cancel"
    | "pause"
    | "resume"
    | "documents"
    | "withdraw"
    | "signal"
    | "schedules"
    | "approve"
    | "deny"
    | "fork"
  >;
  /** More Host header values to answer (e.g. `holdfast.internal:4640` behind a proxy). */
  readonly allowedHosts?: ReadonlyArray<string>;
  readonly live?: LiveOptions;
  /**
   * Send alerts of held, crash-looped and stalled runs (decision 0065), through a writable handle
   * of its own; `panelUrl` defaults to where this server listens.
   */
  readonly alerts?: AlertOptions;
}

/** A running `holdfast serve`: where it listens, its token, and `close()`. */
export interface Server {
  /** Where it listens, e.g. `http://127.0.0.1:4640`: the API's address. */
  readonly url: string;
  /**
   * The panel's address, for a browser: on loopback a host name of its own that only the token
   * tells, `http://holdfast-<port>-<12 hex of an HMAC of the token>.localhost:<port>`, so its session
   * cookie reaches no other port on 127.0.0.1 and no page there can lure it out (a browser that opens
   * `url` is told to open this address, not sent to it); elsewhere the same as `url`.
   */
  readonly panelUrl: string;
  readonly host: string;
  readonly port: number;
  /** The token and where it came from (print its file, never the token itself, unless asked). */
  readonly token: TokenSource;
  /** The Hono app (for `app.request(...)` in tests, or mounting elsewhere). */
  readonly app: Hono<Env>;
  /** Where the journal is (printable). */
  readonly location: string;
  /**
   * A run's signal URL for a webhook (decision 0056): `POST` there records a signal `name` to
   * `runId`, nothing else. It carries a secret: print it masked (`maskSignalUrl`). `base` defaults
   * to `url`; pass the public address a sender reaches this server at.
   */
  signalUrl(runId: string, name: string, base?: string): string;
  close(): Promise<void>;
}

const packageVersion = (): string => {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
};

/** `token` next to a libSQL journal (`.holdfast/token` for the default one), else `.holdfast/token`. */
export const defaultTokenFile = (store: string): string =>
  isPostgresUrl(store) ? resolve(".holdfast", "token") : join(dirname(resolve(libsqlPath(store))), "token");

/**
 * Serve the JSON API, the live event stream and the Recovery panel for a journal. Reads go through a
 * read-only open of the journal; decisions, retry grants and plan edits through the runtime paths
 * the CLI and the library use, so they obey the same laws.
 *
 * @example
 * const server = await serve({ store: ".holdfast/journal.db" });
 * console.log(`open ${server.panelUrl} and sign in with the token in ${server.token.path}`);
 * // … later
 * await server.close();
 */
export const serve = async (options: ServeOptions = {}): Promise<Server> => {
  const host = options.host ?? DEFAULT_HOST;
  const port = options.port ?? DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`the port ${String(port)} is not a port number (0–65535; 0 picks a free one)`);
  }
  const store = resolveStore(options.store).store;
  // Beyond loopback the token must be one someone set: the option, HOLDFAST_TOKEN, or a token file
  // named on purpose that already exists — never one made now in the default place.
  const explicitToken =
    options.token ??
    (process.env[TOKEN_VARIABLE] || undefined) ??
    (options.tokenFile !== undefined && existsSync(options.tokenFile) ? "from the token file" : undefined);
  if (!isLoopback(host) && explicitToken === undefined) {
    throw new Error(
      `serving on ${host} (not loopback) needs a token set on purpose: set ${TOKEN_VARIABLE} (at least 24 random characters) or pass --token-file with an existing file (mode 0600); a token made now is for loopback only`,
    );
  }
  const token = loadToken(options.tokenFile ?? defaultTokenFile(store), options.token);
  if (!isLoopback(host) && token.from === "file-created") {
    throw new Error(`serving on ${host} needs an existing token, not one made now`);
  }
  if (options.alerts) checkAlertOptions(options.alerts);
  const reader = await openStoreReader(store);
  let operator: Promise<OperatorPort & { close?: () => Promise<void> }> | null = null;
  const operatorPort = (): Promise<OperatorPort> => {
    if (options.runtime) return Promise.resolve(options.runtime);
    operator ??= openOperatorRuntime(options.store).catch((error: unknown) => {
      operator = null;
      throw error;
    });
    return operator;
  };

  let hosts = new Set<string>();
  let panel: { readonly origin: string; readonly aliases: ReadonlySet<string> } | undefined;
  const { app, close: closeApp } = createApp({
    reader,
    operator: operatorPort,
    audit: (auditOptions) => auditStore(reader, auditOptions),
    token: token.token,
    get hosts() {
      return hosts;
    },
    get panel() {
      return panel;
    },
    version: packageVersion(),
    ...(options.store === undefined ? {} : { db: maskUrl(options.store) }),
    ...(options.live === undefined ? {} : { live: options.live }),
    assets: vendorAssets(),
  });
  const server = createAdaptorServer({ fetch: app.fetch, hostname: host, port }) as HttpServer;
  try {
    await new Promise<void>((resolveListen, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolveListen();
      });
    });
  } catch (error) {
    await reader.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE")
      throw new CliError(
        ExitCode.failed,
        `port ${port} on ${host} is in use (another server, or an earlier \`holdfast serve\` still running)`,
        "pass another with --port (0 picks a free one), or stop the process that holds it",
      );
    throw error;
  }
  const bound = (server.address() as AddressInfo).port;
  hosts = allowedHosts(host, bound, token.token, options.allowedHosts);
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const url = `http://${urlHost}:${bound}`;
  const panelName = panelHostName(host, bound, token.token);
  if (panelName !== undefined) {
    panel = { origin: `http://${panelName}:${bound}`, aliases: loopbackAliases(host, bound) };
  }
  let alerts: { sender: AlertSender; journal: Journal } | null = null;
  if (options.alerts) {
    try {
      const journal = await openStore(store, { postgres: { poolSize: 1 } });
      alerts = {
        journal,
        sender: startAlerts(journal, localWorkerId(), { panelUrl: url, ...options.alerts }),
      };
    } catch (error) {
      await new Promise<void>((resolveClose) => server.close(() => resolveClose()));
      await reader.close();
      throw error;
    }
  }
  let closed = false;
  return {
    url,
    panelUrl: panel?.origin ?? url,
    host,
    port: bound,
    token,
    app,
    location: reader.location,
    signalUrl: (runId, name, base = url) =>
      `${base.replace(/\/+$/, "")}${signalUrlPath(token.token, runId, name)}`,
    close: async () => {
      if (closed) return;
      closed = true;
      closeApp();
      await new Promise<void>((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections?.();
      });
      if (operator) await (await operator.catch(() => null))?.close?.();
      if (alerts) {
        await alerts.sender.close();
        await alerts.journal.close();
      }
      await reader.close();
    },
  };
};
