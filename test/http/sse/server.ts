import { spawn } from "node:child_process";
import { join } from "node:path";
import type { LiveOptions } from "../../../src/adapters/surfaces/http/events.js";
import { type Server, serve } from "../../../src/adapters/surfaces/http/serve.js";
import type { RecordedEvent } from "../../../src/events/index.js";
import type { JournalReader } from "../../../src/runtime/Journal.js";
import { SseConnection, type SseOptions } from "./client.js";

export const TOKEN = "sse-test-token-0123456789abcdefghij";

/** `holdfast serve` over a journal file, on a free loopback port, with a fixed token. */
export const startServer = (store: string, live: LiveOptions): Promise<Server> =>
  serve({ store, port: 0, token: TOKEN, live });

/** Where a server listens: one of this process, or one in a child process. */
export type Listening = Pick<Server, "url" | "close">;

/**
 * The same server in a child process (Node with the tsx loader), for the tests whose clients
 * would otherwise take the server's event loop; `close()` stops it with SIGTERM.
 */
export const startServerProcess = (store: string, live: LiveOptions): Promise<Listening> =>
  new Promise((resolveStart, rejectStart) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "serve-process.ts")],
      {
        env: { ...process.env, SSE_STORE: store, SSE_TOKEN: TOKEN, SSE_LIVE: JSON.stringify(live) },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));
    let stdout = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      stdout += chunk;
      const line = stdout.split("\n").find((l) => l.startsWith("{"));
      if (line === undefined) return;
      const { url } = JSON.parse(line) as { url: string };
      resolveStart({
        url,
        close: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          await exited;
        },
      });
    });
    child.once("error", rejectStart);
    void exited.then(() => rejectStart(new Error(`the server process exited before listening: ${stdout}`)));
  });

/** `GET /api/events` with the token (or without, when `token` is null). */
export const openEvents = (
  server: Pick<Server, "url">,
  query = "",
  options: Omit<SseOptions, "token"> & { readonly token?: string | null } = {},
) => {
  const { token, ...rest } = options;
  return SseConnection.open(`${server.url}/api/events${query}`, {
    ...rest,
    ...(token === null ? {} : { token: token ?? TOKEN }),
  });
};

/** How many event streams the server has open, as `GET /api/health` reports. */
export const liveStreams = async (server: Pick<Server, "url">): Promise<number> => {
  const response = await fetch(`${server.url}/api/health`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const body = (await response.json()) as { liveStreams: number };
  return body.liveStreams;
};

/** Poll until `condition` holds; fail naming `what` after `timeoutMs`. */
export const waitUntil = async (
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

/** Every event of the journal, in position order. */
export const readEverything = async (journal: JournalReader): Promise<RecordedEvent[]> => {
  const all: RecordedEvent[] = [];
  for (;;) {
    const page = await journal.readAll({ after: all.at(-1)?.position ?? 0, limit: 1000 });
    if (page.length === 0) return all;
    all.push(...page);
  }
};
