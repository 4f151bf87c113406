/**
 * The torture harness: real processes running an agent with real side effects are SIGKILLed at
 * every named crash point (and at random moments), restarted — sometimes killed again during
 * recovery — until every run is completed or held. An outside witness counts the effects.
 *
 *   npm run torture -- --trials 300 [--seed S] [--json]
 *   npm run torture -- --agent ai --trials 100     the AI SDK agent (torture/ai-definitions.ts): its
 *     model and tools through holdfast/ai, generateText and streamText, hold and replay policies
 *   npm run torture -- --agent ai-stream --trials 100   the AI SDK agent streaming only, a third of
 *     its answers breaking off with an in-band error part; held runs decided through the HTTP API
 *     (torture/decide-api.ts) and run on until they end
 *   npm run torture -- --agent mcp --trials 100    the MCP agent (torture/mcp-definitions.ts): a real
 *     MCP server's tools through holdfast/mcp; held runs decided through the HTTP API
 *   npm run torture -- --agent ssh --trials 100    the SSH agent (torture/ssh-definitions.ts): commands
 *     through makeSshTool against a real OpenSSH server on 127.0.0.1 started for the run; besides the
 *     kills, `drop-session` trials SIGKILL the server's session processes while a command runs (the
 *     connection drops); held runs decided through the HTTP API
 *   npm run torture -- --agent terminal --trials 100   the terminal agent (torture/terminal-definitions.ts):
 *     commands in a bash session through makeTerminalTool; `kill-session` trials SIGKILL the
 *     session's bash while a command runs; held runs decided through the HTTP API
 *   npm run torture -- --agent browser --trials 100   the browser agent (torture/browser-definitions.ts):
 *     a real Chromium through makeBrowserTool fills and submits the witness server's test form (each
 *     POST counted under its key, answered late); `mid-submit` trials SIGKILL the agent while the
 *     submit is in flight, `kill-browser` trials SIGKILL its Chromium then; every other trial declares
 *     the submit's probe (the rest hold a submit in doubt); held runs decided through the HTTP API
 *   npm run torture -- --faults backoff --trials 100   the ordinary day's fault kinds (torture/definitions.ts
 *     FAULT_KINDS), comma-separated, on the classic agent: `backoff` adds a retried call against a
 *     rate-limited endpoint and kills during its durable backoffs; `cancel` and `pause` act on the run
 *     from a second runtime on the journal with a call in flight (killing the owner around the
 *     request); `queue` queues three inputs behind it; the record names them (`faultKinds`)
 *   npm run torture -- --faults sleep,signal --trials 40   the kinds whose runs wait (decision 0064):
 *     `sleep` parks the run on durable sleeps (killed at the wake-up's crash points and while
 *     parked); `signal` has it wait for a signal the harness sends from a second runtime (before
 *     the wait, while parked, twice with one id, from a `holdfast signal` killed after its commit,
 *     or never: it times out), killing the owner while parked and right after a signal's commit
 *   npm run torture -- --faults schedule --trials 30   three schedules (overlap skip and queue, a
 *     seconds cron) ticked for 9 s a trial by processes killed across ticks (`before-tick-admit`,
 *     `after-tick-admit`, `after-tick-recorded`) and restarted (decision 0064)
 *   npm run torture -- --faults disk-full,clock --trials 100   the faults below holdfast on libSQL
 *     (decision 0080), one per trial in turn on top of its SIGKILLs: `disk-full` puts the trial's
 *     journal on a 16 MiB tmpfs a ballast fills for a moment (at an intent, an outcome, at random;
 *     needs root), `clock` steps the wall clock of every agent process of the trial by ±1 h through
 *     one libfaketime file; the record counts `faults` per kind
 *   npm run torture -- --faults approval --trials 30   one call awaiting approval, approved (sometimes
 *     with an edited amount) or denied from a second runtime or a `holdfast approve|deny` killed at
 *     `after-approval`, the owner killed while parked and a waker at `after-approval-wake` (0064)
 *
 * With --workers (or --store), the multi-worker torture instead (torture/workers.ts):
 *   npm run torture -- --store postgres://… --workers 3 [--runs 200] [--kills 30] [--pauses 30] [--lease-ms 3000] [--faults backoff,cancel,queue,pause] [--seed S] [--json] [--keep]
 *     (with `queue`, each of the --runs chats also gets three queued inputs: four runs of the agent per chat)
 *   npm run torture -- --store postgres://… --workers 3 --faults pg-restart,partition,commit-lost
 *     the faults below holdfast (decision 0080): the workers use a private PostgreSQL server (the
 *     --store URL is not used for them), each through its own TCP proxy; between the kill waves the
 *     server is restarted or SIGKILLed, a worker is partitioned, a worker's commit is cut
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openRuntime, type Runtime } from "../src/index.js";
import { contextOf, foldRun, statusOf } from "../src/machines/index.js";
import {
  CRASH_POINTS,
  type CrashPointName,
  SCHEDULE_CRASH_POINTS,
  WAKE_CRASH_POINTS,
} from "../src/runtime/crash.js";
import { type Sshd, startSshd } from "../test/support/sshd.js";
import { AI_MODEL_NAME } from "./ai-definitions.js";
import { BROWSER_READ_TOOL, BROWSER_TOOL } from "./browser-definitions.js";
import {
  auditLog,
  type BackoffCheck,
  checkBackoff,
  checkTrial,
  type Outcomes,
  outcomesOf,
  readLog,
  type SecretScan,
  scanTrial,
  sealedRows,
} from "./check.js";
import { type BrowserCheck, checkBrowser } from "./check-browser.js";
import {
  type CancelAsked,
  type CancelCheck,
  checkCancel,
  checkPause,
  checkQueue,
  type PauseCheck,
  type QueueCheck,
} from "./check-kinds.js";
import {
  type AliveWindow,
  type ApprovalEffect,
  checkWaitKinds,
  type KindCheck,
  type SignalSent,
  sumKindChecks,
} from "./check-waits.js";
import { type DecisionCounts, decideThroughApi } from "./decide-api.js";
import {
  APPROVAL_AMOUNT,
  APPROVAL_TOOL,
  BACKOFF_CALL,
  FAULT_KINDS,
  FAULTS,
  type FaultKind,
  HARNESS_BY,
  makeTortureDefinitions,
  PG_FAULT_KINDS,
  type PgFaultKind,
  QUEUED_INPUTS,
  SIGNAL_NAME,
  type StorageFaultKind,
  splitFaults,
  TORTURE_CHAT,
  TORTURE_ERROR_TEXTS,
  TORTURE_SECRET,
  type TortureFault,
  type WaitFaultKind,
  waitKindsIn,
} from "./definitions.js";
import { MCP_NAMES } from "./mcp-definitions.js";
import { chromiumBrowsers, descendantsNamed } from "./processes.js";
import { mountSmallDisk, type SmallDisk } from "./smallTablespace.js";
import { SSH_COMMANDS, SSH_TOOL, type SshTortureTarget } from "./ssh-definitions.js";
import { requireFaketime, steppedClocks } from "./steppedClock.js";
import { TERMINAL_COMMANDS, TERMINAL_TOOL } from "./terminal-definitions.js";
import { type LimitedRequest, startWitnessServer, type WitnessServer } from "./witness-server.js";

const OPTIONS = {
  trials: { type: "string", default: "40" },
  /** "classic" (the journaled-call agent), "ai" (the AI SDK agent), "ai-stream", "mcp", "ssh", "terminal" or "browser". */
  agent: { type: "string", default: "classic" },
  seed: { type: "string" },
  json: { type: "boolean", default: false },
  keep: { type: "boolean", default: false },
  /** Only this crash point or fault kind (to chase one problem). */
  point: { type: "string" },
  /** Only calls of this name at the intent/effect/outcome points. */
  call: { type: "string" },
  /** Multi-worker torture (torture/workers.ts): a postgres:// URL, and how many workers share it. */
  store: { type: "string" },
  workers: { type: "string" },
  runs: { type: "string", default: "200" },
  kills: { type: "string", default: "30" },
  pauses: { type: "string", default: "30" },
  "lease-ms": { type: "string", default: "3000" },
  /** Start no trial after this many seconds (a run that must end by a given time); the record says so. */
  "max-seconds": { type: "string" },
  /** Fault kinds, comma-separated: the ordinary day's (FAULT_KINDS), and the faults below holdfast each harness plays. */
  faults: { type: "string", default: "" },
  help: { type: "boolean", default: false },
} as const;
/**
 * The faults below holdfast (decision 0080): the multi-worker PostgreSQL harness plays
 * {@link PG_FAULT_KINDS}; this one (libSQL) plays {@link LIBSQL_FAULT_KINDS}.
 */
const LIBSQL_FAULT_KINDS = ["disk-full", "clock"] as const satisfies ReadonlyArray<StorageFaultKind>;
const USAGE = `usage:
  npm run torture -- [--trials N] [--seed S] [--json] [--keep] [--point NAME] [--call NAME] [--agent classic|ai|ai-stream|mcp|ssh|terminal|browser] [--max-seconds S] [--faults ${[...FAULT_KINDS, ...LIBSQL_FAULT_KINDS].join(",")}]
  npm run torture -- --store postgres://… --workers N [--runs N] [--kills N] [--pauses N] [--lease-ms MS] [--max-seconds S] [--faults ${[...FAULT_KINDS, ...PG_FAULT_KINDS].join(",")}] [--seed S] [--json] [--keep]
`;

