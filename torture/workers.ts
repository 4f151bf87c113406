/**
 * Multi-worker torture: several `holdfast worker` processes share one PostgreSQL journal (a fresh
 * schema per torture run) and run the torture agent's real effects. Inputs are fed to the workers
 * on their standard input, spread across them; between waves of inputs a random worker is
 * SIGKILLed and restarted (with a new worker id), until every run is completed or held. The
 * outside witnesses count the effects; every take-over (`run.claimed` naming a killed worker) is
 * timed from the victim's death and checked against lease + 2 s; the whole log is checked at the end.
 *
 *   npm run torture -- --store postgres://postgres@127.0.0.1:5432/test --workers 3 --runs 200 --kills 30 --json
 *
 * A killed worker's id is either this host's `<host>:<pid>:<random>` (a peer sees the pid is gone
 * and takes its runs at once) or a made-up id of "another host" (a peer can only wait for the
 * lease to run out); each restart picks one at random, and the take-overs are reported per kind.
 *
 * Pauses as well as kills: every worker stops itself (SIGSTOP, `HOLDFAST_PAUSE_AT`) after its first
 * few effects and then every 40th, right after an owner's lease check and before the effect — the window law 10's fencing proofs close —
 * and is continued (SIGCONT) only after more than its lease, when a peer may have taken the run.
 * And operators: between waves, held runs are decided per call with `holdfast decide`, run with a
 * live worker's `HOLDFAST_WORKER_ID` in its environment (as `kubectl exec` would), from the
 * witnesses' evidence; the worker must go on undisturbed.
 *
 * The ordinary day's fault kinds (`--faults`, decision 0047): `backoff` as on libSQL; `cancel` and
 * `pause` take turns over the waves, each aimed at a run with a call in flight (an open intent in
 * its stream) from an operator's runtime in this process (tools, no agent): a cancel kills the
 * owner (from `claims`) just before the request, just after it committed, or not at all (then the
 * wave kills at random); a pause kills the owner right after the request 40 % of the time, stays
 * through one or two more waves of kills (checked still paused after each) and is resumed with
 * `holdfast resume`. `queue`: each chat's three queued inputs (`whenBusy: "queue"`) follow its
 * input on the same worker's stdin, which submits one chat's lines in order; a chat's lines not all
 * reported are handed again together, in order, to one worker. Held runs with queued inputs behind
 * them are stopped at the end (the stop decision) so the queues drain. The checks are
 * torture/check-kinds.ts's, over the whole journal.
 *
 * The wait kinds (decision 0064): with `sleep` the runs park on durable sleeps, woken by any worker
 * from the due index; a third of the restarted workers (one at a time) carry a wake-up crash point
 * (`before-wake`, `after-woken`) and kill themselves there, counted apart from the waves' kills.
 * With `signal` each run waits for a signal the harness sends from its operator runtime — before
 * the wait, once parked, twice with one id, or never (it times out) by the run's chat number — and
 * half the waves send a parked run's signal and kill a worker right after its commit, before any
 * worker wakes it. A signal sent to some runs that ended must be refused. The checks are
 * torture/check-waits.ts's, over the whole journal.
 *
 * The faults below holdfast (`--faults pg-restart,partition,commit-lost`, decision 0080): the
 * workers use a private PostgreSQL server (test/support/privatePg.ts; never the shared one), each
 * worker slot through its own TCP proxy (test/support/tcpProxy.ts), while the harness reads the
 * server directly. After each wave's kill and restart: `pg-restart` restarts the server fast or
 * SIGKILLs its postmaster and starts it again; `partition` blackholes (or makes refuse) one
 * worker's proxy for a while shorter or longer than the lease, healed in the background; and
 * `commit-lost` cuts one worker's connection right after or right before the COMMIT of an append
 * carrying an intent or an outcome. The same checks, plus: no worker died on its own, no run
 * failed for an outage; a take-over during a fault is not held to the lease + 2 s bound.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { openRuntime, type Runtime } from "../src/adapters/openRuntime.js";
import { maskUrl, openStore } from "../src/adapters/store.js";
import type { RecordedEvent } from "../src/events/index.js";
import type { RunRow } from "../src/projections/index.js";
import { SCHEDULE_CRASH_POINTS, WAKE_CRASH_POINTS } from "../src/runtime/crash.js";
import type { Journal } from "../src/runtime/Journal.js";
import { type PrivatePg, startPrivatePg } from "../test/support/privatePg.js";
import { startTcpProxy, type TcpProxy } from "../test/support/tcpProxy.js";
import {
  auditFindings,
  checkBackoff,
  checkTrial,
  type Outcomes,
  outcomesOf,
  readJournal,
  sealedRows,
} from "./check.js";
import { type CancelAsked, checkCancel, checkPause, checkQueue, type QueueCheck } from "./check-kinds.js";
import { type AliveWindow, checkWaitKinds, type SignalSent } from "./check-waits.js";
import {
  ALLOWLISTED,
  type FaultKind,
  HARNESS_BY,
  makeTortureDefinitions,
  type PgFaultKind,
  QUEUED_AGENT,
  QUEUED_INPUTS,
  SIGNAL_NAME,
  TORTURE_SCHEDULES,
  tortureScheduleSpecs,
  waitKindsIn,
} from "./definitions.js";
import { mountSmallTablespace, type SmallTablespace } from "./smallTablespace.js";
import { requireFaketime, type SteppedClocks, steppedClocks } from "./steppedClock.js";
import { startWitnessServer } from "./witness-server.js";

const ROOT = join(import.meta.dirname, "..");
const CLI = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");
const MODULE = join(import.meta.dirname, "worker-module.ts");

export interface WorkersTortureOptions {
  /** A postgres:// URL; its `?schema=` is replaced by a fresh one. */
  readonly store: string;
  readonly workers: number;
  readonly runs: number;
  readonly kills: number;
  /** At least this many pauses past the lease (each worker pauses once, after a lease check). */
  readonly pauses: number;
  readonly seed: number;
  readonly leaseMs: number;
  /** The ordinary day's fault kinds the agent plays (torture/definitions.ts FAULT_KINDS); none: as before. */
  readonly faultKinds?: ReadonlyArray<FaultKind>;
  /**
   * The faults below holdfast the harness plays (decision 0080); any: the workers run on a private
   * PostgreSQL server through a proxy each, and `store` is not used.
   */
  readonly storageFaults?: ReadonlyArray<PgFaultKind>;
  /** Keep the schema and the trial folder afterwards. */
  readonly keep: boolean;
  /** Give up waiting for the runs to settle after this long. */
  readonly timeoutMs?: number;
  /** Start no kill wave after this long (`--max-seconds`): the runs settle and the record says so. */
  readonly maxWavesMs?: number;
  /** Progress lines (stderr). */
  readonly log?: (line: string) => void;
}

/** How a take-over was timed: the victim's death to the `run.claimed` event that names it. */
export interface TakeOver {
  readonly runId: string;
  readonly victim: string;
  /** `local`: a dead pid of this host (taken at once); `remote`: only the lease tells. */
  readonly detection: "local" | "remote";
  readonly by: string;
  readonly epoch: number;
  readonly ms: number;
  /** A worker was paused (SIGSTOP) while this run waited to be taken over. */
  readonly peerPaused: boolean;
  /** A storage fault (a restart, a partition) overlapped the wait: the bound does not apply. */
  readonly duringFault: boolean;
}

/** An error of the store being away (a restart, a cut), which the harness's own reads wait out. */
const isOutage = (error: unknown): boolean => {
  const e = error as { _tag?: string; code?: string; message?: string } | null;
  if (e?._tag === "JournalUnavailable") return true;
  if (typeof e?.code === "string" && /^(57P|08|ECONN|EPIPE)/.test(e.code)) return true;
  return /terminat|ECONNREFUSED|ECONNRESET|Connection ended|not queryable|shutting down|starting up/i.test(
    String(e?.message ?? error),
  );
};

/**
 * `target` whose promise-returning methods are tried again while the store is away (up to 90 s):
 * the harness is the outside witness, and a PostgreSQL restart it played must not end it.
 */
const steadily = <T extends object>(target: T): T =>
  new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop, t) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const call = () => (value as (...a: unknown[]) => unknown).apply(t, args);
        const first = call();
        if (!(first instanceof Promise)) return first;
        const until = Date.now() + 90_000;
        const again = (p: Promise<unknown>): Promise<unknown> =>
          p.catch(async (error: unknown) => {
            if (!isOutage(error) || Date.now() > until) throw error;
            await new Promise((resolve) => setTimeout(resolve, 250));
            return again(call() as Promise<unknown>);
          });
        return again(first);
      };
    },
  });

type Identity = "local" | "remote";

interface WorkerProcess {
  readonly slot: number;
  readonly generation: number;
  readonly identity: Identity;
  readonly child: ChildProcessWithoutNullStreams;
  workerId: string | null;
  started: boolean;
  /** When it reported started (its runtime open: it ticks schedules from then), and when it exited. */
  startedAt: number | null;
  endedAt: number | null;
  /** When it was sent SIGTERM at the end: it closes from then (a closing runtime ticks nothing). */
  stoppedAt: number | null;
  exited: boolean;
  killedAt: number | null;
  /** When it stopped itself at its pause point (null: not paused now). */
  pausedAt: number | null;
  stderr: string;
  /** Chats whose lines were written to its stdin and not all reported admitted (or queued). */
  readonly pending: Set<number>;
  /** The wake-up crash point it was started with (it kills itself there), if any. */
  readonly crashAt: string | null;
  readonly exit: Promise<{ code: number | null; signal: string | null }>;
}

