/**
 * One holdfast process of a torture trial. Opens the journal (recovering whatever the previous
 * process left), submits the trial's input (idempotent: a second submit reuses the run), waits for
 * every run it owns to settle, prints one JSON line, exits 0. Crash points kill it on the way.
 *   TORTURE_DB, TORTURE_DIR, TORTURE_SERVER
 *   TORTURE_AGENT "ai": the AI SDK agent (torture/ai-definitions.ts), with TORTURE_AI_MODE
 *   ("generate" | "stream"), TORTURE_AI_POLICY ("hold" | "replay") and TORTURE_AI_ERRORS ("1": some
 *   streamed answers break off with an in-band error)
 *   TORTURE_AGENT "mcp": the MCP agent (torture/mcp-definitions.ts)
 *   TORTURE_AGENT "ssh": the SSH agent (torture/ssh-definitions.ts), with TORTURE_SSH (the server)
 *   TORTURE_LEASE_MS: the runtime's lease (default 3 s); a reconciler's budget is half of it
 *   TORTURE_AGENT "terminal": the terminal agent (torture/terminal-definitions.ts)
 *   TORTURE_AGENT "browser": the browser agent (torture/browser-definitions.ts), against the test site
 *   of TORTURE_SERVER, with TORTURE_BROWSER_PROBE ("1": the submit's probe is declared)
 *   TORTURE_FAULTS: the ordinary day's fault kinds the classic agent plays, comma-separated
 *   ("backoff,cancel,queue,pause"); with `queue`, it queues QUEUED_INPUTS behind the trial's run
 *   (again after a restart: idempotent, in the same order) and waits for them too, unless the
 *   trial's run is paused (they wait behind it) or held; with `sleep` or `signal`, a run that parks
 *   is woken here (the wake loop) and the process stays until no run of it waits or runs; with
 *   `schedule`, it declares the torture's schedules (until TORTURE_SCHEDULE_UNTIL, ms since the
 *   epoch), notes in `<dir>/alive` when it is up, ticks them until then, pauses them, and stays
 *   until their runs and queues are done
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { openRuntime, type Runtime, type RuntimeOptions } from "../src/index.js";
import {
  FAULTS,
  faultKindsFrom,
  makeTortureDefinitions,
  QUEUED_AGENT,
  QUEUED_INPUTS,
  TORTURE_CHAT,
  TORTURE_SCHEDULES,
  TORTURE_SECRET,
  type TortureFault,
  tortureScheduleSpecs,
} from "./definitions.js";

const env = process.env;
const fault = FAULTS.find((f) => f === env.TORTURE_FAULT) as TortureFault | undefined;
// The AI SDK and MCP agents' modules load their SDKs: only for their trials.
type Definitions = Required<Pick<RuntimeOptions, "agents" | "tools" | "allowlist">> & {
  readonly close?: () => Promise<void>;
  /** Secrets of the agent's own, registered beside the torture's. */
  readonly secrets?: Readonly<Record<string, string>>;
};
const definitions = async (): Promise<Definitions> => {
  if (env.TORTURE_AGENT === "ai")
    return (await import("./ai-definitions.js")).makeAiTortureDefinitions({
      dir: env.TORTURE_DIR!,
      mode: env.TORTURE_AI_MODE === "stream" ? "stream" : "generate",
      inDoubt: env.TORTURE_AI_POLICY === "replay" ? "replay" : "hold",
      inBandErrors: env.TORTURE_AI_ERRORS === "1",
    });
  if (env.TORTURE_AGENT === "mcp")
    return (await import("./mcp-definitions.js")).makeMcpTortureDefinitions({ dir: env.TORTURE_DIR! });
  if (env.TORTURE_AGENT === "ssh")
    return (await import("./ssh-definitions.js")).makeSshTortureDefinitions({
      dir: env.TORTURE_DIR!,
      target: JSON.parse(env.TORTURE_SSH!),
    });
  if (env.TORTURE_AGENT === "terminal")
    return (await import("./terminal-definitions.js")).makeTerminalTortureDefinitions({
      dir: env.TORTURE_DIR!,
    });
  if (env.TORTURE_AGENT === "browser")
    return (await import("./browser-definitions.js")).makeBrowserTortureDefinitions({
      site: env.TORTURE_SERVER!,
      probe: env.TORTURE_BROWSER_PROBE === "1",
    });
  return makeTortureDefinitions({
    dir: env.TORTURE_DIR!,
    server: env.TORTURE_SERVER!,
    ...(fault ? { fault } : {}),
    kinds: faultKindsFrom(env.TORTURE_FAULTS),
  });
};