const parsed = (() => {
  try {
    return parseArgs({ options: OPTIONS });
  } catch (error) {
    process.stderr.write(`torture: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    process.exit(2);
  }
})();
if (parsed.values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const { values } = parsed;

const trials = Number(values.trials);
const AGENTS = ["classic", "ai", "ai-stream", "mcp", "ssh", "terminal", "browser"] as const;
type AgentVariant = (typeof AGENTS)[number];
if (!(AGENTS as ReadonlyArray<string>).includes(values.agent)) {
  process.stderr.write(`torture: --agent takes ${AGENTS.map((a) => `"${a}"`).join(", ")}\n`);
  process.exit(2);
}
const variant = values.agent as AgentVariant;
/** The AI SDK agent, in either variant. */
const aiAgent = variant === "ai" || variant === "ai-stream";
/** Variants whose held runs a person decides through the API, and which then run on. */
const decides =
  variant === "ai-stream" ||
  variant === "mcp" ||
  variant === "ssh" ||
  variant === "terminal" ||
  variant === "browser";
/** The browser agent: a real Chromium against the witness server's test site. */
const browserAgent = variant === "browser";
/** The tool agents (ssh, terminal): their one tool's name, and how many commands a run sends. */
const toolAgent =
  variant === "ssh"
    ? { tool: SSH_TOOL, commands: SSH_COMMANDS, witness: "ssh.txt" }
    : variant === "terminal"
      ? { tool: TERMINAL_TOOL, commands: TERMINAL_COMMANDS, witness: "terminal.txt" }
      : null;
/** The ordinary day's fault kinds this torture plays (the classic agent's, in both harnesses). */
const { kinds: faultKinds, storage: storageFaults } = ((): {
  kinds: FaultKind[];
  storage: StorageFaultKind[];
} => {
  try {
    return splitFaults(values.faults);
  } catch (error) {
    process.stderr.write(`torture: --faults: ${(error as Error).message}\n`);
    process.exit(2);
  }
})();
/** `--workers`/`--store`: the multi-worker PostgreSQL harness; otherwise the libSQL one. */
const multiWorkerHarness = values.workers !== undefined || values.store !== undefined;
const notPlayed = storageFaults.filter(
  (k) => !((multiWorkerHarness ? PG_FAULT_KINDS : LIBSQL_FAULT_KINDS) as ReadonlyArray<string>).includes(k),
);
if (notPlayed.length > 0) {
  process.stderr.write(
    `torture: --faults ${notPlayed.join(",")}: not played by this harness (the multi-worker PostgreSQL harness plays ${PG_FAULT_KINDS.join(", ")}; the libSQL harness ${LIBSQL_FAULT_KINDS.join(", ")})\n`,
  );
  process.exit(2);
}
if (!multiWorkerHarness && storageFaults.length > 0) {
  if (variant !== "classic") {
    process.stderr.write("torture: --faults disk-full,clock play on the classic agent only (drop --agent)\n");
    process.exit(2);
  }
  // Said before anything is started.
  if (storageFaults.includes("clock")) requireFaketime();
}
if (faultKinds.length > 0 && variant !== "classic") {
  process.stderr.write("torture: --faults plays on the classic agent only (drop --agent)\n");
  process.exit(2);
}
const backoffKind = faultKinds.includes("backoff");
const cancelKind = faultKinds.includes("cancel");
const queueKind = faultKinds.includes("queue");
const pauseKind = faultKinds.includes("pause");
/** The kinds whose runs wait (`sleep`, `signal`; decision 0064), each with its check in check-waits.ts. */
const waitKinds = waitKindsIn(faultKinds);
const signalKind = faultKinds.includes("signal");
/** The kinds that park the trial's run (the wake-up's crash points land in them). */
const parkKind = faultKinds.includes("sleep") || signalKind;
/** The `approval` kind: the trial's run parks on a call awaiting approval; the harness decides it. */
const approvalKind = faultKinds.includes("approval");
/** The approval's crash points the agent process reaches (`after-approval` is the approver's). */
const APPROVAL_WAKE_POINTS: ReadonlyArray<CrashPointName> = ["after-approval-wake"];
/** The `schedule` kind: the agent process ticks the torture's schedules for {@link SCHEDULE_WINDOW_MS}. */
const scheduleKind = faultKinds.includes("schedule");
/** How long a `schedule` trial's schedules tick, from the trial's start (restarts included). */
const SCHEDULE_WINDOW_MS = 9_000;
/** The size of the tmpfs a `disk-full` trial's journal lives on (the ballast fills the rest). */
const SMALL_DISK_MIB = 16;
/** The `disk-full` tmpfs mounted now: unmounted if the harness is stopped (SIGTERM, SIGINT) mid-trial. */
const mountedDisks = new Set<SmallDisk>();
for (const signal of ["SIGTERM", "SIGINT"] as const)
  process.on(signal, () => {
    for (const disk of mountedDisks) disk.unmount();
    process.exit(signal === "SIGINT" ? 130 : 143);
  });
const seed = values.seed === undefined ? Date.now() % 1_000_000 : Number(values.seed);
if (values["max-seconds"] !== undefined && !(Number(values["max-seconds"]) > 0)) {
  process.stderr.write("torture: --max-seconds takes a positive number\n");
  process.exit(2);
}
if (!Number.isInteger(trials) || trials < 1) {
  process.stderr.write("torture: --trials takes a positive whole number\n");
  process.exit(2);
}

/** mulberry32: a small seeded generator, so a failing trial can be replayed with its seed. */
const rng = (() => {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
})();
const pick = <T>(items: ReadonlyArray<T>): T => items[Math.floor(rng() * items.length)]!;

/** The torture agent's calls, with how often each happens in one run (parent and child). */
const CALLS: Record<string, number> = aiAgent
  ? { [AI_MODEL_NAME]: 3, read_safe: 1, send: 2 }
  : variant === "mcp"
    ? { [MCP_NAMES.listing]: 1, [MCP_NAMES.read]: 1, [MCP_NAMES.send]: 2 }
    : toolAgent
      ? { [toolAgent.tool]: toolAgent.commands }
      : browserAgent
        ? // navigate, fill, submit (once each when nothing fails); the read of the orders.
          { [BROWSER_TOOL]: 3, [BROWSER_READ_TOOL]: 1 }
        : {
            planner: 1,
            read_safe: 2,
            shell: 1,
            write_file: 1,
            http_post: 1,
            send: 3,
            "torture-child": 1,
            // Its attempts: the first, refused, and a retry (or two).
            ...(backoffKind ? { [BACKOFF_CALL]: 2 } : {}),
            // Its attempts: the one awaiting approval, and the approved one.
            ...(approvalKind ? { [APPROVAL_TOOL]: 2 } : {}),
          };
const RECOVERY_POINTS: CrashPointName[] = ["after-interrupted", "after-replay-authorized"];
/**
 * The crash points the torture agent reaches: `during-backoff` only with the `backoff` kind (the
 * other calls declare no retry policy, so there is no backoff to kill in).
 */
const TORTURE_POINTS = backoffKind
  ? CRASH_POINTS
  : CRASH_POINTS.filter((point) => point !== "during-backoff");
type Kill = {
  readonly at: CrashPointName | "random";
  readonly call?: string;
  readonly skip?: number;
  readonly ms?: number;
};

const AGENT = join(import.meta.dirname, "agent-process.ts");
const CLI = join(import.meta.dirname, "..", "src", "adapters", "surfaces", "cli", "main.ts");
/**
 * Wake-ups a trial's runs go through with the wait kinds: the parent's sleep, the child's, the
 * signal wait (a wake-up crash point skips fewer than the last, so it fires in the first process).
 */
const WAKES = (faultKinds.includes("sleep") ? 2 : 0) + (signalKind ? 1 : 0) + (approvalKind ? 1 : 0);

/** The tools on the trial's safe list: the only ones an "allowlisted" replay may name. */
const ALLOWLISTED_TOOLS: ReadonlySet<string> =
  variant === "mcp"
    ? new Set([MCP_NAMES.read, MCP_NAMES.listing])
    : toolAgent
      ? new Set<string>()
      : browserAgent
        ? new Set([BROWSER_READ_TOOL])
        : new Set(["read_safe"]);

/** Decisions the harness made, by kind, over all trials. */
const decisionCounts: DecisionCounts = {};

/** Whether a run of the trial's journal is held. */
const heldIn = async (db: string): Promise<boolean> => {
  const { events } = await readLog(db);
  const runs = new Map<string, string>();
  for (const { streamId, event } of events) if (streamId.startsWith("run-")) runs.set(streamId, event.type);
  return [...runs.values()].includes("run.held");
};

const runProcess = (
  env: Record<string, string>,
  kill: Kill | null,
  /** Acts from outside while the process runs (the cancel and pause kinds); awaited before the result. */
  during?: (child: ChildProcess, exited: () => boolean) => Promise<void>,
): Promise<{ code: number | null; signal: string | null; out: string; err: string }> =>
  new Promise((resolve) => {
    const crashEnv: Record<string, string> = {};
    if (kill && kill.at !== "random") {
      crashEnv.HOLDFAST_CRASH_AT = kill.at;
      if (kill.call) crashEnv.HOLDFAST_CRASH_CALL = kill.call;
      if (kill.skip) crashEnv.HOLDFAST_CRASH_SKIP = String(kill.skip);
    }
    const child = spawn(process.execPath, ["--import", "tsx", AGENT], {
      env: {
        ...process.env,
        HOLDFAST_CRASH_AT: "",
        HOLDFAST_CRASH_CALL: "",
        HOLDFAST_CRASH_SKIP: "",
        ...env,
        ...crashEnv,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    const timer = kill?.at === "random" ? setTimeout(() => child.kill("SIGKILL"), kill.ms ?? 500) : undefined;
    // The browser agent's Chromium, watched while the process lives: a process SIGKILLed leaves its
    // browser behind, which is ended here (it must not send anything once the process is gone).
    const browsers = new Set<number>();
    const watchBrowsers = browserAgent
      ? setInterval(() => {
          for (const pid of descendantsNamed(child.pid!, "chromium")) browsers.add(pid);
        }, 100)
      : undefined;
    let done = false;
    const closed = new Promise<{ code: number | null; signal: string | null }>((res) =>
      child.on("close", (code, signal) => {
        done = true;
        if (timer) clearTimeout(timer);
        if (watchBrowsers) clearInterval(watchBrowsers);
        for (const pid of browsers) endIfNamed(pid, "chromium");
        res({ code, signal });
      }),
    );
    const acting = during ? during(child, () => done) : Promise.resolve();
    void Promise.all([closed, acting]).then(([{ code, signal }]) => resolve({ code, signal, out, err }));
  });

/** SIGKILL `pid` if it is still a process named `name` (a pid the harness saw below its agent). */
const endIfNamed = (pid: number, name: string): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    if (!stat.slice(stat.indexOf("(") + 1).startsWith(name)) return false;
    process.kill(pid, "SIGKILL");
    return true;
  } catch {
    return false;
  }
};

interface TrialResult {
  readonly trial: number;
  readonly point: string;
  /** Whether the process was really killed at the trial's crash point. */
  readonly fired: boolean;
  readonly restarts: number;
  readonly kills: number;
  /** Decisions made through the API (the ai-stream and mcp variants). */
  readonly decisions: number;
  readonly check: ReturnType<typeof checkTrial>;
  /** The audit's findings on the final journal (empty when it audits clean). */
  readonly audit: string[];
  /** Events stored with encrypted fields. */
  readonly sealed: number;
  /** The byte scan of the trial's folder for the registered secret (and the key, when set). */
  readonly secrets: SecretScan;
  /** The `backoff` kind's check (with --faults backoff). */
  readonly backoff?: BackoffCheck;
  readonly cancel?: CancelCheck;
  readonly queue?: QueueCheck & { readonly stoppedForQueue: number };
  readonly pause?: PauseCheck;
  /** The wait kinds' checks (check-waits.ts), by kind. */
  readonly waits?: Partial<Record<WaitFaultKind, KindCheck>>;
  /** Where the harness killed the owner around the waits. */
  readonly waitActs?: { readonly killedWhileParked: number; readonly killedAfterSignalCommit: number };
  /** The approval kind: the owner killed while parked, approvers killed at `after-approval`, … */
  readonly approvalActs?: {
    readonly killedWhileParked: number;
    readonly approverKilled: number;
    readonly decidedInRuntime: number;
    readonly decidedByCli: number;
    readonly refused: number;
  };
  /** The ssh and terminal agents' `drop-session` / `kill-session` trials: processes the harness killed mid-command. */
  readonly sessionKills?: number;
  /** The browser agent: whether the submit's probe was declared, and its check. */
  readonly browser?: BrowserCheck & { readonly probeDeclared: boolean };
  /** The fault below holdfast the trial played (libSQL: `disk-full` or `clock`), and what it did. */
  readonly storage?: StorageTrial;
  readonly error?: string;
}

/** One trial's fault below holdfast (decision 0080), as played. */
interface StorageTrial {
  readonly kind: StorageFaultKind;
  /** Whether it happened: the disk filled, or the clock stepped, while an agent process ran. */
  played: boolean;
  /** disk-full: when (at an intent in flight, just after one — at its outcome —, or at a random moment). */
  at?: "intent" | "outcome" | "random";
  /** disk-full: MiB of ballast it took to fill the journal's tmpfs. */
  ballastMib?: number;
  /** disk-full: whether a 4 KiB probe file on the full tmpfs was refused (ENOSPC): the fault bit. */
  probeRefused?: boolean;
  /** disk-full: agent processes that said JournalUnavailable (an append refused for the full disk). */
  refusedAppends: number;
  /** disk-full: agent processes that exited on their own while the disk was full, naming JournalUnavailable. */
  exitsWhileFull: number;
  /** Processes that ended with the trial's run not settled (the fault stopped it) and were started again. */
  restartsToSettle: number;
  /** clock: the step (s), and whether the harness SIGKILLed the agent while its clock was stepped. */
  stepSeconds?: number;
  killedWhileStepped?: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The trial's run (chat `torture`, input `trial`): its id, status, whether a call of it is in
 * flight, and what it waits for when parked.
 */
const trialRun = async (
  db: string,
): Promise<{
  runId: string | null;
  status: string | null;
  inFlight: boolean;
  waiting?: "timer" | "signal" | "approval" | null;
}> => {
  const none = { runId: null, status: null, inFlight: false };
  if (!existsSync(db)) return none;
  let events: Awaited<ReturnType<typeof readLog>>["events"];
  try {
    events = (await readLog(db)).events;
  } catch {
    return none;
  }
  const admitted = events.find(
    (e) => e.event.type === "run.admitted" && e.event.chatId === TORTURE_CHAT && e.event.inputId === "trial",
  );
  if (admitted?.event.type !== "run.admitted") return none;
  const stream = events.filter((e) => e.streamId === admitted.streamId).map((e) => e.event);
  const open = new Set<string>();
  for (const event of stream) {
    if (event.type === "call.intended") open.add(`${event.callId}#${event.attempt}`);
    if (event.type === "call.completed" || event.type === "call.failed" || event.type === "call.reconciled")
      open.delete(`${event.callId}#${event.attempt}`);
  }
  const fold = foldRun(stream);
  return {
    runId: admitted.event.runId,
    status: statusOf(fold),
    inFlight: open.size > 0,
    waiting: contextOf(fold).waiting?.wait ?? null,
  };
};

/**
 * A second runtime on the trial's journal, as an operator's process: the tools (their reconcilers,
 * for a cancel it carries out for a dead owner) and no agent, so it never runs one itself.
 */
const openOperator = (db: string, dir: string, server: string): Promise<Runtime> => {
  const { tools, allowlist } = makeTortureDefinitions({ dir, server, kinds: faultKinds });
  return openRuntime({
    store: db,
    agents: [],
    tools,
    allowlist,
    secrets: { TORTURE_TOKEN: TORTURE_SECRET },
    workerId: "torture-operator",
    recovery: { onOpen: false, leaseMs: 3_000 },
  });
};

/**
 * What the harness does from outside in a trial of the cancel or pause kind: a cancel with the
 * owner killed just before the request, just after it committed, or not at all; or a pause (the
 * owner killed just after the request, sometimes), then restarts while paused, then a resume.
 */
type Control =
  | { readonly kind: "cancel"; readonly delayMs: number; readonly kill: "before" | "after" | "none" }
  | {
      readonly kind: "pause";
      readonly delayMs: number;
      readonly killAfterRequest: boolean;
      readonly restarts: number;
    };

/**
 * What the harness does around a trial's waits (decision 0064): the signal it sends (`before` the
 * run reaches its wait, once it is `parked`, or `none`: the wait times out), whether it sends it
 * `again` with the same id, whether the sender is `holdfast signal` killed right after its commit
 * (crash point `after-signal`), and where the owner is killed: while the run is `parked` (before
 * the signal), right `after-commit` of the signal (before the wake-up), or not.
 */
interface WaitPlan {
  readonly send: "before" | "parked" | "none";
  readonly again: boolean;
  readonly senderKilled: boolean;
  readonly kill: "parked" | "after-commit" | "none";
}
/** The plans a seed cycles through, by trial number, so every short slice plays each of them. */
const SIGNAL_PLANS: ReadonlyArray<WaitPlan> = [
  { send: "parked", again: true, senderKilled: true, kill: "parked" },
  { send: "before", again: true, senderKilled: false, kill: "none" },
  { send: "none", again: false, senderKilled: false, kill: "none" },
  { send: "parked", again: false, senderKilled: false, kill: "after-commit" },
  { send: "parked", again: false, senderKilled: false, kill: "none" },
  { send: "none", again: false, senderKilled: false, kill: "parked" },
  { send: "parked", again: true, senderKilled: true, kill: "after-commit" },
];

/**
 * What the harness does about a trial's approval (decision 0064): approve it, approve it with an
 * edited amount, or deny it; from a second runtime, or from `holdfast approve`/`deny` killed right
 * after its commit (crash point `after-approval`); and whether the owner is killed while parked on
 * the approval first.
 */
interface ApprovalPlan {
  readonly decision: "approve" | "edit" | "deny";
  readonly viaCli: boolean;
  readonly killParked: boolean;
}
/** The plans a seed cycles through, by trial number, so every short slice plays each of them. */
const APPROVAL_PLANS: ReadonlyArray<ApprovalPlan> = [
  { decision: "edit", viaCli: false, killParked: true },
  { decision: "deny", viaCli: true, killParked: false },
  { decision: "approve", viaCli: true, killParked: true },
  { decision: "approve", viaCli: false, killParked: false },
  { decision: "edit", viaCli: true, killParked: true },
  { decision: "deny", viaCli: false, killParked: false },
];
/** The amount an edit approves instead of {@link APPROVAL_AMOUNT}. */
const EDITED_AMOUNT = 42;

/**
 * A lost session, from outside, while a command runs: the SSH server's session processes killed
 * (the connection drops; the ssh agent) or the terminal session's bash killed (the terminal agent).
 */
type SessionAct = "drop-session" | "kill-session" | "mid-submit" | "kill-browser";
/** What a trial puts the agent through: a kill at a named crash point, a random kill, a fault, or a lost session. */
type Category = CrashPointName | "random" | TortureFault | SessionAct;
const isSessionAct = (category: Category): category is SessionAct =>
  category === "drop-session" ||
  category === "kill-session" ||
  category === "mid-submit" ||
  category === "kill-browser";
/** The browser variant's lease: a reconciler's probe starts a Chromium within half of it. */
const BROWSER_LEASE_MS = 10_000;
/**
 * The browser agent's trials, cycled: the crash points, random kills, and the kills while the submit
 * is in flight (the site counted it and has not answered): `mid-submit` SIGKILLs the agent's process,
 * `kill-browser` its Chromium. An odd length, so the probe's mode (by trial parity) meets each.
 */
const BROWSER_POINTS: ReadonlyArray<Category> = [
  ...CRASH_POINTS.filter((point) => point !== "during-backoff"),
  "random",
  "mid-submit",
  "kill-browser",
  "random",
  "mid-submit",
  "kill-browser",
];

/** The ssh variant's lease: its reconciler connects over SSH within half of it. */
const SSH_LEASE_MS = 10_000;
/** The ssh agent's server, started once for the run (main). */
let sshd: Sshd | null = null;
const sshTarget = (): SshTortureTarget => ({
  host: sshd!.host,
  port: sshd!.port,
  user: sshd!.user,
  keyPath: sshd!.privateKeyPath,
  hostKey: sshd!.hostKeyFingerprint,
});
const isFault = (category: Category): category is TortureFault =>
  (FAULTS as ReadonlyArray<string>).includes(category);

/** The cancel, queue and pause checks' problems of one trial. */
const kindProblems = (r: TrialResult): string[] => [
  ...(r.cancel?.problems ?? []),
  ...(r.queue?.problems ?? []),
  ...(r.pause?.problems ?? []),
  ...Object.values(r.waits ?? {}).flatMap((c) => c.problems),
];

const runTrial = async (
  trial: number,
  point: Category,
  serverUrl: string,
  counts: Map<string, number>,
  requests: Map<string, LimitedRequest[]>,
  orders: WitnessServer["orders"],
): Promise<TrialResult> => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-torture-"));
  mkdirSync(join(dir, "witness"));
  mkdirSync(join(dir, "work"));
  // The fault below holdfast of this trial (libSQL harness, decision 0080): the kinds take turns.
  const storageKind: StorageFaultKind | null =
    storageFaults.length > 0 ? storageFaults[trial % storageFaults.length]! : null;
  const storage: StorageTrial | null = storageKind
    ? { kind: storageKind, played: false, refusedAppends: 0, exitsWhileFull: 0, restartsToSettle: 0 }
    : null;
  // disk-full: the journal alone on a small tmpfs (the witness files stay on the big disk: the
  // outside world does not run out of space with the journal).
  const smallDisk: SmallDisk | null =
    storageKind === "disk-full" ? mountSmallDisk(join(dir, "journal-disk"), SMALL_DISK_MIB) : null;
  if (smallDisk) mountedDisks.add(smallDisk);
  const db = smallDisk ? join(smallDisk.dir, "journal.db") : join(dir, "journal.db");
  // clock: every agent process of the trial reads its wall clock through libfaketime from one file.
  const clock = storageKind === "clock" ? steppedClocks(join(dir, "clock"), 1) : null;
  const fault = isFault(point) ? point : null;
  // The browser agent: the submit's probe declared in every other trial (held without it).
  const browserProbe = trial % 2 === 0;
  const env = {
    TORTURE_DB: db,
    TORTURE_DIR: dir,
    TORTURE_SERVER: serverUrl,
    TORTURE_LABEL: `t${trial}`,
    TORTURE_FAULT: fault ?? "",
    TORTURE_FAULTS: faultKinds.join(","),
    ...(clock?.env(0) ?? {}),
    ...(scheduleKind ? { TORTURE_SCHEDULE_UNTIL: String(Date.now() + SCHEDULE_WINDOW_MS) } : {}),
    // The AI SDK agent: every combination of generate/stream and hold/replay comes round.
    ...(variant === "ai"
      ? {
          TORTURE_AGENT: "ai",
          TORTURE_AI_MODE: trial % 2 === 0 ? "generate" : "stream",
          TORTURE_AI_POLICY: Math.floor(trial / 2) % 2 === 0 ? "hold" : "replay",
        }
      : variant === "ai-stream"
        ? {
            TORTURE_AGENT: "ai",
            TORTURE_AI_MODE: "stream",
            TORTURE_AI_POLICY: trial % 2 === 0 ? "hold" : "replay",
            TORTURE_AI_ERRORS: "1",
          }
        : variant === "mcp"
          ? { TORTURE_AGENT: "mcp" }
          : variant === "ssh"
            ? // A reconciler's budget is half the lease: an SSH connection (key exchange in
              // JavaScript) on a loaded machine needs more than the 1.5 s of the 3 s lease.
              {
                TORTURE_AGENT: "ssh",
                TORTURE_SSH: JSON.stringify(sshTarget()),
                TORTURE_LEASE_MS: String(SSH_LEASE_MS),
              }
            : variant === "terminal"
              ? { TORTURE_AGENT: "terminal" }
              : browserAgent
                ? {
                    TORTURE_AGENT: "browser",
                    TORTURE_BROWSER_PROBE: browserProbe ? "1" : "0",
                    TORTURE_LEASE_MS: String(BROWSER_LEASE_MS),
                  }
                : {}),
  };
  const snapshots: Outcomes[] = [];
  counts.clear();
  requests.clear();
  orders.length = 0;
  // The backoff kind: half the call-point kills are at the retried call (any of its attempts).
  const call = values.call ?? (backoffKind && rng() < 0.5 ? BACKOFF_CALL : pick(Object.keys(CALLS)));
  // A fault trial: the fault alone, or with a random kill on top (sometimes); the status lookup
  // only throws during recovery, so that fault first needs an HTTP call in doubt.
  const faultKill = (): Kill | null =>
    fault === "reconciler-throws"
      ? { at: "after-intent", call: "http_post" }
      : rng() < 0.3
        ? { at: "random", ms: 300 + Math.floor(rng() * 2500) }
        : null;
  const kill: Kill | null = fault
    ? faultKill()
    : isSessionAct(point)
      ? null
      : point === "random"
        ? // Within the first 1.5 s: a later moment could fall after the run's end (seed 7's
          // random trial did at this commit), and the trial killed nothing.
          { at: "random", ms: 300 + Math.floor(rng() * 1200) }
        : point === "during-backoff"
          ? { at: point, call: BACKOFF_CALL }
          : (SCHEDULE_CRASH_POINTS as ReadonlyArray<string>).includes(point)
            ? { at: point as CrashPointName, skip: Math.floor(rng() * 4) }
            : (WAKE_CRASH_POINTS as ReadonlyArray<string>).includes(point)
              ? { at: point as CrashPointName, skip: Math.floor(rng() * Math.max(1, WAKES - 1)) }
              : point === "mid-checkpoint"
                ? { at: point, skip: Math.floor(rng() * 2) }
                : point === "mid-group-commit"
                  ? { at: point, skip: Math.floor(rng() * 16) }
                  : RECOVERY_POINTS.includes(point as CrashPointName) ||
                      APPROVAL_WAKE_POINTS.includes(point as CrashPointName)
                    ? { at: point as CrashPointName }
                    : { at: point as CrashPointName, call, skip: Math.floor(rng() * (CALLS[call] ?? 1)) };
  let restarts = 0;
  let kills = 0;
  const firedAt = new Set<string>();
  let error: string | undefined;
  // A recovery point only fires during recovery: crash once normally first so there is something to recover.
  // A recovery point fires only during recovery: first leave something to recover (for
  // after-replay-authorized, an in-doubt call that recovery may replay: the allowlisted read or the child).
  const firstKill: Kill | null =
    point === "after-replay-authorized"
      ? {
          at: "after-intent",
          call: pick(
            aiAgent
              ? ["read_safe", AI_MODEL_NAME]
              : variant === "mcp"
                ? [MCP_NAMES.read, MCP_NAMES.listing]
                : toolAgent
                  ? [toolAgent.tool]
                  : browserAgent
                    ? [BROWSER_READ_TOOL]
                    : ["read_safe", "torture-child"],
          ),
        }
      : point === "after-interrupted"
        ? {
            at: "after-intent",
            call: pick(
              aiAgent
                ? ["send", "read_safe", AI_MODEL_NAME]
                : variant === "mcp"
                  ? [MCP_NAMES.send, MCP_NAMES.read]
                  : toolAgent
                    ? [toolAgent.tool]
                    : browserAgent
                      ? [BROWSER_TOOL, BROWSER_READ_TOOL]
                      : ["send", "read_safe", "shell", "http_post"],
            ),
          }
        : kill;
  let next: Kill | null = firstKill;
  // A kill during a backoff: half the time, the process that resumes the rest of the wait is
  // killed in it again (or in the next backoff).
  let pendingRecoveryKill = RECOVERY_POINTS.includes(point as CrashPointName)
    ? kill
    : point === "during-backoff" && rng() < 0.5
      ? kill
      : null;
  let decisions = 0;
  // The cancel and pause kinds: what the harness does from outside this trial (drawn only with them,
  // so a seed without them plays as before).
  const controls = [...(cancelKind ? ["cancel"] : []), ...(pauseKind ? ["pause"] : [])];
  // By the trial's number, so every seed plays each of them (a fifth of the trials act on nothing):
  // cancel and pause take turns, and the cancels cycle through their kill moments.
  const control: Control | null =
    controls.length === 0 || trial % 5 === 4
      ? null
      : controls[trial % controls.length] === "cancel"
        ? {
            kind: "cancel",
            delayMs: Math.floor(rng() * 2500),
            kill: (["after", "before", "none"] as const)[Math.floor(trial / controls.length) % 3]!,
          }
        : {
            kind: "pause",
            delayMs: Math.floor(rng() * 2500),
            killAfterRequest: rng() < 0.4,
            restarts: Math.floor(rng() * 3),
          };
  let controlDone = false;
  const cancels: CancelAsked[] = [];
  let pauseAsked = false;
  let resumed = false;
  let pausedRestarts = 0;
  let restartWhilePaused = false;
  const pauseSeen = { stillPaused: 0, notPaused: [] as string[], killsWhilePaused: 0 };
  let stoppedForQueue = 0;
  const cancelNow = async (operator: Runtime, runId: string, kill: "before" | "after" | "none") => {
    const out = await operator.cancel(runId, { by: HARNESS_BY, note: "torture" });
    cancels.push({ runId, kill, accepted: out.accepted, status: out.status });
  };
  /** Acts once, at a random moment with a call of the trial's run in flight. */
  const during = async (child: ChildProcess, exited: () => boolean): Promise<void> => {
    if (!control) return;
    const t0 = Date.now();
    while (!exited() && Date.now() - t0 < control.delayMs) await sleep(20);
    let runId: string | null = null;
    while (!exited() && runId === null) {
      runId = (await trialRun(db)).runId;
      if (runId === null) await sleep(20);
    }
    if (exited() || runId === null) return;
    const operator = await openOperator(db, dir, serverUrl);
    try {
      for (;;) {
        if (exited()) return;
        if ((await trialRun(db)).inFlight) break;
        await sleep(10);
      }
      controlDone = true;
      if (control.kind === "cancel") {
        if (control.kill === "before") {
          child.kill("SIGKILL");
          while (!exited()) await sleep(5);
        }
        await cancelNow(operator, runId, control.kill);
        if (control.kill === "after") child.kill("SIGKILL");
      } else {
        const out = await operator.pause(runId, { by: HARNESS_BY, note: "torture" });
        if (control.killAfterRequest) child.kill("SIGKILL");
        if (out.accepted) pauseAsked = true;
      }
    } finally {
      await operator.close();
    }
  };
  // The wait kinds (decision 0064): this trial's plan (by its number, so a short slice plays each;
  // with `sleep` alone, a third of the trials kill the owner while the run is parked on its sleep),
  // the signals sent, and what is done already (a restart picks up where the last process stopped).
  const plan: WaitPlan | null = signalKind
    ? SIGNAL_PLANS[trial % SIGNAL_PLANS.length]!
    : parkKind && trial % 3 === 1
      ? { send: "none", again: false, senderKilled: false, kill: "parked" }
      : null;
  const signals: SignalSent[] = [];
  const signalId = `t${trial}-go`;
  const payload = { trial: `t${trial}` };
  const waitsDone = { sent: false, again: false, killed: false };
  const waitActs = { killedWhileParked: 0, killedAfterSignalCommit: 0 };
  const sendSignal = async (runId: string, moment: SignalSent["moment"], id = signalId): Promise<void> => {
    const operator = await openOperator(db, dir, serverUrl);
    try {
      const out = await operator.signal(runId, SIGNAL_NAME, payload, { signalId: id, by: HARNESS_BY });
      signals.push({
        runId,
        signalId: id,
        name: SIGNAL_NAME,
        moment,
        accepted: out.accepted,
        ...(out.accepted ? { recorded: out.recorded } : { reason: out.reason }),
      });
    } finally {
      await operator.close();
    }
  };
  /** `holdfast signal` in a process of its own, killed right after its commit (`after-signal`). */
  const sendFromCli = (runId: string): Promise<void> =>
    new Promise((resolve) => {
      const cli = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          CLI,
          "signal",
          runId,
          SIGNAL_NAME,
          "--signal-id",
          signalId,
          "--payload",
          JSON.stringify(payload),
          "--by",
          HARNESS_BY,
          "--db",
          db,
          "--json",
        ],
        {
          env: {
            ...process.env,
            HOLDFAST_CRASH_AT: "after-signal",
            HOLDFAST_CRASH_CALL: "",
            HOLDFAST_CRASH_SKIP: "",
          },
          stdio: "ignore",
        },
      );
      cli.on("close", (code, signal) => {
        // Killed at its crash point: it committed and never answered. Exited: it answered (refused?).
        signals.push({
          runId,
          signalId,
          name: SIGNAL_NAME,
          moment: "parked",
          accepted: signal === "SIGKILL" ? null : code === 0,
          ...(signal === "SIGKILL" || code === 0 ? {} : { reason: `holdfast signal exited ${code}` }),
        });
        resolve();
      });
    });
  /** Sends the plan's signals and kills the owner where the plan says, once the run got there. */
  const waitsActor = async (child: ChildProcess, exited: () => boolean): Promise<void> => {
    if (!plan) return;
    let runId: string | null = null;
    while (!exited() && runId === null) {
      runId = (await trialRun(db)).runId;
      if (runId === null) await sleep(20);
    }
    if (runId === null) return;
    if (plan.send === "before" && !waitsDone.sent) {
      waitsDone.sent = true;
      await sendSignal(runId, "before");
      if (plan.again && !waitsDone.again) {
        waitsDone.again = true;
        await sendSignal(runId, "again");
      }
    }
    const parkedLeft =
      (plan.send === "parked" && !waitsDone.sent) ||
      (plan.kill !== "none" && !waitsDone.killed) ||
      (plan.again && !waitsDone.again);
    if (!parkedLeft) return;
    const aim = signalKind ? "signal" : "timer";
    for (;;) {
      if (exited()) return;
      const now = await trialRun(db);
      if (now.status === "waiting" && now.waiting === aim) break;
      if (now.status !== null && !["running", "waiting", "interrupted"].includes(now.status)) return;
      await sleep(10);
    }
    if (plan.kill === "parked" && !waitsDone.killed) {
      waitsDone.killed = true;
      waitActs.killedWhileParked++;
      child.kill("SIGKILL");
      while (!exited()) await sleep(5);
    }
    if (plan.send === "parked" && !waitsDone.sent) {
      waitsDone.sent = true;
      if (plan.senderKilled) await sendFromCli(runId);
      else await sendSignal(runId, "parked");
      if (plan.kill === "after-commit" && !waitsDone.killed) {
        waitsDone.killed = true;
        waitActs.killedAfterSignalCommit++;
        child.kill("SIGKILL");
      }
    }
    if (plan.again && !waitsDone.again) {
      waitsDone.again = true;
      await sendSignal(runId, "again");
    }
  };
  // The approval kind: this trial's plan, what was done (a restart picks up where it stopped).
  const approvalPlan: ApprovalPlan | null = approvalKind
    ? APPROVAL_PLANS[trial % APPROVAL_PLANS.length]!
    : null;
  const approvalDone = { killed: false, decided: false };
  const approvalActs = {
    killedWhileParked: 0,
    approverKilled: 0,
    decidedInRuntime: 0,
    decidedByCli: 0,
    refused: 0,
  };
  /** Decides the run's awaiting call as the plan says; whether a decision was (or may have been) committed. */
  const decideApproval = async (runId: string): Promise<boolean> => {
    const plan = approvalPlan!;
    const stream = (await readLog(db)).events.filter((e) => e.streamId === `run-${runId}`);
    const waiting = [...stream].reverse().find((e) => e.event.type === "run.waiting")?.event;
    const callId = waiting?.type === "run.waiting" ? waiting.callId : `${runId}/0`;
    const basedOnVersion = stream.at(-1)!.version;
    const intent = stream.find(
      (e) => e.event.type === "call.intended" && e.event.callId === callId && e.event.attempt === 1,
    )?.event;
    const args = intent?.type === "call.intended" ? (intent.args as Record<string, unknown>) : {};
    const edited = { ...args, amount: EDITED_AMOUNT };
    if (plan.viaCli) {
      const argv = [
        "--import",
        "tsx",
        CLI,
        plan.decision === "deny" ? "deny" : "approve",
        runId,
        callId,
        "--based-on",
        String(basedOnVersion),
        "--by",
        HARNESS_BY,
        "--db",
        db,
        "--json",
        ...(plan.decision === "deny" ? ["--note", "torture: denied"] : []),
        ...(plan.decision === "edit" ? ["--args", JSON.stringify(edited), "--note", "torture: edited"] : []),
      ];
      return new Promise<boolean>((resolve) => {
        const cli = spawn(process.execPath, argv, {
          env: {
            ...process.env,
            HOLDFAST_CRASH_AT: "after-approval",
            HOLDFAST_CRASH_CALL: "",
            HOLDFAST_CRASH_SKIP: "",
          },
          stdio: ["ignore", "ignore", "pipe"],
        });
        let err = "";
        cli.stderr?.on("data", (d) => {
          err += d;
        });
        cli.on("close", (code, signal) => {
          // Killed at `after-approval`: it committed and never answered.
          if (signal === "SIGKILL") approvalActs.approverKilled++;
          else if (code === 0) approvalActs.decidedByCli++;
          else {
            approvalActs.refused++;
            process.stderr.write(
              `torture: trial ${trial}: holdfast ${argv[3]} exited ${code}: ${err.trim()}\n`,
            );
          }
          resolve(signal === "SIGKILL" || code === 0);
        });
      });
    }
    const operator = await openOperator(db, dir, serverUrl);
    try {
      const by = { by: HARNESS_BY, basedOnVersion };
      if (plan.decision === "deny") await operator.deny(runId, callId, { ...by, note: "torture: denied" });
      else
        await operator.approve(runId, callId, {
          ...by,
          ...(plan.decision === "edit" ? { args: edited, note: "torture: edited" } : {}),
        });
      approvalActs.decidedInRuntime++;
      return true;
    } catch (error) {
      // A stale version (the run moved on): the next round decides again if it still waits.
      approvalActs.refused++;
      process.stderr.write(`torture: trial ${trial}: approval refused: ${(error as Error).message}\n`);
      return false;
    } finally {
      await operator.close();
    }
  };
  /** Once the run waits for approval: kills the owner if the plan says so, then decides. */
  const approvalActor = async (child: ChildProcess, exited: () => boolean): Promise<void> => {
    if (!approvalPlan || approvalDone.decided) return;
    let runId: string | null = null;
    for (;;) {
      if (exited()) return;
      const now = await trialRun(db);
      runId = now.runId;
      if (now.status === "waiting" && now.waiting === "approval") break;
      if (now.status !== null && !["running", "waiting", "interrupted"].includes(now.status)) return;
      await sleep(10);
    }
    if (approvalPlan.killParked && !approvalDone.killed) {
      approvalDone.killed = true;
      approvalActs.killedWhileParked++;
      child.kill("SIGKILL");
      while (!exited()) await sleep(5);
    }
    approvalDone.decided = await decideApproval(runId!);
  };
  /** The queue kind: held runs of the chat keep its queued inputs waiting; the harness stops them. */
  const stopHeldBeforeQueued = async (): Promise<boolean> => {
    const { events } = await readLog(db);
    const queued = new Set<string>();
    const runs = new Map<string, Array<(typeof events)[number]["event"]>>();
    for (const { streamId, event } of events) {
      if (event.type === "input.queued" && event.chatId === TORTURE_CHAT) queued.add(event.inputId);
      if (event.type === "input.admitted" && event.chatId === TORTURE_CHAT) queued.delete(event.inputId);
      if (streamId.startsWith("run-")) runs.set(streamId, [...(runs.get(streamId) ?? []), event]);
    }
    if (queued.size === 0) return false;
    const held = [...runs.values()].filter((stream) => {
      const first = stream[0];
      return (
        first?.type === "run.admitted" &&
        first.chatId === TORTURE_CHAT &&
        statusOf(foldRun(stream)) === "held"
      );
    });
    if (held.length === 0) return false;
    const operator = await openOperator(db, dir, serverUrl);
    try {
      for (const stream of held) {
        const first = stream[0] as { runId: string };
        await operator.cancel(first.runId, { by: HARNESS_BY, note: "its chat's queued inputs wait" });
        stoppedForQueue++;
      }
    } finally {
      await operator.close();
    }
    return true;
  };
  // The ssh and terminal agents' lost sessions: once a trial, while the run's `sessionStep`th command
  // runs (its witness line is there, its outcome not yet), the harness kills the session from outside.
  const sessionStep = 1 + Math.floor(rng() * (toolAgent?.commands ?? 1));
  let sessionDone = !isSessionAct(point);
  let sessionKills = 0;
  const witnessLines = (): number =>
    toolAgent && existsSync(join(dir, "witness", toolAgent.witness))
      ? readFileSync(join(dir, "witness", toolAgent.witness), "utf8")
          .split("\n")
          .filter((l) => l !== "").length
      : 0;
  const sessionActor = async (child: ChildProcess, exited: () => boolean): Promise<void> => {
    if (sessionDone) return;
    if (point === "mid-submit" || point === "kill-browser") {
      // The site counted a submit and holds its answer back: the submit is in flight.
      while (!exited() && counts.size === 0) await sleep(5);
      if (exited()) return;
      sessionDone = true;
      if (point === "mid-submit") {
        child.kill("SIGKILL");
        sessionKills++;
      } else {
        // The browser's own process (Chromium's pid); its renderers and helpers go with it.
        for (const pid of chromiumBrowsers(child.pid!)) if (endIfNamed(pid, "chromium")) sessionKills++;
      }
      return;
    }
    while (!exited() && witnessLines() < sessionStep) await sleep(5);
    if (exited()) return;
    sessionDone = true;
    if (point === "drop-session") sessionKills += sshd!.dropSessions();
    else
      for (const pid of descendantsNamed(child.pid!, "bash")) {
        try {
          process.kill(pid, "SIGKILL");
          sessionKills++;
        } catch {
          // Gone already.
        }
      }
  };
  // The schedule kind: when each process was up (its runtime open, noted in `alive`, until it ended).
  const alive: AliveWindow[] = [];
  const aliveFile = join(dir, "alive");
  const aliveLines = (): string[] =>
    existsSync(aliveFile)
      ? readFileSync(aliveFile, "utf8")
          .split("\n")
          .filter((l) => l !== "")
      : [];
  // The faults below holdfast: once a trial, while an agent process runs.
  const diskAt = (["intent", "outcome", "random"] as const)[trial % 3]!;
  const diskDelayMs = 300 + Math.floor(rng() * 1500);
  const diskHoldMs = 500 + Math.floor(rng() * 2000);
  const stepSeconds = rng() < 0.5 ? 3600 : -3600;
  const clockDelayMs = 300 + Math.floor(rng() * 1500);
  const clockHoldMs = 1000 + Math.floor(rng() * 3000);
  const killWhileStepped = rng() < 0.5;
  /** The round whose process the disk filled under (an exit then is the fault's, not a crash). */
  let diskRound = -1;
  let currentRound = 0;
  /** The trial's clock step, set right at this harness time (0: not stepped). */
  let clockRightAt = 0;
  const storageActor = async (child: ChildProcess, exited: () => boolean): Promise<void> => {
    if (!storage || storage.played) return;
    if (storage.kind === "disk-full" && smallDisk) {
      // At an intent in flight, a moment after one (its outcome's append), or at a random moment.
      const t0 = Date.now();
      if (diskAt === "random") while (!exited() && Date.now() - t0 < diskDelayMs) await sleep(20);
      else {
        while (!exited() && !(await trialRun(db)).inFlight) await sleep(5);
        if (diskAt === "outcome") await sleep(Math.floor(rng() * 60));
      }
      if (exited()) return;
      diskRound = currentRound;
      storage.played = true;
      storage.at = diskAt;
      storage.ballastMib = Math.round(smallDisk.fill() / (1 << 20));
      try {
        writeFileSync(join(smallDisk.dir, "probe"), Buffer.alloc(4096));
        rmSync(join(smallDisk.dir, "probe"), { force: true });
        storage.probeRefused = false;
      } catch (error) {
        storage.probeRefused = (error as NodeJS.ErrnoException).code === "ENOSPC";
        rmSync(join(smallDisk.dir, "probe"), { force: true });
      }
      await sleep(diskHoldMs);
      // The process may be gone (killed, or it stopped for the full disk): space is back before the next.
      smallDisk.free();
      return;
    }
    if (storage.kind === "clock" && clock) {
      const t0 = Date.now();
      while (!exited() && Date.now() - t0 < clockDelayMs) await sleep(20);
      if (exited()) return;
      clock.step(0, stepSeconds);
      storage.played = true;
      storage.stepSeconds = stepSeconds;
      clockRightAt = Date.now() + clockHoldMs;
      // Half the trials: a SIGKILL while the clock is stepped, so the next process recovers on it.
      if (killWhileStepped) {
        await sleep(Math.floor(clockHoldMs / 3));
        if (!exited()) {
          storage.killedWhileStepped = true;
          child.kill("SIGKILL");
        }
      }
    }
  };
  for (let round = 0; round < (decides || faultKinds.length > 0 || storage ? 16 : 8); round++) {
    currentRound = round;
    const acting = control && !controlDone ? during : undefined;
    const upBefore = aliveLines().length;
    // The clock set right once its step has lasted (across the processes started meanwhile).
    if (clock && clockRightAt > 0 && Date.now() >= clockRightAt) {
      clock.step(0, 0);
      clockRightAt = 0;
    }
    const result = await runProcess(
      env,
      next,
      acting || plan || approvalPlan || !sessionDone || (storage && !storage.played)
        ? async (child, exited) => {
            await Promise.all([
              acting?.(child, exited),
              waitsActor(child, exited),
              approvalActor(child, exited),
              sessionActor(child, exited),
              storageActor(child, exited),
              // The clock set right while the process runs, when its step has lasted.
              (async () => {
                while (clock && !exited()) {
                  if (clockRightAt > 0 && Date.now() >= clockRightAt) {
                    clock.step(0, 0);
                    clockRightAt = 0;
                  }
                  await sleep(50);
                }
              })(),
            ]);
          }
        : undefined,
    );

    if (scheduleKind) {
      const ended = Date.now();
      for (const line of aliveLines().slice(upBefore))
        alive.push({ from: Number(line.split(" ")[1]), to: ended });
    }
    if (result.signal === "SIGKILL") {
      kills++;
      if (next?.at === point) firedAt.add(point);
      // A fault trial's fault is in the agent or the reconciler: it "fires" when the trial ran.
      if (fault) firedAt.add(point);
    }
    try {
      snapshots.push(outcomesOf((await readLog(db)).events));
    } catch (e) {
      error = `log unreadable: ${(e as Error).message}`;
      break;
    }
    // The pause kind: a paused run stays paused across restarts (some killed), until the harness resumes it.
    if (pauseAsked && !resumed) {
      const { runId, status } = await trialRun(db);
      if (restartWhilePaused) {
        restartWhilePaused = false;
        if (status === "paused") pauseSeen.stillPaused++;
        else pauseSeen.notPaused.push(`${status} (trial ${trial})`);
        if (result.signal === "SIGKILL") pauseSeen.killsWhilePaused++;
      }
      if (status === "paused" && runId !== null && control?.kind === "pause") {
        if (result.signal === "SIGKILL") restarts++;
        if (pausedRestarts < control.restarts) {
          pausedRestarts++;
          restartWhilePaused = true;
          next = rng() < 0.5 ? { at: "random", ms: 300 + Math.floor(rng() * 1500) } : null;
          continue;
        }
        const operator = await openOperator(db, dir, serverUrl);
        try {
          await operator.resume(runId, { by: HARNESS_BY });
        } finally {
          await operator.close();
        }
        resumed = true;
        next = rng() < 0.3 ? { at: "random", ms: 300 + Math.floor(rng() * 2500) } : null;
        continue;
      }
    }
    if (storage?.kind === "disk-full" && /JournalUnavailable/.test(result.out + result.err))
      storage.refusedAppends++;
    // disk-full: a process that stopped on its own while the disk was full, saying why
    // (`JournalUnavailable`), is the fault's (never a crash the harness caused); any other exit,
    // SQLite's raw "database or disk is full" among them, stays an error below.
    if (
      storage?.kind === "disk-full" &&
      diskRound === round &&
      result.signal === null &&
      result.code !== 0 &&
      /JournalUnavailable/.test(result.err)
    ) {
      storage.exitsWhileFull++;
      process.stderr.write(
        `torture: trial ${trial}: the agent stopped on the full disk: ${result.err
          .split("\n")
          .filter((l) => !l.includes("HOLDFAST_PREFLIGHT") && !l.includes("--trace-warnings"))
          .slice(0, 4)
          .join(" | ")
          .slice(0, 600)}\n`,
      );
      restarts++;
      next = null;
      continue;
    }
    // A fault below holdfast may leave the trial's run unsettled in a process that ended (its
    // submit refused, the run stopped in doubt): the next process recovers it.
    if (storage && result.code === 0 && result.signal === null) {
      const { status } = await trialRun(db);
      if (status === null || status === "running" || status === "interrupted") {
        storage.restartsToSettle++;
        next = null;
        continue;
      }
    }
    if (result.code === 0 && result.signal === null) {
      if (queueKind && (await stopHeldBeforeQueued())) {
        next = null;
        continue;
      }
      // A cancel that found no call in flight: asked after the run ended, the answer says so.
      if (control?.kind === "cancel" && !controlDone) {
        controlDone = true;
        const { runId } = await trialRun(db);
        if (runId !== null) {
          const operator = await openOperator(db, dir, serverUrl);
          try {
            await cancelNow(operator, runId, "none");
          } finally {
            await operator.close();
          }
        }
      }
      // A held run: a person decides through the API, and the next process carries it on.
      if (!decides || decisions >= 8 || !(await heldIn(db))) break;
      try {
        decisions += await decideThroughApi(
          db,
          dir,
          rng,
          decisionCounts,
          browserAgent ? new Set(counts.keys()) : new Set(),
        );
      } catch (e) {
        error = `decision refused: ${(e as Error).message}`;
        break;
      }
      next = null;
      continue;
    }
    if (result.signal !== "SIGKILL") {
      error = `process failed (${result.code}): ${result.err.split("\n").slice(0, 3).join(" | ")}`;
      break;
    }
    restarts++;
    next =
      pendingRecoveryKill ??
      (rng() < 0.25
        ? { at: pick(RECOVERY_POINTS) }
        : rng() < 0.15
          ? { at: "random", ms: 200 + Math.floor(rng() * 1200) }
          : null);
    pendingRecoveryKill = null;
    // The schedule kind: while its schedules tick, half the restarts are killed across a tick again.
    if (scheduleKind && next === null && Date.now() < Number(env.TORTURE_SCHEDULE_UNTIL) && rng() < 0.5)
      next = { at: pick(SCHEDULE_CRASH_POINTS), skip: Math.floor(rng() * 3) };
  }
  // The signal kind: a signal to the run once it ended must be refused, and write nothing.
  if (signalKind && !error) {
    const { runId, status } = await trialRun(db);
    if (runId !== null && status !== null && ["completed", "failed", "cancelled", "stopped"].includes(status))
      await sendSignal(runId, "late", `t${trial}-late`);
  }
  if (clock) clock.step(0, 0);
  const log = await readLog(db);
  if (fault && kills === 0) firedAt.add(point);
  // Nothing killed this trial: every effect that happened must have its outcome in the journal.
  const check = checkTrial(log, dir, counts, snapshots.slice(0, -1), ALLOWLISTED_TOOLS, {
    everyEffectRecorded: kills === 0,
  });
  const audit = await auditLog(db);
  const browser = browserAgent
    ? {
        ...checkBrowser(
          log.events,
          counts,
          orders.filter((o) => o.label === `t${trial}`).length,
          BROWSER_TOOL,
        ),
        probeDeclared: browserProbe,
      }
    : undefined;
  const backoff = backoffKind ? checkBackoff(log.events, requests) : undefined;
  const cancel = cancelKind ? checkCancel(log.events, Object.keys(check.effects), cancels) : undefined;
  const queue = queueKind
    ? { ...checkQueue(log.events, TORTURE_CHAT, ["trial", ...QUEUED_INPUTS]), stoppedForQueue }
    : undefined;
  const pause = pauseKind
    ? checkPause(log.events, Object.keys(check.effects), HARNESS_BY, pauseSeen)
    : undefined;
  const approvalEffects: ApprovalEffect[] = existsSync(join(dir, "witness", "pay.txt"))
    ? readFileSync(join(dir, "witness", "pay.txt"), "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => {
          const [label = "", amount = "", key = ""] = l.split(" ");
          return { label, amount: Number(amount), key };
        })
    : [];
  const waits =
    waitKinds.length > 0
      ? checkWaitKinds(waitKinds, log.events, { signals, alive, approvalEffects })
      : undefined;
  const sealed = sealedRows(log.rows);
  const key = process.env.HOLDFAST_ENCRYPTION_KEY;
  const secrets = scanTrial(dir, join(dir, "receipts"), log.events, {
    TORTURE_TOKEN: TORTURE_SECRET,
    // With encryption on, the key and every tool error text must be nowhere in clear.
    ...(key
      ? {
          key,
          ...Object.fromEntries(Object.entries(TORTURE_ERROR_TEXTS).map(([k, v]) => [`error text ${k}`, v])),
        }
      : {}),
  });
  if (smallDisk) {
    smallDisk.unmount();
    mountedDisks.delete(smallDisk);
  }
  if (!values.keep) rmSync(dir, { recursive: true, force: true });
  return {
    trial,
    point,
    fired: firedAt.has(point),
    restarts,
    kills,
    decisions,
    check,
    audit,
    sealed,
    secrets,
    ...(backoff ? { backoff } : {}),
    ...(cancel ? { cancel } : {}),
    ...(queue ? { queue } : {}),
    ...(pause ? { pause } : {}),
    ...(waits ? { waits, waitActs, ...(approvalPlan ? { approvalActs } : {}) } : {}),
    ...(isSessionAct(point) ? { sessionKills } : {}),
    ...(browser ? { browser } : {}),
    ...(storage ? { storage } : {}),
    ...(error ? { error } : {}),
  };
};