/** The CLI in a child process, without blocking this one's event loop; killed after 60 s. */
const runCli = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
): Promise<{ status: number | null; stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stderr });
    });
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The schedule kind's end: how long the harness waits for the tick passes to cover every tick up to
 * the moment it winds the schedules down, before it pauses them anyway.
 */
const TICKS_CATCH_UP_MS = 60_000;

const seeded = (seed: number) => {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};

/**
 * The committed outcomes as the log says now, from the stored rows (parsed, not decoded: the
 * snapshots are taken while the workers run, and the final check decodes everything anyway).
 */
const outcomesNow = async (journal: Journal): Promise<Outcomes> => {
  const events: Array<Pick<RecordedEvent, "event">> = [];
  for (let after = 0; ; ) {
    const rows = await journal.readAllRows({ after, limit: 5000 });
    if (rows.length === 0) break;
    for (const row of rows) events.push({ event: JSON.parse(row.data) as RecordedEvent["event"] });
    after = rows.at(-1)!.position;
  }
  return outcomesOf(events as RecordedEvent[]);
};

/** Every event of the journal, in position order. */

const percentile = (values: ReadonlyArray<number>, p: number): number | null => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

export const runWorkersTorture = async (options: WorkersTortureOptions) => {
  const log = options.log ?? (() => {});
  const faultKinds = options.faultKinds ?? [];
  const storageFaults = options.storageFaults ?? [];
  const cancelKind = faultKinds.includes("cancel");
  const queueKind = faultKinds.includes("queue");
  const pauseKind = faultKinds.includes("pause");
  const controlKinds = [...(cancelKind ? ["cancel"] : []), ...(pauseKind ? ["pause"] : [])];
  const waitKinds = waitKindsIn(faultKinds);
  const signalKind = faultKinds.includes("signal");
  /** The `schedule` kind: the torture's schedules tick through the kill waves (decision 0064). */
  const scheduleKind = faultKinds.includes("schedule");
  /** The crash points a restarted worker may carry: the wake-up's (sleep, signal), the tick's (schedule). */
  const approvalKind = faultKinds.includes("approval");
  const restartPoints: ReadonlyArray<string> = [
    ...(faultKinds.includes("sleep") || signalKind || approvalKind ? WAKE_CRASH_POINTS : []),
    ...(approvalKind ? ["after-approval-wake"] : []),
    ...(scheduleKind ? SCHEDULE_CRASH_POINTS : []),
  ];
  const rng = seeded(options.seed);
  const pick = <T>(items: ReadonlyArray<T>): T => items[Math.floor(rng() * items.length)]!;
  const started = Date.now();
  const schema = `hf_torture_${options.seed}_${randomBytes(3).toString("hex")}`;
  // The clock fault needs libfaketime: said before anything is started.
  if (storageFaults.includes("clock")) requireFaketime();
  // The faults below holdfast: a private server the harness may restart, a proxy per worker slot.
  const pgServer: PrivatePg | null = storageFaults.length > 0 ? await startPrivatePg() : null;
  const baseStore = pgServer ? pgServer.url() : options.store;
  // The disk-full fault: the journal's tables on a small tmpfs (the tablespace is the database's
  // default before the journal is migrated below). 256 MiB holds a long record's journal.
  const smallDisk: SmallTablespace | null =
    pgServer && storageFaults.includes("disk-full")
      ? await mountSmallTablespace(baseStore, 256).catch(async (error: unknown) => {
          await pgServer.stop();
          throw error;
        })
      : null;
  const url = new URL(baseStore);
  url.searchParams.set("schema", schema);
  const store = url.toString();
  const proxies: TcpProxy[] = [];
  if (pgServer)
    for (let slot = 0; slot < options.workers; slot++)
      proxies.push(await startTcpProxy({ host: "127.0.0.1", port: pgServer.port }));
  /** The store a worker of `slot` opens: through its proxy when storage faults are played. */
  const storeOf = (slot: number) => proxies[slot]?.via(store) ?? store;
  // Opening the journal here first creates the schema, so the workers start on a migrated one.
  const journal = steadily(await openStore(store));
  const adminPool = new pg.Pool({
    connectionString: baseStore,
    options: `-c search_path=${schema}`,
    max: 2,
  });
  // An idle connection the server ended (a restart) is dropped by the pool, not thrown.
  adminPool.on("error", () => {});
  const admin = steadily(adminPool);
  const dir = mkdtempSync(join(tmpdir(), "holdfast-workers-"));
  for (const sub of ["witness", "work", "receipts", "workers"]) mkdirSync(join(dir, sub));
  // The clock fault: every worker's wall clock read through libfaketime from its slot's file.
  const clocks: SteppedClocks | null = storageFaults.includes("clock")
    ? steppedClocks(join(dir, "clock"), options.workers)
    : null;
  const server = await startWitnessServer();
  const { allowlist } = makeTortureDefinitions({ dir, server: server.url });
  const allowlistFile = join(dir, "allowlist.json");
  writeFileSync(allowlistFile, `${JSON.stringify(allowlist, null, 2)}\n`);
  const errors: string[] = [];
  const passFailures = new Map<string, number>();
  const refusals: string[] = [];

  /** Claims a worker still holds on active runs. */
  const claimsOf = async (workerId: string): Promise<number> =>
    Number(
      (
        await admin.query<{ n: string }>(
          "SELECT count(*) AS n FROM claims c JOIN run_guard g ON g.run_id = c.run_id AND g.active = 1 WHERE c.worker_id = $1",
          [workerId],
        )
      ).rows[0]?.n,
    );
  // Each chat's lines: its run's input, then (the queue kind) three inputs queued behind it. One
  // chat's lines always go to one worker together, in order: the worker submits them in that order.
  const lineInputId = (i: number, q: string | null) => (q === null ? `input-${i}` : `input-${i}-${q}`);
  const chats = Array.from({ length: options.runs }, (_, i) => [
    { chatId: `chat-${i}`, inputId: lineInputId(i, null), agent: "torture", content: { label: `r${i}` } },
    ...(queueKind
      ? QUEUED_INPUTS.map((q) => ({
          chatId: `chat-${i}`,
          inputId: lineInputId(i, q),
          agent: QUEUED_AGENT,
          content: { label: `r${i}-${q}` },
          whenBusy: "queue" as const,
        }))
      : []),
  ]);
  const linesPerChat = chats[0]?.length ?? 1;
  /** Input ids a worker reported admitted or queued. */
  const accepted = new Set<string>();
  const chatOf = (inputId: string): number => Number(/^input-(\d+)/.exec(inputId)?.[1]);
  const admitted = new Map<number, string>();
  const queue: number[] = [];
  const processes: WorkerProcess[] = [];
  const slots: Array<WorkerProcess | null> = Array.from({ length: options.workers }, () => null);
  const generations = new Map<number, number>();
  /** Every worker id ever killed, with when it died and how a peer can tell. */
  const victims = new Map<string, { diedAt: number; identity: Identity }>();
  let stopping = false;

  /** Workers killed at a wake-up crash point (their own SIGKILL), apart from the waves' kills. */
  let crashPointKills = 0;
  const crashPointsFired: Record<string, number> = {};
  const spawnWorker = (slot: number, crashAt: string | null = null): WorkerProcess => {
    const generation = (generations.get(slot) ?? 0) + 1;
    generations.set(slot, generation);
    // The first generation is local; restarts pick at random.
    const identity: Identity = generation === 1 ? "local" : rng() < 0.5 ? "local" : "remote";
    const workerId = identity === "remote" ? `torture-remote-w${slot}-g${generation}` : null;
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        CLI,
        "worker",
        "--store",
        storeOf(slot),
        "--module",
        MODULE,
        "--allowlist",
        allowlistFile,
        "--lease-ms",
        String(options.leaseMs),
        "--stdin",
        "--json",
        ...(workerId ? ["--worker-id", workerId] : []),
      ],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          TORTURE_DIR: dir,
          TORTURE_SERVER: server.url,
          TORTURE_FAULTS: faultKinds.join(","),
          HOLDFAST_STORE: "",
          HOLDFAST_WORKER_ID: "",
          HOLDFAST_CRASH_AT: crashAt ?? "",
          HOLDFAST_CRASH_SKIP: crashAt === null ? "" : String(Math.floor(rng() * 4)),
          // After a few effects, then every 40th: stopped right after a lease check, before the effect.
          HOLDFAST_PAUSE_AT: "after-lease-check",
          HOLDFAST_PAUSE_SKIP: String(Math.floor(rng() * 4)),
          HOLDFAST_PAUSE_EVERY: "40",
          ...(clocks?.env(slot) ?? {}),
        },
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    const worker: WorkerProcess = {
      slot,
      generation,
      identity,
      child,
      workerId,
      started: false,
      startedAt: null,
      endedAt: null,
      stoppedAt: null,
      exited: false,
      killedAt: null,
      pausedAt: null,
      stderr: "",
      pending: new Set(),
      crashAt,
      exit: new Promise((resolve) => child.on("close", (code, signal) => resolve({ code, signal }))),
    };
    let buffer = "";
    // Each worker's output, kept in the trial folder (--keep) for whoever chases a problem.
    const logFile = join(dir, "workers", `w${slot}-g${generation}.log`);
    child.stdout.on("data", (chunk) => {
      appendFileSync(logFile, chunk);
      buffer += chunk;
      for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith("{")) continue;
        const report = JSON.parse(line) as Record<string, unknown>;
        switch (report.kind) {
          case "started":
            worker.workerId = String(report.workerId);
            worker.started = true;
            worker.startedAt = Date.now();
            break;
          case "admitted":
          case "queued": {
            const inputId = String(report.inputId);
            const i = chatOf(inputId);
            accepted.add(inputId);
            if (report.kind === "admitted" && inputId === lineInputId(i, null))
              admitted.set(i, String(report.runId));
            if (chats[i]?.every((l) => accepted.has(l.inputId))) worker.pending.delete(i);
            break;
          }
          case "refused": {
            refusals.push(`${worker.workerId}: ${String(report.reason)}`);
            const i = Number(/"inputId":"input-(\d+)/.exec(String(report.line))?.[1]);
            if (Number.isInteger(i) && worker.pending.delete(i)) queue.push(i);
            break;
          }
          case "pass-failed": {
            const reason = String(report.reason);
            passFailures.set(reason, (passFailures.get(reason) ?? 0) + 1);
            break;
          }
        }
      }
    });
    child.stderr.on("data", (chunk) => {
      appendFileSync(logFile, chunk);
      worker.stderr = (worker.stderr + chunk).slice(-4000);
    });
    child.stdin.on("error", () => {});
    void worker.exit.then(({ code, signal }) => {
      worker.exited = true;
      worker.endedAt = Date.now();
      // Whatever it had not admitted goes to another worker (admission is idempotent anyway).
      for (const i of worker.pending) if (!chats[i]!.every((l) => accepted.has(l.inputId))) queue.push(i);
      worker.pending.clear();
      // Killed at its wake-up crash point: a kill like the waves', then a restart without one.
      if (worker.killedAt === null && !stopping && worker.crashAt !== null && signal === "SIGKILL") {
        worker.killedAt = Date.now();
        crashPointKills++;
        crashPointsFired[worker.crashAt] = (crashPointsFired[worker.crashAt] ?? 0) + 1;
        if (worker.workerId !== null)
          victims.set(worker.workerId, { diedAt: worker.killedAt, identity: worker.identity });
        if (slots[slot] === worker) slots[slot] = spawnWorker(slot);
        return;
      }
      if (worker.killedAt === null && !stopping) {
        errors.push(
          `worker ${worker.workerId ?? `slot ${slot}`} exited by itself (code ${code}, signal ${signal}): ${worker.stderr.trim().split("\n").slice(-3).join(" | ")}`,
        );
        if (slots[slot] === worker) slots[slot] = spawnWorker(slot);
      }
    });
    processes.push(worker);
    slots[slot] = worker;
    return worker;
  };

  // However this process ends, no worker outlives it.
  const killAll = () => {
    for (const w of processes) if (!w.exited) w.child.kill("SIGKILL");
  };
  const interrupted = () => {
    killAll();
    // The private server of the faults below holdfast goes too.
    pgServer?.stopNow();
    smallDisk?.unmount();
    process.exit(130);
  };
  process.on("exit", killAll);
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);

  for (let slot = 0; slot < options.workers; slot++) spawnWorker(slot);

  /** Runs (top-level and children) by status, from the runs projection. */
  const statuses = async () => {
    const rows = await journal.projectionRows<RunRow>("runs");
    const top = rows.filter((r) => !r.chatId.startsWith("child:"));
    const settled = (r: RunRow) =>
      r.status !== "running" && r.status !== "interrupted" && r.status !== "waiting";
    return {
      rows,
      open: top.filter((r) => !settled(r)).length,
      unsettledAll: rows.filter((r) => !settled(r)).length,
    };
  };

  const send = (i: number) => {
    const live = slots.filter((w): w is WorkerProcess => w !== null && !w.exited && w.killedAt === null);
    const ready = live.filter((w) => w.started);
    const to = pick(ready.length > 0 ? ready : live);
    if (chats[i]!.every((l) => accepted.has(l.inputId))) return;
    to.pending.add(i);
    // The chat's lines not yet reported, in order (admission and queueing are idempotent).
    const lines = chats[i]!.filter((l) => !accepted.has(l.inputId));
    if (lines.length === 0) return;
    to.child.stdin.write(lines.map((l) => `${JSON.stringify(l)}\n`).join(""));
  };

  let nextInput = 0;
  const cap = options.workers * 3;
  /** Hand out inputs up to `target`, keeping at most `cap` runs open at once. */
  const feed = async (target: number) => {
    for (;;) {
      while (queue.length > 0) send(queue.shift()!);
      if (nextInput >= target) return;
      const { open } = await statuses();
      const inFlight = open + processes.reduce((n, w) => n + w.pending.size, 0);
      for (let room = cap - inFlight; room > 0 && nextInput < target; room--) send(nextInput++);
      if (nextInput < target) await sleep(250);
    }
  };

  // Pauses: a worker that stopped itself is continued after more than its lease.
  let pauses = 0;
  let lastContinued = 0;
  const pauseTimes: number[] = [];
  /** When each pause began and ended: a take-over can wait on a peer that was stopped. */
  const pauseSpans: Array<{ workerId: string | null; from: number; to: number }> = [];
  const stateOf = (pid: number | undefined): string | null => {
    if (pid === undefined) return null;
    try {
      // /proc/<pid>/stat: "pid (comm) S …" — the state follows the command name's parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    } catch {
      return null;
    }
  };
  const watchPauses = setInterval(() => {
    for (const w of processes) {
      if (w.exited || w.killedAt !== null || w.pausedAt !== null) continue;
      if (stateOf(w.child.pid) !== "T") continue;
      w.pausedAt = Date.now();
      pauses++;
      const holdFor = options.leaseMs + 500 + Math.floor(rng() * 1500);
      pauseTimes.push(holdFor);
      setTimeout(() => {
        if (!w.exited) w.child.kill("SIGCONT");
        pauseSpans.push({ workerId: w.workerId, from: w.pausedAt ?? Date.now() - holdFor, to: Date.now() });
        w.pausedAt = null;
        lastContinued = Date.now();
      }, holdFor);
    }
  }, 50);

  // Operators: decide held runs per call from the witnesses, with a live worker's id in the environment.
  let operatorDecisions = 0;
  const witnessed = (key: string): boolean =>
    (server.counts.get(key) ?? 0) > 0 ||
    ["send.txt", "shell.txt", "pay.txt"].some((file) => {
      try {
        return readFileSync(join(dir, "witness", file), "utf8")
          .split("\n")
          .some((l) => l.endsWith(` ${key}`));
      } catch {
        return false;
      }
    });
  const decideHeld = async (most: number) => {
    // Evidence is complete only when no worker is stopped or just woke up mid-effect.
    while (processes.some((w) => w.pausedAt !== null) || Date.now() - lastContinued < 2_000) await sleep(100);
    const live = slots.filter(
      (w): w is WorkerProcess => w?.started === true && !w.exited && w.killedAt === null,
    );
    if (live.length === 0) return;
    // Not the runs a cancel or a pause was aimed at: their checks expect them held as they are
    // (cancelled-in-doubt), or resumed by the harness only.
    const held = (await journal.projectionRows<RunRow>("runs")).filter(
      (r) => r.status === "held" && !r.needsAttention && !targeted.has(r.runId),
    );
    for (const run of held.slice(0, most)) {
      const events = await journal.readStream(`run-${run.runId}`);
      const intents = new Map<string, { attempt: number; key: string; child: boolean }>();
      const closed = new Set<string>();
      for (const { event } of events) {
        if (event.type === "call.intended")
          intents.set(event.callId, {
            attempt: event.attempt,
            key: event.idempotencyKey,
            child: event.kind === "child",
          });
        if (
          event.type === "call.completed" ||
          event.type === "call.failed" ||
          event.type === "call.reconciled"
        )
          closed.add(`${event.callId}#${event.attempt}`);
      }
      const inDoubt = [...intents].filter(([callId, i]) => !closed.has(`${callId}#${i.attempt}`));
      const args = [
        "decide",
        run.runId,
        "--based-on",
        String(events.length),
        "--by",
        "torture-operator",
        "--json",
      ];
      if (inDoubt.length === 0) args.push("resume");
      for (const [callId, { key, child }] of inDoubt) {
        const seen = witnessed(key);
        // No witness sees a child call's key, and holdfast refuses "it did not happen" for a child
        // whose run exists: the operator runs a fresh child on purpose instead.
        const notSeen = child ? "new-attempt" : "confirmed-not-completed";
        args.push("--call", callId, seen ? "confirmed-completed" : notSeen);
        args.push("--call-note", callId, seen ? `the witness saw ${key}` : `no witness saw ${key}`);
      }
      const worker = pick(live);
      // Not spawnSync: the witness server lives in this process, and a blocked event loop would
      // leave the workers' HTTP calls unanswered until they time out (in doubt, held).
      const decided = await runCli([...args, "--db", store], {
        HOLDFAST_STORE: "",
        HOLDFAST_WORKER_ID: worker.workerId ?? "",
      });
      if (decided.status === 0) operatorDecisions++;
      // A decision refused because the run moved first is what an operator sees too: show, decide again.
      else if (!/nothing was written/.test(decided.stderr))
        errors.push(`holdfast decide ${run.runId} failed (${decided.status}): ${decided.stderr.trim()}`);
    }
  };

  // The cancel and pause kinds: an operator's runtime in this process (the torture's tools for
  // their reconcilers, no agent), so a request lands while the call it aims at is still in flight;
  // a resume goes through `holdfast resume` (its moment does not matter).
  let operator: Runtime | null = null;
  const operatorRuntime = async (): Promise<Runtime> => {
    if (operator === null) {
      const { tools } = makeTortureDefinitions({ dir, server: server.url, kinds: faultKinds });
      operator = await openRuntime({
        store,
        agents: [],
        tools,
        allowlist: allowlistFile,
        workerId: "torture-operator",
        recovery: { onOpen: false, leaseMs: options.leaseMs },
      });
    }
    return operator;
  };
  /** Runs a cancel or a pause was aimed at (each run at most once). */
  const targeted = new Set<string>();
  /** A top-level run of the torture agent with a call in flight now (an intent without its outcome). */
  const runInFlight = async (waitMs: number): Promise<string | null> => {
    const until = Date.now() + waitMs;
    do {
      const running = (await journal.projectionRows<RunRow>("runs")).filter(
        (r) => r.status === "running" && !r.chatId.startsWith("child:") && !targeted.has(r.runId),
      );
      for (const run of running.sort(() => rng() - 0.5).slice(0, 8)) {
        const open = new Set<string>();
        const events = await journal.readStream(`run-${run.runId}`);
        const first = events[0]?.event;
        if (first?.type !== "run.admitted" || first.agent.name !== "torture") continue;
        for (const { event } of events) {
          if (event.type === "call.intended") open.add(`${event.callId}#${event.attempt}`);
          if (
            event.type === "call.completed" ||
            event.type === "call.failed" ||
            event.type === "call.reconciled"
          )
            open.delete(`${event.callId}#${event.attempt}`);
        }
        if (open.size > 0) return run.runId;
      }
      await sleep(20);
    } while (Date.now() < until);
    return null;
  };
  /** The live worker process that owns a run now, from the claims. */
  const ownerOf = async (runId: string): Promise<WorkerProcess | null> => {
    const row = (
      await admin.query<{ worker_id: string | null }>("SELECT worker_id FROM claims WHERE run_id = $1", [
        runId,
      ])
    ).rows[0];
    if (!row?.worker_id) return null;
    return (
      slots.find((w) => w !== null && w.workerId === row.worker_id && !w.exited && w.killedAt === null) ??
      null
    );
  };
  const cancels: CancelAsked[] = [];
  /** Cancels that found no call in flight within their wait (none asked then). */
  let cancelsWithoutTarget = 0;
  interface Paused {
    readonly runId: string;
    /** Kills (any worker) so far when it was asked. */
    readonly killsAt: number;
    /** Waves to wait once seen paused before the resume. */
    readonly waves: number;
    seenPaused: boolean;
    checks: number;
    resumed: boolean;
  }
  const paused: Paused[] = [];
  const pauseSeen = { stillPaused: 0, notPaused: [] as string[], killsWhilePaused: 0 };
  let pausesAsked = 0;
  let pausesWithoutTarget = 0;
  let pauseOwnerKills = 0;
  let pausesEndedFirst = 0;
  let resumeFailures = 0;
  const resumeNow = async (p: Paused) => {
    const resumed = await runCli(["resume", p.runId, "--by", HARNESS_BY, "--db", store, "--json"], {
      HOLDFAST_STORE: "",
      HOLDFAST_WORKER_ID: "",
    });
    if (resumed.status === 0) p.resumed = true;
    else {
      resumeFailures++;
      errors.push(`holdfast resume ${p.runId} failed (${resumed.status}): ${resumed.stderr.trim()}`);
      p.resumed = true;
    }
  };
  /**
   * The pause kind, each wave: a paused run must still be paused after the kills and restarts since;
   * after one to three waves the harness resumes it. A run not paused yet (its owner has not
   * carried the request out) is looked at again next wave; one that ended first is left.
   */
  const lookAtPaused = async (kills: number, final: boolean) => {
    const rows = new Map((await journal.projectionRows<RunRow>("runs")).map((r) => [r.runId, r]));
    for (const p of paused) {
      if (p.resumed) continue;
      const status = rows.get(p.runId)?.status ?? "unknown";
      if (!p.seenPaused) {
        if (status === "paused") p.seenPaused = true;
        else if (status !== "running" && status !== "interrupted") {
          pausesEndedFirst++;
          p.resumed = true;
          continue;
        } else if (!final) continue;
        else {
          // The end: wait for the request to be carried out (a take-over may come first).
          const until = Date.now() + options.leaseMs + 10_000;
          while (Date.now() < until) {
            const now = (await journal.projectionRows<RunRow>("runs")).find((r) => r.runId === p.runId);
            if (now?.status === "paused") break;
            await sleep(200);
          }
          p.seenPaused = true;
        }
      } else {
        p.checks++;
        if (status === "paused") pauseSeen.stillPaused++;
        else pauseSeen.notPaused.push(`${status} (run ${p.runId})`);
      }
      if (final || p.checks >= p.waves) {
        pauseSeen.killsWhilePaused += kills - p.killsAt;
        await resumeNow(p);
      }
    }
  };

  // The signal kind: what the harness does for each run, by its chat number — send its signal
  // before the wait (and again with the same id), once parked (again: twice), never (it times
  // out), or leave it to a wave, which sends it once parked and kills a worker right after.
  const signals: SignalSent[] = [];
  const SIGNAL_MODES = ["parked", "before", "parked-again", "none", "wave"] as const;
  const signalled = new Set<string>();
  const signalIdOf = (runId: string) => `${runId}-go`;
  const sendSignal = async (runId: string, moment: SignalSent["moment"], id = signalIdOf(runId)) => {
    const op = await operatorRuntime();
    const out = await op.signal(runId, SIGNAL_NAME, { run: runId }, { signalId: id, by: HARNESS_BY });
    signals.push({
      runId,
      signalId: id,
      name: SIGNAL_NAME,
      moment,
      accepted: out.accepted,
      ...(out.accepted ? { recorded: out.recorded } : { reason: out.reason }),
    });
  };
  /** One look over the runs: signals each as its mode says, once. */
  const signalPass = async (): Promise<void> => {
    const rows = await journal.projectionRows<RunRow>("runs");
    for (const row of rows) {
      if (row.chatId.startsWith("child:") || signalled.has(row.runId) || !row.agent.startsWith("torture@"))
        continue;
      const mode = SIGNAL_MODES[Number(/^chat-(\d+)$/.exec(row.chatId)?.[1] ?? 0) % SIGNAL_MODES.length]!;
      if (mode === "none" || mode === "wave") continue;
      const parkedNow = row.status === "waiting" && row.waiting?.wait === "signal";
      if (mode === "before" && row.status === "running") {
        signalled.add(row.runId);
        await sendSignal(row.runId, "before");
        await sendSignal(row.runId, "again");
      } else if (mode !== "before" && parkedNow) {
        signalled.add(row.runId);
        await sendSignal(row.runId, "parked");
        if (mode === "parked-again") await sendSignal(row.runId, "again");
      }
    }
  };
  // The approval kind: the operator's runtime decides each run's awaiting call, by its chat number
  // (approve, approve with an edited amount, deny), once the run waits for it; the waves kill
  // the workers that own parked runs, and restarted workers may carry `after-approval-wake`.
  const APPROVAL_MODES = ["approve", "edit", "deny"] as const;
  const approvalsDecided = new Set<string>();
  let approvalsRefused = 0;
  const approvalPass = async (): Promise<void> => {
    const rows = await journal.projectionRows<RunRow>("runs");
    for (const row of rows) {
      if (
        row.chatId.startsWith("child:") ||
        approvalsDecided.has(row.runId) ||
        !row.agent.startsWith("torture@")
      )
        continue;
      if (!(row.status === "waiting" && row.waiting?.wait === "approval")) continue;
      const mode = APPROVAL_MODES[Number(/^chat-(\d+)$/.exec(row.chatId)?.[1] ?? 0) % APPROVAL_MODES.length]!;
      const op = await operatorRuntime();
      const stream = await op.events(row.runId);
      const basedOnVersion = stream.at(-1)!.version;
      const intent = [...stream]
        .reverse()
        .find((e) => e.event.type === "call.intended" && e.event.approval !== undefined)?.event;
      if (intent?.type !== "call.intended") continue;
      const by = { by: HARNESS_BY, basedOnVersion };
      try {
        if (mode === "deny") await op.deny(row.runId, intent.callId, { ...by, note: "torture: denied" });
        else
          await op.approve(row.runId, intent.callId, {
            ...by,
            ...(mode === "edit"
              ? { args: { ...(intent.args as object), amount: 42 }, note: "torture: edited" }
              : {}),
          });
        approvalsDecided.add(row.runId);
      } catch {
        // A stale version (the run moved on): the next pass decides it if it still waits.
        approvalsRefused++;
      }
    }
  };
  let approving = false;
  const approver = approvalKind
    ? setInterval(() => {
        if (approving) return;
        approving = true;
        void approvalPass()
          .catch((error: unknown) => errors.push(`approving: ${(error as Error).message}`))
          .finally(() => {
            approving = false;
          });
      }, 200)
    : undefined;
  let signalling = false;
  let killedAfterSignalCommit = 0;
  const signaller = signalKind
    ? setInterval(() => {
        if (signalling) return;
        signalling = true;
        void signalPass()
          .catch((error: unknown) => errors.push(`signalling: ${(error as Error).message}`))
          .finally(() => {
            signalling = false;
          });
      }, 200)
    : undefined;

  // The schedule kind: declared once (as an application would at every start: the same again changes nothing).
  if (scheduleKind) {
    const op = await operatorRuntime();
    for (const spec of tortureScheduleSpecs()) await op.schedules.upsert(spec);
  }

  // The faults below holdfast (decision 0080), played after each wave's kill and restart.
  const faultCounts: Record<PgFaultKind, number> = {
    "pg-restart": 0,
    partition: 0,
    "commit-lost": 0,
    clock: 0,
    "disk-full": 0,
  };
  const faultDetail = {
    restarts: { fast: 0, sigkill: 0 },
    partitions: { blackhole: 0, refuse: 0, shorterThanLease: 0, longerThanLease: 0 },
    commitCuts: {
      "call.intended after": 0,
      "call.intended before": 0,
      "call.completed after": 0,
      "call.completed before": 0,
    } as Record<string, number>,
    /** Cuts asked for that no append of that kind reached within their wait (not counted), and those armed again. */
    cutsNotReached: 0,
    cutsNotReachedFirst: 0,
    clockSteps: {
      forward: 0,
      back: 0,
      shorterThanLease: 0,
      longerThanLease: 0,
      /** Steps of a worker that owned active runs when it was stepped, and of an idle one (none owned any). */
      onBusyWorker: 0,
      onIdleWorker: 0,
      /** Runs taken over, during a step or a lease after it, from the stepped worker or by it. */
      takeOversOfStepped: 0,
      takeOversByStepped: 0,
    },
    diskFull: {
      /** Fills whose probe insert was refused with 53100 (the fault bit), and those it was not. */
      probeRefused: 0,
      probeNotRefused: 0,
      ballastMib: { min: null as number | null, max: null as number | null },
      heldMs: { min: null as number | null, max: null as number | null },
      /** Lines of the workers' output naming the refusal (53100, "disk is full"). */
      refusalsInWorkerLogs: 0,
    },
  };
  const widen = (range: { min: number | null; max: number | null }, value: number) => {
    range.min = range.min === null ? value : Math.min(range.min, value);
    range.max = range.max === null ? value : Math.max(range.max, value);
  };
  /** Each clock step: whose, by how much (ms), and from when until it was set right (harness time). */
  const clockSpans: Array<{ workerId: string; offsetMs: number; from: number; to: number }> = [];
  /** A worker slot's clock step: set right when this resolves. */
  const stepping = new Map<number, Promise<void>>();
  /** When the storage was away for some worker (a restart: all of them; a partition: one). */
  const faultSpans: Array<{ from: number; to: number; workerId?: string | null }> = [];
  /** A worker slot's partition: healed when this resolves. */
  const partitioned = new Map<number, Promise<void>>();
  const readyWorkers = () =>
    slots.flatMap((w) => (w?.started && !w.exited && w.killedAt === null ? [w] : []));
  const playStorageFaults = async () => {
    if (pgServer === null) return;
    if (clocks !== null && storageFaults.includes("clock")) {
      // First, and waited for: a take-over near a step is then not also near another fault, and
      // the check below can tell what a step did.
      const candidates = readyWorkers().filter((w) => !partitioned.has(w.slot) && !stepping.has(w.slot));
      if (candidates.length > 0) {
        // A worker that owns runs right now, if there is one: an idle worker's step tests little.
        const busy: WorkerProcess[] = [];
        for (const w of candidates) if ((await claimsOf(w.workerId!)) > 0) busy.push(w);
        const w = pick(busy.length > 0 ? busy : candidates);
        faultDetail.clockSteps[busy.length > 0 ? "onBusyWorker" : "onIdleWorker"]++;
        const forward = rng() < 0.5;
        const seconds = (forward ? 1 : -1) * (3_300 + Math.floor(rng() * 600));
        const longer = rng() < 0.5;
        const ms = Math.round(options.leaseMs * (longer ? 1.1 + rng() * 0.5 : 0.4 + rng() * 0.5));
        const from = Date.now();
        clocks.step(w.slot, seconds);
        faultCounts.clock++;
        faultDetail.clockSteps[forward ? "forward" : "back"]++;
        faultDetail.clockSteps[longer ? "longerThanLease" : "shorterThanLease"]++;
        const workerId = w.workerId!;
        const done = sleep(ms).then(() => {
          clocks.step(w.slot, 0);
          clockSpans.push({ workerId, offsetMs: seconds * 1000, from, to: Date.now() });
          stepping.delete(w.slot);
        });
        stepping.set(w.slot, done);
        log(
          `clock ${faultCounts.clock}: ${workerId} stepped ${seconds > 0 ? "+" : ""}${seconds} s for ${ms} ms`,
        );
        await done;
      }
    }
    if (storageFaults.includes("pg-restart")) {
      // Not while a worker starts up: a worker that cannot reach its store at its start exits.
      const until = Date.now() + 60_000;
      while (slots.some((w) => w && !w.exited && !w.started) && Date.now() < until) await sleep(50);
      const from = Date.now();
      const fast = rng() < 0.5;
      if (fast) await pgServer.restartFast();
      else await pgServer.killAndStart();
      faultSpans.push({ from, to: Date.now() });
      faultCounts["pg-restart"]++;
      faultDetail.restarts[fast ? "fast" : "sigkill"]++;
      log(`pg-restart ${faultCounts["pg-restart"]}: ${fast ? "fast" : "SIGKILL"} in ${Date.now() - from} ms`);
    }
    if (storageFaults.includes("partition")) {
      const candidates = readyWorkers().filter((w) => !partitioned.has(w.slot));
      if (candidates.length > 0) {
        const w = pick(candidates);
        const proxy = proxies[w.slot]!;
        const longer = rng() < 0.5;
        const ms = Math.round(options.leaseMs * (longer ? 1.3 + rng() * 0.7 : 0.3 + rng() * 0.5));
        const how = rng() < 0.7 ? "blackhole" : "refuse";
        const from = Date.now();
        if (how === "blackhole") proxy.blackhole();
        else proxy.refuse();
        faultCounts.partition++;
        faultDetail.partitions[how]++;
        faultDetail.partitions[longer ? "longerThanLease" : "shorterThanLease"]++;
        partitioned.set(
          w.slot,
          sleep(ms).then(() => {
            proxy.heal();
            faultSpans.push({ from, to: Date.now(), workerId: w.workerId });
            partitioned.delete(w.slot);
          }),
        );
        log(`partition ${faultCounts.partition}: ${w.workerId} ${how} for ${ms} ms`);
      }
    }
    if (storageFaults.includes("commit-lost")) {
      // Armed on every reachable worker's proxy: the first append of that kind to reach its COMMIT
      // is cut, the others are disarmed.
      const candidates = readyWorkers().filter((w) => !partitioned.has(w.slot));
      if (candidates.length > 0) {
        const marker = rng() < 0.5 ? "call.intended" : "call.completed";
        const mode = rng() < 0.5 ? "after" : "before";
        // Twice 8 s at most: a cut not reached the first time (no append of that kind) is armed once more.
        let fired: WorkerProcess | null = null;
        for (let attempt = 0; attempt < 2 && fired === null; attempt++) {
          const armed = attempt === 0 ? candidates : readyWorkers().filter((w) => !partitioned.has(w.slot));
          fired = await Promise.race([
            ...armed.map((w) => proxies[w.slot]!.cutAtCommit(marker, mode).then(() => w)),
            sleep(8_000).then(() => null),
          ]);
          for (const w of armed) proxies[w.slot]!.disarm();
          if (fired === null && attempt === 0) faultDetail.cutsNotReachedFirst++;
        }
        if (fired) {
          faultCounts["commit-lost"]++;
          faultDetail.commitCuts[`${marker} ${mode}`] =
            (faultDetail.commitCuts[`${marker} ${mode}`] ?? 0) + 1;
          faultSpans.push({ from: Date.now(), to: Date.now(), workerId: fired.workerId });
          log(
            `commit-lost ${faultCounts["commit-lost"]}: ${fired.workerId} ${marker} cut ${mode} its COMMIT`,
          );
        } else faultDetail.cutsNotReached++;
      }
    }
    if (smallDisk !== null && storageFaults.includes("disk-full")) {
      const from = Date.now();
      const { bytes, refused } = await smallDisk.fill();
      const ms = 1_500 + Math.floor(rng() * 2_500);
      await sleep(ms);
      await smallDisk.free();
      faultSpans.push({ from, to: Date.now() });
      faultCounts["disk-full"]++;
      faultDetail.diskFull[refused ? "probeRefused" : "probeNotRefused"]++;
      widen(faultDetail.diskFull.ballastMib, Math.round(bytes / (1 << 20)));
      widen(faultDetail.diskFull.heldMs, Date.now() - from);
      log(
        `disk-full ${faultCounts["disk-full"]}: ${Math.round(bytes / (1 << 20))} MiB of ballast for ${Date.now() - from} ms (probe ${refused ? "refused" : "not refused"})`,
      );
    }
  };

  const snapshots: Outcomes[] = [];
  let kills = 0;
  /** The waves stopped by `maxWavesMs` before all the kills asked for. */
  let wavesStoppedAfter: number | null = null;
  for (let k = 0; k < options.kills; k++) {
    if (options.maxWavesMs !== undefined && Date.now() - started >= options.maxWavesMs) {
      wavesStoppedAfter = k;
      log(`--max-seconds reached after ${k} waves: the runs settle now`);
      break;
    }
    if (k % 5 === 4) await decideHeld(3);
    await feed(Math.round(((k + 1) * options.runs) / (options.kills + 1)));
    if (pauseKind) await lookAtPaused(kills, false);
    await sleep(100 + Math.floor(rng() * 900));
    // The schedule kind: every other wave kills within half a second after a tick's time (the
    // schedules tick on whole seconds), when a worker's tick pass admits and records it.
    if (scheduleKind && k % 2 === 0) await sleep(1_000 - (Date.now() % 1_000) + Math.floor(rng() * 500));
    // Never the last worker standing: a live peer must be there to take the victim's runs over
    // (restarted workers take a few seconds to start).
    const ready = () => slots.flatMap((w) => (w?.started && !w.exited ? [w] : []));
    const waitUntil = Date.now() + 120_000;
    while (ready().length < Math.min(2, options.workers) && Date.now() < waitUntil) await sleep(50);
    if (ready().length === 0) {
      errors.push("no worker started within 120 s");
      break;
    }
    // The cancel and pause kinds take turns over the waves; a cancel's kill moment cycles through
    // just before the request, just after it committed, and none. The owner killed is the wave's kill.
    let victim: WorkerProcess | null = null;
    const killNow = (w: WorkerProcess) => {
      w.killedAt = Date.now();
      w.child.kill("SIGKILL");
    };
    const control = controlKinds.length > 0 ? controlKinds[k % controlKinds.length] : undefined;
    if (control === "cancel") {
      const mode = (["after", "before", "none"] as const)[Math.floor(k / controlKinds.length) % 3]!;
      const runId = await runInFlight(3_000);
      if (runId === null) cancelsWithoutTarget++;
      else {
        targeted.add(runId);
        const op = await operatorRuntime();
        const owner = mode === "none" ? null : await ownerOf(runId);
        const kill = owner === null ? "none" : mode;
        if (owner !== null && kill === "before") {
          killNow(owner);
          await owner.exit;
        }
        const out = await op.cancel(runId, { by: HARNESS_BY, note: "torture" });
        cancels.push({ runId, kill, accepted: out.accepted, status: out.status });
        if (owner !== null && kill === "after") killNow(owner);
        victim = owner;
      }
    } else if (control === "pause") {
      const runId = await runInFlight(3_000);
      if (runId === null) pausesWithoutTarget++;
      else {
        targeted.add(runId);
        const op = await operatorRuntime();
        const owner = rng() < 0.4 ? await ownerOf(runId) : null;
        const out = await op.pause(runId, { by: HARNESS_BY, note: "torture" });
        pausesAsked++;
        if (owner !== null) {
          killNow(owner);
          pauseOwnerKills++;
          victim = owner;
        }
        if (out.accepted)
          paused.push({
            runId,
            killsAt: kills,
            waves: 1 + Math.floor(rng() * 2),
            seenPaused: false,
            checks: 0,
            resumed: false,
          });
      }
    }
    // The signal kind, every other wave: a parked run's signal, and a worker killed right after its
    // commit, before the next wake pass of any worker (the wave's kill).
    if (victim === null && signalKind && k % 2 === 0) {
      const until = Date.now() + 3_000;
      let target: string | null = null;
      while (target === null && Date.now() < until) {
        while (signalling) await sleep(5);
        signalling = true;
        try {
          const rows = await journal.projectionRows<RunRow>("runs");
          target =
            rows.find(
              (r) =>
                !signalled.has(r.runId) &&
                SIGNAL_MODES[Number(/^chat-(\d+)$/.exec(r.chatId)?.[1] ?? 0) % SIGNAL_MODES.length] ===
                  "wave" &&
                r.status === "waiting" &&
                r.waiting?.wait === "signal" &&
                !r.chatId.startsWith("child:"),
            )?.runId ?? null;
          if (target !== null) {
            signalled.add(target);
            await sendSignal(target, "parked");
            const candidates = ready();
            victim = pick(candidates);
            killNow(victim);
            killedAfterSignalCommit++;
          }
        } finally {
          signalling = false;
        }
        if (target === null) await sleep(50);
      }
    }
    if (victim === null) {
      // A worker that owns runs right now, if there is one: killing an idle worker tests little.
      const candidates = ready();
      const busy: WorkerProcess[] = [];
      for (const w of candidates) if ((await claimsOf(w.workerId!)) > 0) busy.push(w);
      victim = pick(busy.length > 0 ? busy : candidates);
      killNow(victim);
    }
    kills++;
    victims.set(victim.workerId!, { diedAt: victim.killedAt!, identity: victim.identity });
    await victim.exit;
    // The restart waits until the live workers have taken the victim's runs over (or the bound
    // has passed): on this one machine a starting worker would take their CPU, while in a real
    // deployment it starts on its own host.
    const restartBy = victim.killedAt! + options.leaseMs + 2_000;
    while (Date.now() < restartBy && (await claimsOf(victim.workerId!)) > 0) await sleep(100);
    // The wait kinds: a third of the restarts carry a wake-up or tick crash point (one such worker at a time).
    const crashAt =
      restartPoints.length > 0 &&
      rng() < (scheduleKind ? 0.6 : 0.34) &&
      !slots.some((w) => w && !w.exited && w.crashAt !== null)
        ? pick(restartPoints)
        : null;
    // A slot's proxy still partitioned heals first: a worker that cannot reach its store at its start exits.
    await partitioned.get(victim.slot);
    // So is a slot's stepped clock: a worker starts on the right time.
    await stepping.get(victim.slot);
    spawnWorker(victim.slot, crashAt);
    log(
      `kill ${kills}/${options.kills}: ${victim.workerId} (${victim.identity}); inputs handed out ${nextInput}/${options.runs}, admitted ${admitted.size}`,
    );
    snapshots.push(await outcomesNow(journal));
    await playStorageFaults();
  }
  // Every partition heals, every clock is set right and no cut stays armed before the runs settle.
  await Promise.all([...partitioned.values(), ...stepping.values()]);
  for (const proxy of proxies) proxy.disarm();
  await feed(options.runs);
  await decideHeld(10);
  // The schedule kind: no tick after the waves; the ticks' runs and queues settle below. Before the
  // pause, the tick passes catch up to now: on a loaded machine they run seconds late, and a pause
  // that cut one off would leave its ticks with no record (while the same lag mid-run is a record
  // that passes them over). Every tick up to the wind-down is owed; the ones after it are not.
  let scheduleWindDown: { readonly at: number; readonly caughtUpMs: number | null } | undefined;
  if (scheduleKind) {
    const op = await operatorRuntime();
    const at = Date.now();
    const caughtUp = async () => {
      for (const { id } of TORTURE_SCHEDULES) {
        const next = (await op.schedules.get(id))?.nextDueAt;
        if (next !== null && next !== undefined && Date.parse(next) <= at) return false;
      }
      return true;
    };
    const until = at + TICKS_CATCH_UP_MS;
    let caught = await caughtUp();
    while (!caught && Date.now() < until) {
      await sleep(100);
      caught = await caughtUp();
    }
    // Not caught up within the bound: the ticks no pass covered are reported lost by the check.
    scheduleWindDown = { at, caughtUpMs: caught ? Date.now() - at : null };
    for (const { id } of TORTURE_SCHEDULES) await op.schedules.pause(id, { by: HARNESS_BY });
  }
  /** The schedule kind: queued ticks still waiting behind a run that is not held. */
  const schedulesQueued = async (): Promise<boolean> => {
    if (!scheduleKind) return false;
    const op = await operatorRuntime();
    for (const { id } of TORTURE_SCHEDULES) {
      const q = await op.queue(`schedule-${id}`);
      if (q.items.length > 0 && q.waitingFor?.status !== "held") return true;
    }
    return false;
  };
  if (pauseKind) await lookAtPaused(kills, true);

  /** The queue kind: a held run keeps its chat's queued inputs waiting; the harness stops it (0043). */
  let stoppedForQueue = 0;
  const stopHeldBeforeQueued = async (rows: ReadonlyArray<RunRow>) => {
    const perChat = new Map<string, number>();
    for (const r of rows) perChat.set(r.chatId, (perChat.get(r.chatId) ?? 0) + 1);
    const op = await operatorRuntime();
    for (let i = 0; i < options.runs; i++) {
      const chatId = `chat-${i}`;
      if ((perChat.get(chatId) ?? 0) >= linesPerChat) continue;
      if (!chats[i]!.every((l) => accepted.has(l.inputId))) continue;
      const { items, waitingFor } = await op.queue(chatId);
      if (items.length === 0 || waitingFor === null || waitingFor.status !== "held") continue;
      await op.cancel(waitingFor.runId, { by: HARNESS_BY, note: "its chat's queued inputs wait" });
      stoppedForQueue++;
    }
  };

  // Until every input is admitted and every run (children too) is completed or held.
  const deadline = Date.now() + (options.timeoutMs ?? Math.max(120_000, options.runs * 3_000));
  let last = await statuses();
  while (Date.now() < deadline) {
    while (queue.length > 0) send(queue.shift()!);
    last = await statuses();
    const top = last.rows.filter((r) => !r.chatId.startsWith("child:")).length;
    if (top >= options.runs * linesPerChat && last.unsettledAll === 0 && !(await schedulesQueued())) break;
    if (queueKind && last.unsettledAll === 0) await stopHeldBeforeQueued(last.rows);
    await sleep(250);
  }
  const timedOut = Date.now() >= deadline;
  if (signaller) clearInterval(signaller);
  if (approver) clearInterval(approver);
  while (approving) await sleep(10);
  const schedulesAlive = scheduleKind ? await schedulesQueued() : false;
  if (schedulesAlive) errors.push("a schedule's queued ticks were still waiting at the end");
  while (signalling) await sleep(10);
  // A signal to a run that ended must be refused and write nothing: a few of them.
  if (signalKind)
    for (const row of last.rows
      .filter((r) => !r.chatId.startsWith("child:") && ["completed", "failed"].includes(r.status))
      .slice(0, 5))
      await sendSignal(row.runId, "late", `${row.runId}-late`);
  if (operator !== null) await (operator as Runtime).close();
  if (timedOut)
    errors.push(
      `the runs did not all settle within ${Math.round((options.timeoutMs ?? Math.max(120_000, options.runs * 3_000)) / 1000)} s`,
    );
  log(`settled: ${last.rows.length} runs; stopping the workers`);

  clearInterval(watchPauses);
  while (processes.some((w) => w.pausedAt !== null && !w.exited)) await sleep(100);
  if (pauses < options.pauses)
    errors.push(`only ${pauses} pauses past the lease happened, ${options.pauses} were asked for`);
  // Each worker must stop cleanly on SIGTERM; one still starting up is given the time to start first.
  const startBy = Date.now() + 60_000;
  while (slots.some((w) => w && !w.exited && !w.started) && Date.now() < startBy) await sleep(50);
  stopping = true;
  const finals = slots.filter((w): w is WorkerProcess => w !== null && !w.exited);
  for (const w of finals) {
    w.stoppedAt = Date.now();
    w.child.kill("SIGTERM");
  }
  for (const w of finals) {
    const ended = await Promise.race([w.exit, sleep(30_000).then(() => null)]);
    if (ended === null) {
      errors.push(`worker ${w.workerId} did not stop within 30 s of SIGTERM`);
      w.child.kill("SIGKILL");
      await w.exit;
    } else if (ended.code !== 0) {
      errors.push(
        `worker ${w.workerId} stopped with code ${ended.code} (${ended.signal}): ${w.stderr.trim()}`,
      );
    }
  }

  const finalLog = await readJournal(journal);
  const { events } = finalLog;
  const rows = await journal.projectionRows<RunRow>("runs");
  const audit = await auditFindings(journal);
  await journal.close();
  await server.close();
  const check = checkTrial(finalLog, dir, server.counts, snapshots, ALLOWLISTED);
  const backoff = faultKinds.includes("backoff") ? checkBackoff(events, server.requests) : undefined;
  const effectKeys = Object.keys(check.effects);
  const cancel = cancelKind
    ? { ...checkCancel(events, effectKeys, cancels), cancelsWithoutTarget }
    : undefined;
  const queueChecks: QueueCheck[] = queueKind
    ? chats.map((lines, i) =>
        checkQueue(
          events,
          `chat-${i}`,
          lines.map((l) => l.inputId),
        ),
      )
    : [];
  const queued = queueKind
    ? {
        queued: queueChecks.reduce((n, q) => n + q.queued, 0),
        queuedAdmitted: queueChecks.reduce((n, q) => n + q.queuedAdmitted, 0),
        admittedDirectly: queueChecks.reduce((n, q) => n + q.admittedDirectly, 0),
        heldStoppedForQueue: stoppedForQueue,
        problems: queueChecks.flatMap((q, i) => q.problems.map((p) => `chat-${i}: ${p}`)),
      }
    : undefined;
  // When a worker could tick: from its start to its death or to the SIGTERM that stopped it (its
  // runtime closes from then and ticks nothing, however long the close takes under load), less the
  // spans it was stopped.
  const alive: AliveWindow[] = processes.flatMap((w) => {
    if (w.startedAt === null) return [];
    const windows: AliveWindow[] = [];
    let from = w.startedAt;
    const to = Math.min(
      w.killedAt ?? Number.POSITIVE_INFINITY,
      w.stoppedAt ?? Number.POSITIVE_INFINITY,
      w.endedAt ?? Date.now(),
    );
    for (const span of pauseSpans
      .filter((p) => p.workerId === w.workerId && p.to > from && p.from < to)
      .sort((a, b) => a.from - b.from)) {
      if (span.from > from) windows.push({ from, to: span.from });
      from = span.to;
    }
    if (to > from) windows.push({ from, to });
    return windows;
  });
  const payFile = join(dir, "witness", "pay.txt");
  const approvalEffects = existsSync(payFile)
    ? readFileSync(payFile, "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => {
          const [label = "", amount = "", key = ""] = l.split(" ");
          return { label, amount: Number(amount), key };
        })
    : [];
  const waits = checkWaitKinds(waitKinds, events, {
    signals,
    alive,
    approvalEffects,
    ...(scheduleWindDown ? { ticksOwedUntil: scheduleWindDown.at } : {}),
  });
  const pause = pauseKind
    ? {
        ...checkPause(events, effectKeys, HARNESS_BY, pauseSeen),
        pausesAsked,
        pausesWithoutTarget,
        ownerKilledAfterRequest: pauseOwnerKills,
        endedBeforePaused: pausesEndedFirst,
        resumeFailures,
      }
    : undefined;

  // Take-overs: each `run.claimed` naming a killed worker, timed from its death.
  const bound = options.leaseMs + 2_000;
  const takeOvers: TakeOver[] = [];
  const ofLiveWorkers: string[] = [];
  /** Runs taken from a worker while it was stopped at its pause point (after a lease check). */
  let ofPausedWorkers = 0;
  /**
   * When an event was recorded, on the harness's clock: a worker stamps its events with its own
   * wall clock, which the clock fault steps; a claim it wrote during its step is set back by the step.
   */
  const realTime = (e: RecordedEvent): number => {
    const stamped = Date.parse(e.recordedAt);
    if (e.event.type !== "run.claimed") return stamped;
    const by = e.event.workerId;
    const span = clockSpans.find(
      (c) =>
        c.workerId === by && stamped - c.offsetMs >= c.from - 1_000 && stamped - c.offsetMs <= c.to + 1_000,
    );
    return span ? stamped - span.offsetMs : stamped;
  };
  /**
   * The clock kind's check: no run is taken, during a step or within a lease after it, from a
   * stepped worker or by one, while its owner was alive, not stopped at its pause point (or just
   * continued) and not cut off by another fault — a step must neither make a live worker look
   * dead nor let the stepped worker take a live peer's runs.
   */
  const clockFindings: string[] = [];
  for (const e of events) {
    if (e.event.type !== "run.claimed" || e.event.previousWorkerId === null) continue;
    const at = realTime(e);
    const previous = e.event.previousWorkerId;
    const by = e.event.workerId;
    for (const c of clockSpans) {
      if (c.workerId !== previous && c.workerId !== by) continue;
      if (at < c.from || at > c.to + options.leaseMs) continue;
      if (c.workerId === previous) faultDetail.clockSteps.takeOversOfStepped++;
      else faultDetail.clockSteps.takeOversByStepped++;
      const victim = victims.get(previous);
      if (victim && victim.diedAt <= at) continue;
      if (pauseSpans.some((p) => p.workerId === previous && p.from <= at && at <= p.to + 2_000)) continue;
      if (
        faultSpans.some(
          (f) =>
            (f.workerId === undefined || f.workerId === previous) &&
            f.from <= at &&
            f.to >= at - options.leaseMs,
        )
      )
        continue;
      clockFindings.push(
        `run ${e.event.runId} was taken from live worker ${previous} by ${by} at ${new Date(at).toISOString()}, ${at <= c.to ? "during" : `${at - c.to} ms after`} ${c.workerId}'s clock step of ${c.offsetMs / 1000} s`,
      );
    }
  }
  for (const finding of clockFindings) errors.push(`clock: ${finding}`);
  for (const e of events) {
    if (e.event.type !== "run.claimed" || e.event.previousWorkerId === null) continue;
    const at = realTime(e);
    const previous = e.event.previousWorkerId;
    if (pauseSpans.some((p) => p.workerId === previous && p.from <= at && at <= p.to)) ofPausedWorkers++;
    const victim = victims.get(e.event.previousWorkerId);
    // Taken while it was still alive (a pause, a late heartbeat), even if it was killed later.
    if (!victim || at < victim.diedAt) {
      ofLiveWorkers.push(`${e.event.runId} from ${e.event.previousWorkerId} to ${e.event.workerId}`);
      continue;
    }
    const claimedAt = at;
    takeOvers.push({
      runId: e.event.runId,
      victim: e.event.previousWorkerId,
      detection: victim.identity,
      by: e.event.workerId,
      epoch: e.event.epoch,
      ms: claimedAt - victim.diedAt,
      // A peer stopped meanwhile may have been the one to take it: the bound does not apply.
      peerPaused: pauseSpans.some((p) => p.from < claimedAt && p.to > victim.diedAt),
      // The store away (a restart, a partition, a cut) within a lease before the death or after it.
      duringFault: faultSpans.some((f) => f.from < claimedAt && f.to > victim.diedAt - options.leaseMs),
    });
  }
  const timing = (list: ReadonlyArray<TakeOver>) => ({
    count: list.length,
    medianMs: percentile(
      list.map((t) => t.ms),
      50,
    ),
    maxMs: list.length ? Math.max(...list.map((t) => t.ms)) : null,
  });

  // Claims left at the end (a released row has no owner, only its epoch). The stopped workers
  // released theirs; what remains was held by killed workers: on runs they finished or held just
  // before dying (nobody recovers a finished run, and a held one is only looked at again by the
  // next pass), or on a new run they claimed and died before admitting. None of them lets anyone
  // write.
  const claimsLeft: Record<string, number> = {};
  try {
    const rows = await admin.query<{ worker_id: string; state: string }>(
      "SELECT c.worker_id, CASE WHEN g.run_id IS NULL THEN 'never admitted' WHEN g.active = 1 THEN 'active' ELSE 'finished' END AS state FROM claims c LEFT JOIN run_guard g ON g.run_id = c.run_id WHERE c.worker_id IS NOT NULL",
    );
    for (const row of rows.rows) {
      const who = victims.has(row.worker_id) ? "killed worker" : "live worker";
      const key = `${who}, run ${row.state}`;
      claimsLeft[key] = (claimsLeft[key] ?? 0) + 1;
      // With the faults below holdfast, a release the outage swallowed leaves the claim of a run that
      // finished: it lets nobody write (the run is over). On an active run it is still an error.
      if (who === "live worker" && !(pgServer !== null && row.state === "finished"))
        errors.push(`a stopped worker left its claim: ${row.worker_id} (${row.state})`);
    }
    if (!options.keep) await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  } catch (error) {
    errors.push(`cleaning up the schema ${schema}: ${(error as Error).message}`);
  } finally {
    await adminPool.end().catch(() => {});
  }
  for (const proxy of proxies) await proxy.close();
  // The private server goes with the run (--keep keeps the trial folder only).
  if (smallDisk !== null)
    for (const w of processes) {
      try {
        const text = readFileSync(join(dir, "workers", `w${w.slot}-g${w.generation}.log`), "utf8");
        faultDetail.diskFull.refusalsInWorkerLogs += text
          .split("\n")
          .filter((l) => /53100|disk is full/.test(l)).length;
      } catch {
        // It wrote nothing.
      }
    }
  if (pgServer) await pgServer.stop();
  smallDisk?.unmount();
  if (!options.keep) rmSync(dir, { recursive: true, force: true });
  // No run may fail because the store was away (decision 0069): such a run is left to recovery.
  const failedForOutage = check.endedOtherwise.filter(
    (line) =>
      / failed /.test(line) &&
      /JournalUnavailable|unavailable|terminat|ECONN|connection|disk is full|53100|No space left/i.test(line),
  );
  for (const line of failedForOutage) errors.push(`a run failed because of an outage: ${line}`);

  const topRows = rows.filter((r) => !r.chatId.startsWith("child:"));
  const summary = {
    /** The ordinary day's fault kinds played (empty: the multi-worker torture as before). */
    faultKinds,
    commit: process.env.TORTURE_COMMIT ?? null,
    seed: options.seed,
    store: pgServer
      ? `a private PostgreSQL server (port ${pgServer.port}), a TCP proxy per worker`
      : maskUrl(options.store),
    ...(pgServer
      ? {
          /** The faults below holdfast played, by kind (decision 0080). */
          faults: Object.fromEntries(storageFaults.map((k) => [k, faultCounts[k]])),
          faultDetail,
        }
      : {}),
    schema: options.keep ? schema : `${schema} (dropped)`,
    ...(options.keep ? { folder: dir } : {}),
    workers: options.workers,
    leaseMs: options.leaseMs,
    runs: topRows.length,
    childRuns: rows.length - topRows.length,
    inputsAdmitted: admitted.size,
    kills,
    ...(wavesStoppedAfter !== null ? { killsAsked: options.kills, wavesStoppedByMaxSeconds: true } : {}),
    pauses,
    pausedMs: {
      min: pauseTimes.length ? Math.min(...pauseTimes) : null,
      max: pauseTimes.length ? Math.max(...pauseTimes) : null,
    },
    operatorDecisions,
    restarts: processes.length - options.workers,
    duplicates: check.duplicates,
    lost: check.lost,
    held: check.held,
    heldByReason: check.heldByReason,
    completed: check.completed,
    /** Runs that ended failed or stopped, each with how (a tool error under load, a person's stop). */
    endedOtherwise: check.endedOtherwise,
    unsettled: check.unsettled,
    reconciled: check.reconciled,
    replayed: check.replayed,
    logCheck: check.logOk ? "clean" : check.logProblems,
    /** Events stored with encrypted fields (0 unless HOLDFAST_ENCRYPTION_KEY is set). */
    encryptedEvents: sealedRows(finalLog.rows),
    audit: audit.length === 0 ? "clean" : audit,
    events: events.length,
    takeOvers: {
      boundMs: bound,
      ...timing(takeOvers),
      local: timing(takeOvers.filter((t) => t.detection === "local")),
      remote: timing(takeOvers.filter((t) => t.detection === "remote")),
      overBound: takeOvers.filter((t) => t.ms > bound && !t.peerPaused && !t.duringFault),
      /** Over the bound while the store was away for some worker: reported, not a failure. */
      overBoundDuringFault: takeOvers.filter((t) => t.ms > bound && !t.peerPaused && t.duringFault).length,
      /** Over the bound while a peer was paused: reported, not a failure. */
      overBoundWhilePaused: takeOvers.filter((t) => t.ms > bound && t.peerPaused).length,
      /** Taken from a worker that was not killed: its lease ran out while it was alive (a pause, a slow heartbeat). */
      ofLiveWorkers,
      /** Taken from a worker while it was stopped at its pause point, right after a lease check. */
      ofPausedWorkers,
    },
    claimsLeft,
    recoveryPassFailures: Object.fromEntries(passFailures),
    refusals,
    errors,
    ...(backoff ? { backoff } : {}),
    ...(cancel ? { cancel } : {}),
    ...(queued ? { queue: queued } : {}),
    ...(pause ? { pause } : {}),
    ...waits,
    ...(scheduleWindDown
      ? {
          /** The schedule kind's end: ticks owed up to `at`; how long the tick passes took to cover them (null: not within the bound). */
          scheduleWindDown: {
            at: new Date(scheduleWindDown.at).toISOString(),
            caughtUpMs: scheduleWindDown.caughtUpMs,
          },
        }
      : {}),
    ...(waitKinds.length > 0
      ? {
          /** Where the wait kinds killed workers besides the waves: at a wake-up crash point, after a signal's commit. */
          waitKills: {
            crashPoints: crashPointKills,
            byCrashPoint: crashPointsFired,
            afterSignalCommit: killedAfterSignalCommit,
            ...(approvalKind ? { approvalsDecided: approvalsDecided.size, approvalsRefused } : {}),
          },
        }
      : {}),
    problems: { duplicates: check.duplicateDetail, lost: check.lostDetail },
    seconds: Math.round((Date.now() - started) / 100) / 10,
  };
  const failed =
    summary.duplicates > 0 ||
    summary.lost > 0 ||
    summary.logCheck !== "clean" ||
    summary.audit !== "clean" ||
    summary.unsettled.length > 0 ||
    summary.runs < options.runs ||
    summary.kills < (wavesStoppedAfter ?? options.kills) ||
    summary.pauses < options.pauses ||
    summary.takeOvers.overBound.length > 0 ||
    storageFaults.some((k) => faultCounts[k] === 0) ||
    (backoff?.problems.length ?? 0) > 0 ||
    (cancel?.problems.length ?? 0) > 0 ||
    (queued?.problems.length ?? 0) > 0 ||
    (pause?.problems.length ?? 0) > 0 ||
    Object.values(waits).some((c) => c.problems.length > 0) ||
    errors.length > 0;
  return { summary, failed };
};