const main = async () => {
  const { agents, tools, allowlist, close, secrets } = await definitions();
  const runtime = await openRuntime({
    store: env.TORTURE_DB!,
    agents,
    tools,
    allowlist,
    secrets: { TORTURE_TOKEN: TORTURE_SECRET, ...secrets },
    recovery: { leaseMs: Number(env.TORTURE_LEASE_MS ?? 3_000) },
  });
  const recovered = await (runtime.recovery as typeof runtime.recovery & { done: Promise<unknown[]> }).done;
  let result: unknown = null;
  const label = env.TORTURE_LABEL ?? "t";
  const queueKind = faultKindsFrom(env.TORTURE_FAULTS).includes("queue");
  const scheduleKind = faultKindsFrom(env.TORTURE_FAULTS).includes("schedule");
  const until = Number(env.TORTURE_SCHEDULE_UNTIL ?? 0);
  if (scheduleKind) {
    if (Date.now() < until) for (const spec of tortureScheduleSpecs()) await runtime.schedules.upsert(spec);
    appendFileSync(join(env.TORTURE_DIR!, "alive"), `${process.pid} ${Date.now()}\n`);
  }
  try {
    const handle = await runtime.submit({
      chatId: TORTURE_CHAT,
      inputId: "trial",
      agent: "torture",
      content: { label },
    });
    // The queue kind: the first input at once, the others a moment later (a kill may come between).
    const queued = queueKind ? submitQueued(runtime, label) : Promise.resolve([]);
    let main = (await handle.result) as { status: string };
    // Parked (the wait kinds): this process's wake loop wakes it when due; its end is awaited here.
    if (main.status === "waiting") main = await afterWaits(runtime, handle.runId);
    result = main;
    const waits = await queued;
    // A paused or held run keeps its chat busy: its queued inputs wait for a resume or a decision.
    if (queueKind && main.status !== "paused" && main.status !== "held")
      result = { main, queued: await Promise.all(waits.map((w) => w.then((r) => r.status))) };
  } catch (error) {
    result = { error: (error as { _tag?: string })._tag ?? String(error) };
  }
  if (scheduleKind) await schedulesDone(runtime, until);
  await settled(runtime);
  await runtime.close();
  await close?.();
  process.stdout.write(`${JSON.stringify({ recovered: recovered.length, result })}\n`);
};

/** Queue the kind's inputs in order; their results (or a promise that never comes, while the chat is busy). */
const submitQueued = async (runtime: Runtime, label: string): Promise<Array<Promise<{ status: string }>>> => {
  const results: Array<Promise<{ status: string }>> = [];
  for (const [i, inputId] of QUEUED_INPUTS.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, 150));
    const handle = await runtime.submit({
      chatId: TORTURE_CHAT,
      inputId,
      agent: QUEUED_AGENT,
      content: { label: `${label}-${inputId}` },
      whenBusy: "queue",
    });
    results.push(handle.result as Promise<{ status: string }>);
  }
  return results;
};

/** A parked run's result once it no longer waits (woken and run here, or ended otherwise). */
const afterWaits = async (runtime: Runtime, runId: string): Promise<{ status: string }> => {
  for (;;) {
    const row = await runtime.run(runId);
    if (row && row.status !== "waiting" && row.status !== "running")
      return (await runtime.wait(runId)) as { status: string };
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** The `schedule` kind: ticks until `until`, then the schedules paused and their queues drained (unless held). */
const schedulesDone = async (runtime: Runtime, until: number): Promise<void> => {
  while (Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  for (const { id } of TORTURE_SCHEDULES)
    if (await runtime.schedules.get(id)) await runtime.schedules.pause(id, { by: "torture-harness" });
  for (let i = 0; i < 600; i++) {
    const queues = await Promise.all(TORTURE_SCHEDULES.map(({ id }) => runtime.queue(`schedule-${id}`)));
    if (queues.every((q) => q.items.length === 0 || q.waitingFor?.status === "held")) return;
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Until no run executes or waits here any more (a child may outlive a cancelled or paused parent). */
const settled = async (runtime: Runtime): Promise<void> => {
  for (let i = 0; i < 600; i++) {
    const rows = await runtime.runs();
    if (!rows.some((r) => r.status === "running" || r.status === "waiting")) return;
    await new Promise((r) => setTimeout(r, 50));
  }
};

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
