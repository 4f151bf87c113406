/**
 * The torture agent and its tools, shared by the single-worker harness (agent-process.ts) and the
 * multi-worker one (worker-module.ts, loaded by `holdfast worker --module`). Every effect leaves a
 * trace an outside witness counts: lines in witness files (send, shell) and requests to the
 * witness server (http_post), each tagged with the call's idempotency key.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { type HttpLookup, makeHttpTool } from "../src/adapters/integrations/tools/httpTool.js";
import { makeShellTool, makeWriteFileTool } from "../src/adapters/integrations/tools/index.js";
import { ApprovalDenied, CallFailed, defineAgent, defineTool } from "../src/index.js";

/**
 * Faults the harness can put into a trial, besides killing it:
 *  - `agent-throws`: the agent throws while a call it started is still in flight;
 *  - `sibling-fails`: a call in `turn.all` fails without proof while its sibling is still running;
 *  - `reconciler-throws`: the HTTP status lookup throws during recovery.
 */
export const FAULTS = ["agent-throws", "sibling-fails", "reconciler-throws"] as const;
export type TortureFault = (typeof FAULTS)[number];

/**
 * The ordinary day's fault kinds (issue 31): what the agent does besides its usual calls, so the
 * harness can kill it there. Each kind is switched on by `--faults` and named in the JSON record.
 *  - `backoff`: a call with a retry policy against a rate-limited endpoint of the witness server,
 *    which refuses its first request(s) with 429 (`Retry-After: 5`, then none): the run sits in
 *    durable backoffs, where the `during-backoff` crash point (and random kills) land.
 *  - `cancel`: the harness cancels the trial's run from outside (a second runtime on the journal)
 *    with a call in flight, killing the owner just before or just after the request commits; the
 *    agent's sends then answer late (`holdMs`), so a call is in flight more often.
 *  - `queue`: the agent process queues three inputs (`whenBusy: "queue"`) behind the trial's run,
 *    the later two a moment later (a kill may come between), each run by `torture-queued`.
 *  - `pause`: the harness pauses the run from outside at a random moment with a call in flight,
 *    restarts the process while it is paused (sometimes killing it), then resumes it.
 *  - `sleep`: the run sleeps (durably, 200–1500 ms by label) after its HTTP post, and its child
 *    sleeps too: the run parks and is woken from the due index, where the wake-up's crash points
 *    (`before-wake`, `after-woken`) and kills while parked land (decision 0064).
 *  - `signal`: the run waits for the signal {@link SIGNAL_NAME} (timeout {@link SIGNAL_TIMEOUT_MS})
 *    that the harness sends from another process: before the wait, while it is parked, twice with
 *    one `signalId`, or never (the wait times out); the owner is killed while parked and right after
 *    a signal's commit (decision 0064).
 *  - `schedule`: the agent process (every worker, on PostgreSQL) declares {@link TORTURE_SCHEDULES}
 *    — 1 s and 1.5 s periods and a seconds cron, overlap `skip` and `queue`, catch-up `latest` —
 *    whose runs ({@link SCHEDULED_AGENT}) send once and sometimes outlast a period; processes are
 *    killed across ticks (`before-tick-admit`, `after-tick-admit`, `after-tick-recorded`) and at
 *    random, and restarted (decision 0064).
 *  - `approval`: the agent makes one {@link APPROVAL_TOOL} call that needs a person's approval
 *    (editable); the harness approves it from another runtime or process (sometimes with edited
 *    arguments) or denies it (the agent catches `ApprovalDenied` and finishes); the owner is killed
 *    while parked, the approver at `after-approval`, a waker at `after-approval-wake` (decision 0064).
 */
