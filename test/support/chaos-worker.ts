/**
 * A real holdfast process in which agents, tools, reconcilers, a model integration, subscribers
 * and the HTTP server's runtime throw in odd places (a chaos variant of review R1's reproduction).
 * A rejection nobody handled, or an exception nobody caught, prints an `unhandled` line and exits
 * 70, as Node's default would end the process. Configured by environment:
 *   HF_STORE   the journal: a file path or a PostgreSQL URL
 *   HF_TOKEN_FILE  where the HTTP server keeps its token
 *   HF_PHASE   "prepare" with HF_CASE "reexec" | "reconcile": submit that case; its agent or tool
 *              kills the process, leaving the run interrupted. "chaos": recover on open (never
 *              awaiting `done`), submit every live case (never awaiting `result`), subscribe,
 *              serve, and report.
 * Prints one JSON object per line on stdout.
 */
import { generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import * as Schema from "effect/Schema";
import { journaledModel } from "../../src/ai.js";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  type Reconciler,
  type RecordedEvent,
  serve,
  type Turn,
} from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const died = (kind: string) => (reason: unknown) => {
  let text: string;
  try {
    text = reason instanceof Error ? String(reason.stack) : String(reason);
  } catch {
    text = "(a value that cannot be printed)";
  }
  out({ kind: "unhandled", which: kind, reason: text });
  process.exit(70);
};
process.on("unhandledRejection", died("unhandledRejection"));
process.on("uncaughtException", died("uncaughtException"));

const prepare = env.HF_PHASE === "prepare";

/** A value `String()` cannot convert: no prototype, so no `toString`. */
const bare = (): unknown => Object.create(null);

/** An Error whose `message` cannot be read. */
const unreadable = (): Error => {
  const error = new Error("hidden");
  Object.defineProperty(error, "message", {
    get() {
      throw new Error("the message getter throws");
    },
  });
  return error;
};

const note = defineTool({
  name: "note",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => ({ noted: step }),
});

const odd = defineTool({
  name: "odd",
  args: Schema.Struct({}),
  // Not async: the throw happens while the call is being made.
  run: (() => {
    throw unreadable();
  }) as unknown as () => Promise<unknown>,
});

const refuses = defineTool({
  name: "refuses",
  args: Schema.Struct({}),
  run: async () => {
    throw new DefiniteFailure("the service refused (403)");
  },
});

const bareReconciler: Reconciler<Record<string, never>> = {
  name: "bare-thrower",
  check: (() => {
    throw bare();
  }) as unknown as Reconciler<Record<string, never>>["check"],
};

const reconciledOdd = defineTool({
  name: "reconciled_odd",
  args: Schema.Struct({}),
  reconciler: bareReconciler,
  run: async () => {
    if (prepare) process.kill(process.pid, "SIGKILL");
    return { sent: true };
  },
});

const cleanupThrows: Reconciler<Record<string, never>> = {
  name: "cleanup-throws",
  check: async () => ({ outcome: "unknown", evidence: null }),
  settled: () => {
    throw bare();
  },
};

const settles = defineTool({
  name: "settles",
  args: Schema.Struct({}),
  reconciler: cleanupThrows,
  run: async () => ({ sent: true }),
});

const model = new MockLanguageModelV3({
  doGenerate: async () => {
    throw unreadable();
  },
});

type Case = "reexec" | "reconcile" | "sync-throw" | "tool-odd" | "floating" | "settled" | "model" | "healthy";

const work = async (turn: Turn, which: Case) => {
  switch (which) {
    case "reexec":
      await turn.tool("note", { step: "before" });
      if (prepare) process.kill(process.pid, "SIGKILL");
      throw bare();
    case "reconcile":
      return turn.tool("reconciled_odd", {});
    case "tool-odd":
      return turn.tool("odd", {});
    case "floating":
      // Not awaited: its failure is recorded, and must not reach the process.
      void turn.tool("refuses", {});
      return "returned without waiting";
    case "settled":
      return turn.tool("settles", {});
    case "model":
      return (await generateText({ model: journaledModel(turn, model), prompt: "hi", maxRetries: 0 })).text;
    default:
      return turn.tool("note", { step: which });
  }
};

const chaos = defineAgent({
  name: "chaos",
  version: "1",
  // Not async: "sync-throw" throws before any promise exists.
  run: (turn, input: { case: Case }) => {
    if (input.case === "sync-throw") throw unreadable();
    return work(turn, input.case);
  },
});