/** `--workers N --store postgres://…`: several worker processes on one journal, killed at random. */
const multiWorker = async () => {
  const numbers = {
    workers: Number(values.workers ?? "3"),
    runs: Number(values.runs),
    kills: Number(values.kills),
    pauses: Number(values.pauses),
    leaseMs: Number(values["lease-ms"]),
  };
  for (const [name, value] of Object.entries(numbers)) {
    if (!Number.isInteger(value) || value < (name === "kills" || name === "pauses" ? 0 : 1)) {
      process.stderr.write(
        `torture: --${name === "leaseMs" ? "lease-ms" : name} takes a positive whole number\n`,
      );
      process.exit(2);
    }
  }
  const store = values.store ?? process.env.HOLDFAST_STORE ?? "";
  if (!/^postgres(ql)?:\/\//.test(store)) {
    process.stderr.write(
      "torture: the multi-worker torture needs --store postgres://… (a fresh schema is made in it)\n",
    );
    process.exit(2);
  }
  const { runWorkersTorture } = await import("./workers.js");
  const outcome = await runWorkersTorture({
    store,
    seed,
    faultKinds,
    storageFaults: storageFaults as PgFaultKind[],
    keep: values.keep,
    ...(values["max-seconds"] !== undefined ? { maxWavesMs: Number(values["max-seconds"]) * 1000 } : {}),
    ...numbers,
    log: (line) => process.stderr.write(`${line}\n`),
  }).catch((error: unknown) => {
    process.stderr.write(`torture: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  });
  const { summary, failed } = outcome;
  process.stdout.write(`${JSON.stringify(summary, null, values.json ? undefined : 2)}\n`);
  process.exit(failed ? 1 : 0);
};

const main = async () => {
  if (values.workers !== undefined || values.store !== undefined) return multiWorker();
  const server = await startWitnessServer();
  // The ssh agent's remote host: a real OpenSSH server on 127.0.0.1, with keys made for this run.
  const sshdDir = variant === "ssh" ? mkdtempSync(join(tmpdir(), "holdfast-torture-sshd-")) : null;
  if (sshdDir) sshd = await startSshd(sshdDir);
  // The faults belong to the classic agent's code; the AI SDK agent gets the kills.
  // With the ordinary day's kinds, the cycle is theirs: every named point, and twice as often a
  // kill in a backoff or at random (which lands in one often); the classic faults have their record.
  // The wait kinds put the wake-up's crash points first, so a short slice kills there.
  const wakePoints: Category[] = [
    ...(scheduleKind ? [...SCHEDULE_CRASH_POINTS, "random" as const] : []),
    ...(parkKind ? [...WAKE_CRASH_POINTS, "random" as const, ...WAKE_CRASH_POINTS] : []),
    ...(approvalKind ? [...APPROVAL_WAKE_POINTS, ...WAKE_CRASH_POINTS, "random" as const] : []),
  ];
  const points: Category[] = backoffKind
    ? [...wakePoints, ...TORTURE_POINTS, "random", "during-backoff", "random"]
    : faultKinds.length > 0
      ? [...wakePoints, ...TORTURE_POINTS, "random", "random"]
      : variant === "classic"
        ? [...TORTURE_POINTS, "random", ...FAULTS]
        : variant === "ssh"
          ? [...TORTURE_POINTS, "random", "drop-session", "random", "drop-session"]
          : variant === "terminal"
            ? [...TORTURE_POINTS, "random", "kill-session", "random", "kill-session"]
            : browserAgent
              ? [...BROWSER_POINTS]
              : [...TORTURE_POINTS, "random"];
  const results: TrialResult[] = [];
  const started = Date.now();
  // `--max-seconds`: no trial starts after this long; the record says how many ran and that it stopped.
  const maxMs = values["max-seconds"] === undefined ? Infinity : Number(values["max-seconds"]) * 1000;
  for (let i = 0; i < trials; i++) {
    if (Date.now() - started >= maxMs) {
      process.stderr.write(`torture: --max-seconds ${values["max-seconds"]} reached after ${i} trials\n`);
      break;
    }
    const point = (values.point as Category | undefined) ?? points[i % points.length]!;
    const result = await runTrial(i, point, server.url, server.counts, server.requests, server.orders);
    results.push(result);
    const bad =
      (result.browser?.duplicates.length ?? 0) +
      (result.browser?.lost.length ?? 0) +
      result.check.duplicates +
      result.check.lost +
      result.check.unsettled.length +
      (result.check.logOk ? 0 : 1) +
      result.audit.length +
      result.secrets.leaks.length +
      (result.backoff?.problems.length ?? 0) +
      kindProblems(result).length +
      (result.error ? 1 : 0);
    process.stderr.write(
      `trial ${i + 1}/${trials} ${point.padEnd(28)} kills=${result.kills} restarts=${result.restarts} decisions=${result.decisions} held=${result.check.held} ${bad ? "PROBLEM" : "ok"}\n`,
    );
    if (bad)
      process.stderr.write(
        `  ${JSON.stringify({ ...result.check, effects: undefined, audit: result.audit, secrets: result.secrets, backoff: result.backoff?.problems, kinds: kindProblems(result), browser: result.browser, error: result.error })}\n`,
      );
  }
  await server.close();
  await sshd?.stop();
  if (sshdDir) rmSync(sshdDir, { recursive: true, force: true });
  const perPoint: Record<string, number> = {};
  const killedPerPoint: Record<string, number> = {};
  for (const r of results) {
    perPoint[r.point] = (perPoint[r.point] ?? 0) + 1;
    if (r.fired) killedPerPoint[r.point] = (killedPerPoint[r.point] ?? 0) + 1;
  }
  const sum = (f: (r: TrialResult) => number) => results.reduce((a, r) => a + f(r), 0);
  const sumOf = <T>(items: ReadonlyArray<T>, f: (item: T) => number) => items.reduce((a, x) => a + f(x), 0);
  const backoffs = results.flatMap((r) => (r.backoff ? [{ trial: r.trial, ...r.backoff }] : []));
  const summary = {
    agent: variant,
    /** The ordinary day's fault kinds played (empty: the classic torture as before). */
    faultKinds,
    commit: process.env.TORTURE_COMMIT ?? null,
    seed,
    trials: results.length,
    /** Trials asked for (`--trials`): more than `trials` when `--max-seconds` stopped the run first. */
    trialsAsked: trials,
    trialsPerCrashPoint: perPoint,
    killedAtCrashPoint: killedPerPoint,
    kills: sum((r) => r.kills),
    decisions: sum((r) => r.decisions),
    decisionsByKind: decisionCounts,
    ...(toolAgent || browserAgent
      ? {
          /** Trials that lost their session from outside mid-command, and the processes killed for it. */
          sessionLost: {
            trials: results.filter((r) => r.sessionKills !== undefined).length,
            killedProcesses: sum((r) => r.sessionKills ?? 0),
          },
        }
      : {}),
    // The browser agent's own check (check-browser.ts) adds its findings to the common ones.
    duplicates: sum((r) => r.check.duplicates + (r.browser?.duplicates.length ?? 0)),
    lost: sum((r) => r.check.lost + (r.browser?.lost.length ?? 0)),
    ...(browserAgent
      ? {
          /** The browser agent: the form's submits, the site's counts, the probe's verdicts. */
          browser: {
            trialsWithProbe: results.filter((r) => r.browser?.probeDeclared).length,
            trialsWithoutProbe: results.filter((r) => r.browser && !r.browser.probeDeclared).length,
            submitsIntended: sum((r) => r.browser?.submitsIntended ?? 0),
            submitsReceived: sum((r) => r.browser?.submitsReceived ?? 0),
            submitsDone: sum((r) => r.browser?.submitsDone ?? 0),
            probe: {
              done: sum((r) => r.browser?.probe.done ?? 0),
              notDone: sum((r) => r.browser?.probe.notDone ?? 0),
              unknown: sum((r) => r.browser?.probe.unknown ?? 0),
            },
            /** Trials whose run ended with the site holding exactly one order for it. */
            trialsWithOneOrder: results.filter((r) => r.browser?.orders === 1).length,
            problems: results.flatMap((r) =>
              [...(r.browser?.duplicates ?? []), ...(r.browser?.lost ?? [])].map(
                (p) => `trial ${r.trial}: ${p}`,
              ),
            ),
          },
        }
      : {}),
    held: sum((r) => r.check.held),
    heldByReason: results.reduce<Record<string, number>>((all, r) => {
      for (const [k, n] of Object.entries(r.check.heldByReason)) all[k] = (all[k] ?? 0) + n;
      return all;
    }, {}),
    completed: sum((r) => r.check.completed),
    failed: sum((r) => r.check.failed),
    unsettled: results.flatMap((r) => r.check.unsettled.map((u) => `trial ${r.trial}: ${u}`)),
    reconciled: sum((r) => r.check.reconciled),
    replayed: sum((r) => r.check.replayed),
    logCheck: results.every((r) => r.check.logOk) ? "clean" : results.flatMap((r) => r.check.logProblems),
    encryptedEvents: sum((r) => r.sealed),
    /** Files holding the registered secret (or the key) that should hold none: journal, WAL, SHM, receipts, work. */
    secretLeaks: results.flatMap((r) => r.secrets.leaks.map((l) => `trial ${r.trial}: ${l}`)),
    /** Output files of attempts still in doubt, kept (0600) for their reconciler. */
    secretsKeptForCallsInDoubt: sum((r) => r.secrets.keptForCallsInDoubt),
    audit: results.every((r) => r.audit.length === 0)
      ? "clean"
      : results.flatMap((r) => r.audit.map((f) => `trial ${r.trial}: ${f}`)),
    errors: results.filter((r) => r.error).map((r) => `trial ${r.trial}: ${r.error}`),
    ...(backoffKind
      ? {
          /** The `backoff` kind: retries the policies scheduled, 429s, backoffs a kill cut, and what broke a law. */
          backoff: {
            callsWithPolicy: sumOf(backoffs, (b) => b.callsWithPolicy),
            retriesScheduled: sumOf(backoffs, (b) => b.retriesScheduled),
            retriesByReason: backoffs.reduce<Record<string, number>>((all, b) => {
              for (const [k, n] of Object.entries(b.retriesByReason)) all[k] = (all[k] ?? 0) + n;
              return all;
            }, {}),
            refusals: sumOf(backoffs, (b) => b.refusals),
            acted: sumOf(backoffs, (b) => b.acted),
            lateRefused: sumOf(backoffs, (b) => b.lateRefused),
            backoffsCut: sumOf(backoffs, (b) => b.backoffsCut),
            trialsWithABackoffCut: backoffs.filter((b) => b.backoffsCut > 0).length,
            exhausted: sumOf(backoffs, (b) => b.exhausted),
            problems: backoffs.flatMap((b) => b.problems.map((p) => `trial ${b.trial}: ${p}`)),
          },
        }
      : {}),
    ...(cancelKind
      ? {
          /** The `cancel` kind: cancels the harness asked, where the owner was killed, how the runs ended. */
          cancel: {
            cancelsRequested: sumOf(results, (r) => r.cancel?.cancelsRequested ?? 0),
            killedBeforeRequest: sumOf(results, (r) => r.cancel?.killedBeforeRequest ?? 0),
            killedAfterRequest: sumOf(results, (r) => r.cancel?.killedAfterRequest ?? 0),
            requestsCommitted: sumOf(results, (r) => r.cancel?.requestsCommitted ?? 0),
            cancelledEnded: sumOf(results, (r) => r.cancel?.cancelledEnded ?? 0),
            heldCancelledInDoubt: sumOf(results, (r) => r.cancel?.heldCancelledInDoubt ?? 0),
            stoppedHeld: sumOf(results, (r) => r.cancel?.stoppedHeld ?? 0),
            endedFirst: sumOf(results, (r) => r.cancel?.endedFirst ?? 0),
            intentsRefused: sumOf(results, (r) => r.cancel?.intentsRefused ?? 0),
            problems: results.flatMap((r) => (r.cancel?.problems ?? []).map((p) => `trial ${r.trial}: ${p}`)),
          },
        }
      : {}),
    ...(queueKind
      ? {
          /** The `queue` kind: inputs queued behind each run, admitted from the queue, held runs stopped for them. */
          queue: {
            queued: sumOf(results, (r) => r.queue?.queued ?? 0),
            queuedAdmitted: sumOf(results, (r) => r.queue?.queuedAdmitted ?? 0),
            admittedDirectly: sumOf(results, (r) => r.queue?.admittedDirectly ?? 0),
            heldStoppedForQueue: sumOf(results, (r) => r.queue?.stoppedForQueue ?? 0),
            problems: results.flatMap((r) => (r.queue?.problems ?? []).map((p) => `trial ${r.trial}: ${p}`)),
          },
        }
      : {}),
    ...(pauseKind
      ? {
          /** The `pause` kind: pauses asked and carried out, restarts while paused, resumes. */
          pause: {
            pausesRequested: sumOf(results, (r) => r.pause?.pausesRequested ?? 0),
            paused: sumOf(results, (r) => r.pause?.paused ?? 0),
            resumed: sumOf(results, (r) => r.pause?.resumed ?? 0),
            stillPausedAfterRestart: sumOf(results, (r) => r.pause?.stillPausedAfterRestart ?? 0),
            killsWhilePaused: sumOf(results, (r) => r.pause?.killsWhilePaused ?? 0),
            intentsRefused: sumOf(results, (r) => r.pause?.intentsRefused ?? 0),
            problems: results.flatMap((r) => (r.pause?.problems ?? []).map((p) => `trial ${r.trial}: ${p}`)),
          },
        }
      : {}),
    // The wait kinds: each kind's counts added up over the trials, and the laws it saw broken.
    ...Object.fromEntries(
      waitKinds.map((kind) => [
        kind,
        sumKindChecks(
          results.flatMap((r) => {
            const check = r.waits?.[kind];
            return check ? [{ trial: r.trial, check }] : [];
          }),
        ),
      ]),
    ),
    ...(waitKinds.length > 0
      ? {
          /** Where the harness killed the owner around the waits (besides the crash points). */
          waitKills: {
            whileParked: sumOf(results, (r) => r.waitActs?.killedWhileParked ?? 0),
            afterSignalCommit: sumOf(results, (r) => r.waitActs?.killedAfterSignalCommit ?? 0),
            ...(approvalKind
              ? {
                  whileAwaitingApproval: sumOf(results, (r) => r.approvalActs?.killedWhileParked ?? 0),
                  approverAtAfterApproval: sumOf(results, (r) => r.approvalActs?.approverKilled ?? 0),
                  approvalsRefused: sumOf(results, (r) => r.approvalActs?.refused ?? 0),
                }
              : {}),
          },
        }
      : {}),
    problems: results
      .filter(
        (r) => r.check.duplicates || r.check.lost || r.browser?.duplicates.length || r.browser?.lost.length,
      )
      .map((r) => ({
        trial: r.trial,
        point: r.point,
        duplicates: [...r.check.duplicateDetail, ...(r.browser?.duplicates ?? [])],
        lost: [...r.check.lostDetail, ...(r.browser?.lost ?? [])],
      })),
    effectsPerCall: Object.assign(
      {},
      ...results.map((r) =>
        Object.fromEntries(Object.entries(r.check.effects).map(([k, v]) => [`t${r.trial}:${k}`, v])),
      ),
    ),
    ...(storageFaults.length > 0
      ? (() => {
          const played = results.flatMap((r) => (r.storage?.played ? [r.storage] : []));
          const of = (kind: StorageFaultKind) => played.filter((p) => p.kind === kind);
          return {
            /** The faults below holdfast played (decision 0080), by kind: trials whose fault happened. */
            faults: Object.fromEntries(storageFaults.map((k) => [k, of(k).length])),
            faultDetail: {
              notPlayed: results.filter((r) => r.storage && !r.storage.played).length,
              diskFull: {
                atIntent: of("disk-full").filter((p) => p.at === "intent").length,
                atOutcome: of("disk-full").filter((p) => p.at === "outcome").length,
                atRandom: of("disk-full").filter((p) => p.at === "random").length,
                probeRefused: of("disk-full").filter((p) => p.probeRefused).length,
                refusedAppends: sumOf(of("disk-full"), (p) => p.refusedAppends),
                exitsWhileFull: sumOf(of("disk-full"), (p) => p.exitsWhileFull),
                ballastMib: {
                  min: Math.min(...of("disk-full").map((p) => p.ballastMib ?? 0)),
                  max: Math.max(...of("disk-full").map((p) => p.ballastMib ?? 0)),
                },
              },
              clockSteps: {
                forward: of("clock").filter((p) => (p.stepSeconds ?? 0) > 0).length,
                back: of("clock").filter((p) => (p.stepSeconds ?? 0) < 0).length,
                killedWhileStepped: of("clock").filter((p) => p.killedWhileStepped).length,
              },
              restartsToSettle: sumOf(played, (p) => p.restartsToSettle),
            },
          };
        })()
      : {}),
    seconds: Math.round((Date.now() - started) / 100) / 10,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    const { effectsPerCall: _e, ...short } = summary;
    process.stdout.write(`${JSON.stringify(short, null, 2)}\n`);
  }
  const failed =
    summary.duplicates > 0 ||
    summary.lost > 0 ||
    summary.logCheck !== "clean" ||
    summary.audit !== "clean" ||
    summary.unsettled.length > 0 ||
    summary.secretLeaks.length > 0 ||
    (summary.backoff?.problems.length ?? 0) > 0 ||
    results.some((r) => kindProblems(r).length > 0) ||
    summary.errors.length > 0;
  process.exit(failed ? 1 : 0);
};

void main();