export const FAULT_KINDS = [
  "backoff",
  "cancel",
  "queue",
  "pause",
  "sleep",
  "signal",
  "schedule",
  "approval",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * The fault kinds whose runs wait (decision 0064): each has its agent branch here, its harness
 * actor in both harnesses and its check in `torture/check-waits.ts` (`WAIT_CHECKS`). `approval`
 * and `schedule` join this list the same way.
 */
export const WAIT_KINDS = [
  "sleep",
  "signal",
  "schedule",
  "approval",
] as const satisfies ReadonlyArray<FaultKind>;
export type WaitFaultKind = (typeof WAIT_KINDS)[number];
/** The wait kinds among `kinds`. */
export const waitKindsIn = (kinds: ReadonlyArray<FaultKind>): WaitFaultKind[] =>
  WAIT_KINDS.filter((k) => kinds.includes(k));

/** The `approval` kind's tool: a witnessed payment that needs approval; the approver may edit the amount. */
export const APPROVAL_TOOL = "pay";
/** The amount the `approval` kind's agent asks to pay; an edit changes it. */
export const APPROVAL_AMOUNT = 100;

/** How long the `sleep` kind's run sleeps: 200–1500 ms, by its label (the same on every re-execution). */
export const sleepMsFor = (label: string): number => {
  let h = 0;
  for (const c of label) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return 200 + (h % 1301);
};
/** The agent the `schedule` kind's ticks run: one witnessed send, held `holdMs` (its input). */
export const SCHEDULED_AGENT = "torture-scheduled";
/**
 * The `schedule` kind's schedules: a 1-second one whose runs outlast its period now and then
 * (overlap `skip`: those ticks are skipped), a 1.5-second one whose runs queue behind each other
 * (overlap `queue`), and a seconds cron (6 fields, croner). All catch up `latest`.
 */
export const TORTURE_SCHEDULES = [
  { id: "t-skip", everyMs: 1_000, overlap: "skip", input: { label: "sched-skip", holdMs: 1_200 } },
  { id: "t-queue", everyMs: 1_500, overlap: "queue", input: { label: "sched-queue", holdMs: 900 } },
  { id: "t-cron", cron: "* * * * * *", overlap: "skip", input: { label: "sched-cron", holdMs: 100 } },
] as const;
/** The `schedule` kind's schedules as `runtime.schedules.upsert` takes them. */
export const tortureScheduleSpecs = () =>
  TORTURE_SCHEDULES.map((s) => ({
    ...s,
    input: { ...s.input },
    agent: SCHEDULED_AGENT,
    catchUp: "latest" as const,
    timezone: "UTC",
  }));

/** The `sleep` kind's child sleeps this long. */
export const CHILD_SLEEP_MS = 200;
/** The signal the `signal` kind's run waits for. */
export const SIGNAL_NAME = "go";
/** The `signal` kind's wait times out after this long without its signal: `{ timedOut: true }`. */
export const SIGNAL_TIMEOUT_MS = 2_500;

/**
 * The faults below holdfast (issue 35 item 6, decision 0080): played by the harness on the storage
 * itself, not by the agent. The multi-worker harness plays the PostgreSQL ones on a private server
 * reached through one TCP proxy per worker:
 *  - `pg-restart`: the private server restarted fast (`pg_ctl restart -m fast`) or its postmaster
 *    SIGKILLed and started again (crash recovery), at random moments between the kill waves;
 *  - `partition`: one worker's proxy blackholed (both directions) or refusing, for a while shorter
 *    or longer than the lease, then healed;
 *  - `commit-lost`: one worker's connection cut right after (the server commits, the worker never
 *    hears it) or right before (rolled back) the COMMIT of an append carrying an intent or an
 *    outcome;
 *  - `clock`: one worker's wall clock stepped forward or back by about an hour for a while (up to
 *    past its lease), then set right, its monotonic clock running on (libfaketime in the worker
 *    process, a timestamp file per worker slot);
 *  - `disk-full`: the journal's tables live in a tablespace on a small tmpfs, which a ballast file
 *    fills for a few seconds: appends are refused (53100), then space is back.
 */
export const STORAGE_FAULT_KINDS = ["pg-restart", "partition", "commit-lost", "disk-full", "clock"] as const;
export type StorageFaultKind = (typeof STORAGE_FAULT_KINDS)[number];
/** The storage fault kinds the multi-worker PostgreSQL harness plays (all of them). */
export const PG_FAULT_KINDS = [
  "pg-restart",
  "partition",
  "commit-lost",
  "clock",
  "disk-full",
] as const satisfies ReadonlyArray<StorageFaultKind>;
export type PgFaultKind = (typeof PG_FAULT_KINDS)[number];

const namesIn = (list: string | undefined): string[] =>
  (list ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

/** Fault kinds from a comma-separated list (`--faults`, `TORTURE_FAULTS`); throws on an unknown one. */
export const faultKindsFrom = (list: string | undefined): FaultKind[] => {
  const names = namesIn(list);
  for (const name of names)
    if (!(FAULT_KINDS as ReadonlyArray<string>).includes(name))
      throw new Error(
        `unknown fault kind "${name}": the kinds are ${[...FAULT_KINDS, ...STORAGE_FAULT_KINDS].map((k) => `"${k}"`).join(", ")}`,
      );
  return [...new Set(names)] as FaultKind[];
};

/**
 * `--faults` split into the ordinary day's kinds (the agent plays them) and the storage fault kinds
 * (the harness plays them); throws on an unknown name.
 */
export const splitFaults = (
  list: string | undefined,
): { readonly kinds: FaultKind[]; readonly storage: StorageFaultKind[] } => {
  const names = namesIn(list);
  const storage = names.filter((n) => (STORAGE_FAULT_KINDS as ReadonlyArray<string>).includes(n));
  const kinds = faultKindsFrom(names.filter((n) => !storage.includes(n)).join(","));
  return { kinds, storage: [...new Set(storage)] as StorageFaultKind[] };
};

/** The backoff kind's call: its retry policy (recorded in its intent) and the refusals it meets. */
export const BACKOFF_CALL = "http_retry";
export const BACKOFF_POLICY = {
  attempts: 4,
  backoff: { initialMs: 300, maxMs: 2_000, factor: 2, jitter: 0.2 },
} as const;
/** How many 429s the witness answers a run's retried call with before it acts: 1 or 2, by label. */
export const refusalsFor = (label: string): number => 1 + (label.charCodeAt(label.length - 1) % 2);

/** The chat of the trial's run; the queue kind's inputs wait in its queue. */
export const TORTURE_CHAT = "torture";
/** The queue kind's inputs, in submission order, behind the trial's run (`trial`). */
export const QUEUED_INPUTS = ["q1", "q2", "q3"] as const;
/** The agent that runs a queued input: one witnessed send. */
export const QUEUED_AGENT = "torture-queued";
/** Who the harness says it is in its cancels, pauses and resumes (recovery never resumes a run). */
export const HARNESS_BY = "torture-harness";

export interface TortureSetting {
  /** The trial's folder: `witness/`, `work/`, `receipts/` live in it. */
  readonly dir: string;
  /** The witness server's base URL. */
  readonly server: string;
  readonly fault?: TortureFault;
  /** The ordinary day's fault kinds the agent plays (none: the agent as before). */
  readonly kinds?: ReadonlyArray<FaultKind>;
}

/** The tools the safe list names: only `read_safe` (its in-doubt calls are replayed). */
export const ALLOWLISTED = new Set(["read_safe"]);

/**
 * A registered secret the shell command prints: its result is stored masked, its receipts hold it
 * raw until the outcome is recorded. The byte scan after each trial looks for it everywhere.
 */
export const TORTURE_SECRET = "torture-token-3Hq8zV";

/** The error texts the torture's tools and agent throw: with encryption on, sealed wherever stored. */
export const TORTURE_ERROR_TEXTS = {
  flaky: "connection reset after the request was sent",
  reconciler: "the status service is down",
  agent: "the agent failed with a call in flight",
} as const;

export const makeTortureDefinitions = ({ dir, server, fault, kinds = [] }: TortureSetting) => {
  const witness = (name: string) => join(dir, "witness", name);

  const send = defineTool({
    name: "send",
    args: Schema.Struct({ label: Schema.String, holdMs: Schema.optional(Schema.Number) }),
    // Not allowlisted, no reconciler: an in-doubt send is held for a person. With `holdMs` it takes
    // effect at once and answers later: a call still in flight when something else goes wrong.
    run: async ({ label, holdMs }, { idempotencyKey }) => {
      appendFileSync(witness("send.txt"), `${label} ${idempotencyKey}\n`);
      if (holdMs) await new Promise((resolve) => setTimeout(resolve, holdMs));
      return { sent: label };
    },
  });
  // The approval kind: its effect is a witness line, written only once an approval is committed.
  const pay = defineTool({
    name: APPROVAL_TOOL,
    args: Schema.Struct({ label: Schema.String, amount: Schema.Number }),
    approval: { when: "required", editable: true },
    description: "Pays the torture trial's invoice",
    run: async ({ label, amount }, { idempotencyKey }) => {
      appendFileSync(witness("pay.txt"), `${label} ${amount} ${idempotencyKey}\n`);
      return { paid: amount };
    },
  });
  const flaky = defineTool({
    name: "flaky",
    args: Schema.Struct({ label: Schema.String }),
    // Fails without proof that nothing happened: in doubt, and held.
    run: async () => {
      throw new Error(TORTURE_ERROR_TEXTS.flaky);
    },
  });
  const readSafe = defineTool({
    name: "read_safe",
    args: Schema.Struct({ label: Schema.String }),
    disposition: "replay",
    run: async ({ label }, { idempotencyKey }) => {
      appendFileSync(witness("read.txt"), `${label} ${idempotencyKey}\n`);
      return { read: label };
    },
  });
  /** The witness server's lookup: the key's result when it acted, else it reserves the key. */
  const reservingLookup = async (key: string): Promise<HttpLookup> => {
    const res = await fetch(`${server}/lookup/${encodeURIComponent(key)}`, { method: "POST" });
    if (!res.ok) return { found: "unknown", reason: `status ${res.status}` };
    const answer = (await res.json()) as { found?: unknown; result?: unknown; reserved?: unknown };
    if (answer.found === true) return { found: true, result: answer.result };
    if (answer.found === false && answer.reserved === true) return { found: false, reserved: true };
    return { found: "unknown", reason: `unexpected answer ${JSON.stringify(answer)}` };
  };
  const http = makeHttpTool({
    name: "http_post",
    timeoutMs: 5_000,
    // Looks the key up and, when it did not act, reserves it: a late request with it is refused.
    lookup: async (key) => {
      if (fault === "reconciler-throws") throw new Error(TORTURE_ERROR_TEXTS.reconciler);
      return reservingLookup(key);
    },
  });
  // The backoff kind: the same lookup, so an attempt killed in flight is reconciled as http_post's.
  const limited = makeHttpTool({
    name: BACKOFF_CALL,
    timeoutMs: 5_000,
    retry: BACKOFF_POLICY,
    lookup: reservingLookup,
  });
  const shell = makeShellTool(join(dir, "work"), {
    receiptsDir: join(dir, "receipts"),
    env: { set: { TORTURE_TOKEN: TORTURE_SECRET } },
  });
  const writeFile = makeWriteFileTool(join(dir, "work"));

  // With cancel or pause, the sends answer late: a request finds a call in flight more often.
  const holdMs = kinds.includes("cancel") || kinds.includes("pause") ? 250 : undefined;
  const slow = holdMs === undefined ? {} : { holdMs };
  const queued = defineAgent({
    name: QUEUED_AGENT,
    version: "1",
    run: async (turn, input: { label: string }) => turn.tool(send, { label: input.label }),
  });

  const scheduled = defineAgent({
    name: SCHEDULED_AGENT,
    version: "1",
    run: async (turn, input: { label: string; holdMs: number }) =>
      turn.tool(send, { label: input.label, holdMs: input.holdMs }),
  });

  const child = defineAgent({
    name: "torture-child",
    version: "1",
    run: async (turn, input: { label: string }) => {
      if (kinds.includes("sleep")) await turn.sleep(CHILD_SLEEP_MS);
      const r = await turn.tool(readSafe, { label: `${input.label}-child-read` });
      const s = await turn.tool(send, { label: `${input.label}-child-send` });
      return { r, s };
    },
  });

  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const { label } = input;
      const plan = await turn.model("planner", { label }, async () => ({
        steps: ["read", "shell", "file", "http", "send", "child"],
      }));
      // The plan document: its changes commit with their call, so it must never be found in doubt.
      const current = await turn.plan.read();
      await turn.plan.replace(current.revision, {
        title: `plan ${label}`,
        items: plan.steps.map((text, i) => ({ id: `s${i}`, text, done: false })),
      });
      await turn.checkpoint({ plan, step: 0 });
      const read = await turn.tool(readSafe, { label: `${label}-read` });
      const sh = await turn.tool(shell, {
        command: `echo "${label}-shell $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(witness("shell.txt"))}; printf 'token:%s' "$TORTURE_TOKEN"`,
      });
      await turn.checkpoint({ plan, step: 2 });
      const file = await turn.tool(writeFile, { path: `${label}.txt`, content: `content of ${label}\n` });
      const posted = await turn.tool(http, { url: `${server}/effects`, body: { label: `${label}-http` } });
      // The wait kinds (decision 0064): the run parks here, holding no process, and is woken from
      // the due index by a timer or by the harness's signal (or its timeout, an outcome it goes on with).
      if (kinds.includes("sleep")) await turn.sleep(sleepMsFor(label));
      const go = kinds.includes("signal")
        ? await turn.waitFor<{ trial: string }>(SIGNAL_NAME, { timeoutMs: SIGNAL_TIMEOUT_MS })
        : undefined;
      // The approval kind: the run parks until a person approves (maybe editing) or denies the call.
      let paid: number | "denied" | null | undefined;
      if (kinds.includes("approval")) {
        try {
          const r = await turn.tool(pay, { label: `${label}-pay`, amount: APPROVAL_AMOUNT });
          paid = r == null ? null : r.paid;
        } catch (error) {
          if (!(error instanceof ApprovalDenied)) throw error;
          paid = "denied";
        }
      }
      if (fault === "sibling-fails") {
        await turn.all([
          () => turn.tool(send, { label: `${label}-inflight`, holdMs: 300 }),
          () => turn.tool(flaky, { label }),
        ]);
      }
      if (fault === "agent-throws") {
        void turn.tool(send, { label: `${label}-inflight`, holdMs: 300 });
        throw new Error(TORTURE_ERROR_TEXTS.agent);
      }
      // The backoff kind: a rate-limited call waits out its 429s in durable backoffs while a
      // sibling send goes on beside it. Exhausted (kills made it spend its attempts): the agent
      // goes on, as an agent that can live without the call would.
      const limitedPost = kinds.includes("backoff")
        ? await turn.all([
            async () => {
              try {
                const r = await turn.tool(limited, {
                  url: `${server}/limited`,
                  body: { label: `${label}-limited`, refuse: refusalsFor(label) },
                });
                return r == null ? null : r.status;
              } catch (error) {
                if (error instanceof CallFailed) return "exhausted";
                throw error;
              }
            },
            () => turn.tool(send, { label: `${label}-beside-backoff` }),
          ])
        : undefined;
      const [sent, again] = await turn.all([
        () => turn.tool(send, { label: `${label}-send-1`, ...slow }),
        () => turn.tool(send, { label: `${label}-send-2`, ...slow }),
      ]);
      const kid = await turn.child("torture-child", { label });
      // A call a person confirmed completed without giving its result returns null (decide's
      // `confirmed-completed`): the agent takes that as "done, result unknown", never as a crash.
      const known = <T, K extends keyof T>(result: T | null | undefined, field: K): T[K] | null =>
        result == null ? null : result[field];
      return {
        read,
        sh: known(sh, "exitCode"),
        file: known(file, "digest"),
        posted: known(posted, "status"),
        sent,
        again,
        kid,
        ...(limitedPost === undefined ? {} : { limited: limitedPost[0] }),
        ...(go === undefined ? {} : { go: go.timedOut ? "timed-out" : go.signalId }),
        ...(paid === undefined ? {} : { paid }),
      };
    },
  });

  return {
    agents: [agent, child, queued, scheduled],
    tools: [send, readSafe, http, shell, writeFile, flaky, limited, pay],
    /** The safe list the harness runs with. */
    allowlist: { read_safe: readSafe.pin },
  };
};