const LIVE: ReadonlyArray<Case> = ["sync-throw", "tool-odd", "floating", "settled", "model", "healthy"];

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_STORE!,
    agents: [chaos],
    tools: [note, odd, refuses, reconciledOdd, settles],
    allowlist: {},
    // Preparing one case must not recover (and so re-execute) the other.
    recovery: { leaseMs: 3000, onOpen: !prepare },
  });
  if (prepare) {
    await runtime.submit({
      chatId: env.HF_CASE!,
      inputId: "i",
      agent: "chaos",
      content: { case: env.HF_CASE },
    });
    await new Promise(() => undefined);
  }
  out({ kind: "recovery", resumed: runtime.recovery.resumed, held: runtime.recovery.held });

  // Subscribers: one that throws from its loop (its own promise: it handles it), one that stops
  // after one event, one that throws into the iterator, and one that keeps counting.
  const seen: string[] = [];
  const throwing = (async () => {
    for await (const _ of runtime.subscribe({ pollMs: 20 })) throw bare();
  })().catch(() => out({ kind: "subscriber", which: "threw in its loop" }));
  const stopped = runtime.subscribe({ pollMs: 20 });
  void stopped.next().then(() => out({ kind: "subscriber", which: "took one event and stopped" }));
  await runtime
    .subscribe({ pollMs: 20 })
    .throw?.(bare())
    .catch(() => out({ kind: "subscriber", which: "threw into its iterator" }));
  const counting = (async () => {
    for await (const recorded of runtime.subscribe({ pollMs: 20, filter: { types: ["run.completed"] } })) {
      seen.push((recorded as RecordedEvent).streamId);
      // floating, settled and healthy
      if (seen.length >= 3) break;
    }
  })();

  const runIds: Record<string, string> = {};
  for (const which of LIVE) {
    // `result` is never awaited: a run's end must not need anyone to listen for it.
    const handle = await runtime.submit({
      chatId: which,
      inputId: "i",
      agent: "chaos",
      content: { case: which },
    });
    runIds[which] = handle.runId;
  }
  for (const row of await runtime.runs()) runIds[row.chatId] ??= row.runId;

  // Wait until no run is active: every path ends its run, none leaves it running.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const rows = await runtime.runs();
    if (rows.every((r) => r.status !== "running" && r.status !== "interrupted")) break;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await counting;
  await throwing;

  // The HTTP server, with a runtime whose decide throws a tagged error that cannot be read.
  const server = await serve({
    store: env.HF_STORE!,
    port: 0,
    tokenFile: env.HF_TOKEN_FILE!,
    runtime: {
      decide: async () => {
        throw Object.defineProperty({ _tag: "InvalidInput" }, "message", {
          get() {
            throw new Error("the message getter throws");
          },
        });
      },
      grantRetry: async () => {
        throw bare();
      },
      withdraw: (chatId, inputId, options) => runtime.withdraw(chatId, inputId, options),
      cancel: (runId, request) => runtime.cancel(runId, request),
      approve: (runId, call, request) => runtime.approve(runId, call, request),
      deny: (runId, call, request) => runtime.deny(runId, call, request),
      signal: (runId, name, payload, request) => runtime.signal(runId, name, payload, request),
      fork: (runId, options) => runtime.fork(runId, options),
      pause: (runId, request) => runtime.pause(runId, request),
      resume: (runId, request) => runtime.resume(runId, request),
      documents: runtime.documents,
      schedules: runtime.schedules,
    },
  });
  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const held = runIds["tool-odd"]!;
  const decided = await post(`/api/runs/${held}/decisions`, {
    basedOnVersion: 1,
    decidedBy: "ada",
    decision: "stop",
  });
  const granted = await post(`/api/runs/${held}/calls/${held}%2F0/retries`, {
    attempts: 1,
    grantedBy: "ada",
  });
  const after = await fetch(`${server.url}/api/runs/${held}`, {
    headers: { authorization: `Bearer ${server.token.token}` },
  });
  out({ kind: "http", decide: decided.status, retry: granted.status, after: after.status });
  await server.close();

  const runs: Record<string, unknown> = {};
  for (const [which, runId] of Object.entries(runIds)) {
    const row = await runtime.run(runId);
    const failed = (await runtime.events(runId)).find((e) => e.event.type === "run.failed")?.event;
    runs[which] = {
      status: row?.status,
      reasons: row?.heldReasons.map((r) => `${r.code}: ${r.detail}`),
      error: failed?.type === "run.failed" ? failed.error : undefined,
    };
  }
  out({ kind: "runs", runs, completedSeen: seen.length });
  out({ kind: "audit", findings: (await runtime.audit()).findings });
  await runtime.close();
  out({ kind: "alive" });
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
