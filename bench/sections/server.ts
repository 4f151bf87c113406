import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { SseConnection } from "../../test/http/sse/client.js";
import { benchStreams, heldRunId, LONG_RUN_ID, writeRunsFixture } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import { progress, throttled } from "../lib/progress.js";
import type { Section } from "../lib/section.js";
import { percentile, round, spreadOf } from "../lib/stats.js";

const CHILD = join(dirname(fileURLToPath(import.meta.url)), "..", "tools", "serve-child.ts");
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TOKEN = randomBytes(24).toString("base64url");
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** DESIGN §12 (issue 33 item 5): the runs list and its search ≤ 10 ms p50 at 100,000 runs. */
const LIST_TARGET_MS = 10;
/** A run page ≤ 20 ms p50 for a run of 1,000 calls. */
const RUN_PAGE_TARGET_MS = 20;
/** SSE ≤ 5 µs of server CPU per event per client with 100 clients. */
const SSE_CPU_TARGET_MICROS = 5;
const LONG_RUN_CALLS = 1_000;

/** `holdfast serve` in a child process (bench/tools/serve-child.ts), default live options unless `pollMs`. */
class ServerChild {
  readonly #lines: string[] = [];
  readonly #waiters: Array<() => void> = [];
  readonly #exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    readonly url: string,
    /** The panel's own origin (`holdfast-<port>-<tag>.localhost`): its pages answer only there. */
    readonly panelUrl: string,
  ) {
    this.#exited = new Promise((r) => child.once("exit", () => r()));
  }

  static start(path: string, pollMs?: number): Promise<ServerChild> {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", CHILD, path, ...(pollMs === undefined ? [] : [String(pollMs)])],
      { cwd: ROOT, env: { ...process.env, HOLDFAST_TOKEN: TOKEN }, stdio: ["pipe", "pipe", "pipe"] },
    );
    return new Promise((resolveStart, reject) => {
      let server: ServerChild | null = null;
      let buffer = "";
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.stdout.on("data", (chunk: Buffer) => {
        buffer += chunk.toString();
        for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (server === null) {
            const started = JSON.parse(line) as { url: string; panelUrl: string };
            server = new ServerChild(child, started.url, started.panelUrl);
            resolveStart(server);
          } else {
            server.#lines.push(line);
            for (const w of server.#waiters.splice(0)) w();
          }
        }
      });
      child.once("error", reject);
      child.once("exit", (code) => {
        if (server === null) reject(new Error(`the server child exited ${code}: ${stderr.trim()}`));
      });
    });
  }

  /** The child's CPU time so far (user + system), in µs. */
  async cpuMicros(): Promise<number> {
    this.child.stdin.write("cpu\n");
    while (this.#lines.length === 0) await new Promise<void>((r) => this.#waiters.push(r));
    return (JSON.parse(this.#lines.shift()!) as { cpuMicros: number }).cpuMicros;
  }

  async liveStreams(): Promise<number> {
    const response = await fetch(`${this.url}/api/health`, { headers: AUTH });
    return ((await response.json()) as { liveStreams: number }).liveStreams;
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await this.#exited;
  }
}

const waitFor = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`bench server: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

const load = (): string => `load average ${loadavg()[0]!.toFixed(1)} at its start`;

const drift = (d: SseDelivery): string =>
  `p50 over the first tenth of the events ${round(percentile(d.firstTenth, 50))} ms, over the last tenth ${round(percentile(d.lastTenth, 50))} ms (the last far above the first: the server fell behind)`;

/** Median and p99 metrics of one latency, with the spread behind the p99. */
const latencyMetrics = (name: string, samples: ReadonlyArray<number>, note: string): Metric[] => {
  const s = spreadOf(samples);
  return [
    figure({ name: `${name}.p50`, value: round(s.median), unit: "ms", note }),
    figure({
      name: `${name}.p99`,
      value: round(percentile(samples, 99)),
      unit: "ms",
      spread: { n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) },
    }),
  ];
};

/**
 * The panel, as a browser reaches it: connected to the server's address with the panel's host name
 * in `Host` (a `*.localhost` name the resolver here need not know), signed in with a session cookie.
 */
class PanelClient {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1 });

  private constructor(
    private readonly server: ServerChild,
    private readonly cookie: string,
  ) {}

  static async signIn(server: ServerChild): Promise<PanelClient> {
    const host = new URL(server.panelUrl).host;
    const signIn = new PanelClient(server, "");
    const { status, headers } = await signIn.send("POST", "/login", {
      "content-type": "application/x-www-form-urlencoded",
      origin: `http://${host}`,
      body: new URLSearchParams({ token: TOKEN, name: "bench" }).toString(),
    });
    const cookie = [headers["set-cookie"] ?? []].flat()[0]?.split(";")[0];
    signIn.close();
    if (status !== 303 || !cookie)
      throw new Error(`bench server: signing in to the panel answered ${status}`);
    return new PanelClient(server, cookie);
  }

  get(path: string): Promise<{ status: number; bytes: number }> {
    return this.send("GET", path, {}).then(({ status, bytes }) => ({ status, bytes }));
  }

  send(
    method: string,
    path: string,
    options: { readonly body?: string; readonly [header: string]: string | undefined },
  ): Promise<{ status: number; bytes: number; headers: Record<string, string | string[] | undefined> }> {
    const { body, ...extra } = options;
    const target = new URL(this.server.url);
    return new Promise((resolveSend, reject) => {
      const req = request(
        {
          agent: this.#agent,
          host: target.hostname,
          port: target.port,
          method,
          path,
          headers: {
            ...extra,
            host: new URL(this.server.panelUrl).host,
            ...(this.cookie ? { cookie: this.cookie } : {}),
          },
        },
        (response) => {
          let bytes = 0;
          response.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
          });
          response.on("end", () =>
            resolveSend({ status: response.statusCode ?? 0, bytes, headers: response.headers }),
          );
          response.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** One request the bench times: an API path (bearer token) or a panel page (session cookie). */
interface Probe {
  readonly name: string;
  readonly path: string;
  readonly panel?: true;
}

/** Time sequential GETs of each path, interleaved so a change of load falls on all of them alike. */
const measureApi = async (
  server: ServerChild,
  panel: PanelClient,
  probes: ReadonlyArray<Probe>,
  rounds: number,
): Promise<Map<string, { samples: number[]; bytes: number }>> => {
  const results = new Map(probes.map((p) => [p.name, { samples: [] as number[], bytes: 0 }]));
  for (let round = -3; round < rounds; round++) {
    for (const { name, path, panel: isPanel } of probes) {
      const started = performance.now();
      let status: number;
      let bytes: number;
      if (isPanel) ({ status, bytes } = await panel.get(path));
      else {
        const response = await fetch(`${server.url}${path}`, { headers: AUTH });
        bytes = (await response.arrayBuffer()).byteLength;
        status = response.status;
      }
      const ms = performance.now() - started;
      if (status !== 200) throw new Error(`bench server: GET ${path} answered ${status}`);
      // The first rounds warm the server up (JIT, page cache) and are not counted.
      if (round >= 0) results.get(name)!.samples.push(ms);
      results.get(name)!.bytes = bytes;
    }
  }
  return results;
};

interface SseDelivery {
  /** From `append()` resolving (the commit) to the client's parser yielding the message, in ms. */
  readonly samples: ReadonlyArray<number>;
  /** The same for the first and the last tenth of the events: far apart when the server fell behind. */
  readonly firstTenth: ReadonlyArray<number>;
  readonly lastTenth: ReadonlyArray<number>;
  /** The server process's CPU time while the events were written and delivered, per delivery, in µs. */
  readonly cpuPerDelivery: number;
  readonly events: number;
  /** The position of the last event written. */
  readonly last: number;
}

/**
 * `clients` clients on `GET /api/events` from the end of the log, while this process appends
 * `events` events (bench runs of 20 calls, one append per event, as a runtime writes them) at
 * `rate` per second to the journal the server reads.
 */
const measureSse = async (
  server: ServerChild,
  journal: LibsqlJournal,
  options: {
    readonly clients: number;
    readonly events: number;
    readonly rate: number;
    readonly tag: string;
    /** A position at or before the end of the log (where to look for the end from). */
    readonly from: number;
  },
): Promise<SseDelivery> => {
  let head = options.from;
  for (let page = await journal.readAll({ after: head, limit: 5000 }); page.length > 0; ) {
    head = page.at(-1)!.position;
    page = await journal.readAll({ after: head, limit: 5000 });
  }
  const committedAt = new Map<number, number>();
  const samples: number[] = [];
  const firstTenth: number[] = [];
  const lastTenth: number[] = [];
  const lastSeen = new Array<number>(options.clients).fill(head);
  let unmatched = 0;
  const connections = await Promise.all(
    Array.from({ length: options.clients }, async (_, i) => {
      const { status, connection } = await SseConnection.open(`${server.url}/api/events?after=${head}`, {
        token: TOKEN,
        onMessage: (message) => {
          const now = performance.now();
          const position = Number(message.id);
          const committed = committedAt.get(position);
          if (committed === undefined) unmatched++;
          else {
            samples.push(now - committed);
            const nth = position - head;
            if (nth <= options.events / 10) firstTenth.push(now - committed);
            else if (nth > options.events - options.events / 10) lastTenth.push(now - committed);
          }
          lastSeen[i] = position;
        },
      });
      if (status !== 200) throw new Error(`bench server: GET /api/events answered ${status}`);
      return connection;
    }),
  );
  try {
    await waitFor(async () => (await server.liveStreams()) === options.clients, `${options.clients} streams`);
    const cpuBefore = await server.cpuMicros();
    const calls = 20;
    const perRun = 2 * calls + 2;
    const appends = Array.from({ length: Math.ceil(options.events / perRun) }, (_, r) =>
      benchStreams(journal.fingerprintKey, `${options.tag}-${r}`, calls),
    ).flatMap((s) => s.appends.map((events, i) => ({ streamId: s.streamId, version: i, events })));
    appends.length = options.events;
    const started = performance.now();
    let last = head;
    for (const [i, { streamId, version, events }] of appends.entries()) {
      const wait = started + (i * 1000) / options.rate - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const result = await journal.append({ streamId, expectedVersion: version || "no-stream", events });
      const now = performance.now();
      for (const e of result.recorded) committedAt.set(e.position, now);
      last = result.recorded.at(-1)!.position;
    }
    await waitFor(() => lastSeen.every((p) => p >= last), "every client to get the last event");
    const cpuAfter = await server.cpuMicros();
    if (unmatched > 0)
      throw new Error(`bench server: ${unmatched} messages arrived for no event written here`);
    const deliveries = options.events * options.clients;
    if (samples.length !== deliveries)
      throw new Error(`bench server: ${samples.length} deliveries, expected ${deliveries}`);
    return {
      samples,
      firstTenth,
      lastTenth,
      cpuPerDelivery: (cpuAfter - cpuBefore) / deliveries,
      events: options.events,
      last,
    };
  } finally {
    for (const connection of connections) connection.abort();
    await waitFor(async () => (await server.liveStreams()) === 0, "the streams to close");
  }
};

/**
 * 8. The server: the runs list, its search and run pages over 100,000 runs (one of them of 1,000
 * calls); SSE delivery to 10 and 100 clients. Targets: DESIGN §12 (issue 33 item 5).
 */
export const serverSection: Section = {
  name: "server",
  async run({ options, temp }) {
    const path = join(temp.folder("server"), "journal.db");
    const heldEvery = 100;
    const fixture = await writeRunsFixture(path, {
      runs: 100_000,
      heldEvery,
      longRunCalls: LONG_RUN_CALLS,
      onProgress: throttled("server", "writing runs", 5000),
    });
    const runs = fixture.runs;
    const rounds = options.quick ? 20 : 100;
    const rate = 100;
    const events = options.quick ? 300 : 1_500;
    const metrics: Metric[] = [];
    let from = 0;
    const journal = LibsqlJournal.open(path);
    try {
      const server = await ServerChild.start(path);
      try {
        progress("server", `API latency, ${rounds} rounds over ${runs.toLocaleString("en-US")} runs`);
        const apiLoad = load();
        const panel = await PanelClient.signIn(server);
        // A chat within a time range: the needle's chat, two seconds around its admission.
        const needle = heldRunId(321);
        const found = (await (
          await fetch(`${server.url}/api/runs?id=${needle}&limit=1`, { headers: AUTH })
        ).json()) as { runs: Array<{ runId: string; chatId: string; admittedAt: string }> };
        const row = found.runs[0];
        if (row?.runId !== needle) throw new Error(`bench server: the fixture has no run ${needle}`);
        const at = Date.parse(row.admittedAt);
        const search = new URLSearchParams({
          chat: row.chatId,
          from: new Date(at - 1000).toISOString(),
          to: new Date(at + 1000).toISOString(),
          limit: "50",
        });
        const list: Probe[] = [
          { name: "server.api.runs_page", path: "/api/runs?limit=50" },
          { name: "server.api.runs_search", path: `/api/runs?${search}` },
          { name: "server.api.runs_held", path: "/api/runs?status=held" },
        ];
        const pages: Probe[] = [
          { name: "server.api.run_view_1000_calls", path: `/api/runs/${LONG_RUN_ID}` },
          { name: "server.panel.run_page_1000_calls", path: `/runs/${LONG_RUN_ID}`, panel: true },
        ];
        const context: Probe[] = [
          { name: "server.api.run_view", path: `/api/runs/${heldRunId(7)}` },
          { name: "server.panel.runs_page", path: "/", panel: true },
        ];
        const api = await measureApi(server, panel, [...list, ...pages, ...context], rounds);
        panel.close();
        const over = `${rounds} samples, over a journal of ${runs.toLocaleString("en-US")} runs (${fixture.held.toLocaleString("en-US")} held, ${fixture.events.toLocaleString("en-US")} events; run ${LONG_RUN_ID} held with ${LONG_RUN_CALLS.toLocaleString("en-US")} calls); server in a child process; ${apiLoad}`;
        const noteOf = ({ name, path, panel: isPanel }: Probe) =>
          `GET ${path}${isPanel ? " (panel page, session cookie)" : ""}, one request at a time over a kept-alive connection, ${api.get(name)!.bytes.toLocaleString("en-US")} bytes; ${over}`;
        for (const [probes, target] of [
          [list, LIST_TARGET_MS],
          [pages, RUN_PAGE_TARGET_MS],
          [context, null],
        ] as const)
          for (const probe of probes) {
            const [p50, p99] = latencyMetrics(probe.name, api.get(probe.name)!.samples, noteOf(probe));
            metrics.push(
              target === null ? p50! : targeted({ ...p50!, ratio: null }, "<=", target, "value"),
              p99!,
            );
          }
        // A fresh process: its first events run cold code; a short round warms the stream up.
        from = (await measureSse(server, journal, { clients: 10, events: 50, rate, tag: "warm", from })).last;
        for (const clients of [10, 100]) {
          progress("server", `SSE delivery to ${clients} clients (${events} events at ${rate}/s)`);
          const sseLoad = load();
          const d = await measureSse(server, journal, {
            clients,
            events,
            rate,
            tag: `sse-c${clients}`,
            from,
          });
          from = d.last;
          metrics.push(
            ...latencyMetrics(
              `server.sse.c${clients}.delivery`,
              d.samples,
              `${clients} clients on GET /api/events (server in a child process, default pollMs 200: on libSQL the server sees another process's commits by polling); ${d.events} events appended one at a time at ${rate}/s by this process; from append() resolving to the client's message; ${drift(d)}; ${sseLoad}`,
            ),
            ((fields) =>
              clients === 100
                ? targeted({ ...fields, ratio: null }, "<=", SSE_CPU_TARGET_MICROS, "value")
                : figure(fields))({
              name: `server.sse.c${clients}.cpu_per_delivery`,
              value: round(d.cpuPerDelivery),
              unit: "µs",
              note: "the server process's CPU time while the events were written and delivered, per event per client (polling and heartbeats included)",
            }),
          );
        }
      } finally {
        await server.close();
      }
      const fast = await ServerChild.start(path, 20);
      try {
        progress("server", `SSE delivery to 100 clients with pollMs 20`);
        from = (await measureSse(fast, journal, { clients: 10, events: 50, rate, tag: "warm-fast", from }))
          .last;
        const sseLoad = load();
        const d = await measureSse(fast, journal, { clients: 100, events, rate, tag: "sse-poll20", from });
        metrics.push(
          ...latencyMetrics(
            "server.sse.c100_poll20.delivery",
            d.samples,
            `the same with 100 clients and live: { pollMs: 20 }: what is left is the fan-out; ${drift(d)}; ${sseLoad}`,
          ),
          figure({
            name: "server.sse.c100_poll20.cpu_per_delivery",
            value: round(d.cpuPerDelivery),
            unit: "µs",
            note: "as above, polling every 20 ms",
          }),
        );
      } finally {
        await fast.close();
      }
    } finally {
      await journal.close();
    }
    return { metrics };
  },
};
