import { createInterface } from "node:readline";
import { type HoldReason, MIN_SECRET_LENGTH, makeMasker } from "../../../../events/index.js";
import type { AnyAgentDef, AnyToolDef } from "../../../../runtime/define.js";
import type { RecoveryReport, RunResult } from "../../../../runtime/engine.js";
import type { Journal } from "../../../../runtime/Journal.js";
import { checkAlertOptions } from "../../../alerts.js";
import { isWorkerDead, localWorkerId } from "../../../localWorker.js";
import { openRuntime, type Runtime, reportPreflightYourself } from "../../../openRuntime.js";
import { maskUrl, openStore, resolveStore } from "../../../store.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { describeFailure } from "../failure.js";
import type { Io } from "../Output.js";
import { importUserModule, moduleSecrets } from "../userModule.js";

export interface WorkerOptions {
  /** The journal (default: `HOLDFAST_STORE`, else `.holdfast/journal.db`). */
  readonly store?: string;
  /** The same as `store`, as every other command names it; both given and different is refused. */
  readonly db?: string;
  /** Default: `HOLDFAST_WORKER_ID`, else `<host>:<pid>:<random>`. */
  readonly workerId?: string;
  readonly leaseMs: number;
  /** An ES module exporting `agents` and `tools` arrays, and optionally `secrets` or `secretEnv`. */
  readonly module?: string;
  /** The safe list file (default: ./holdfast.allowlist.json when present). */
  readonly allowlist?: string;
  readonly concurrency: number;
  /** Also admit inputs given as JSON lines on standard input. */
  readonly stdin?: boolean;
  /** POST alerts here (decision 0065). */
  readonly notifyUrl?: string;
  /** The panel's address alerts link to. */
  readonly panelUrl?: string;
  /** `refuse`: do not start when a tool's safe-list entry does not match (default `report`). */
  readonly preflight?: "report" | "refuse";
  readonly json?: boolean;
}

/** The owner of a run left alone, and when its lease ends on this process's monotonic clock. */
interface WatchedOwner {
  /** The claim as read: run, owner and lease end (a renewal or another owner makes another claim). */
  readonly claim: string;
  readonly workerId: string;
  /** Infinite when the end of this lease already started its early pass. */
  readonly endsAt: number;
}

/** How often, between passes, the owners of runs left alone are looked at. */
const WATCH_MS = 100;

/** What a worker reports, one line each (`--json`: one object per line, with `kind` and `at`). */
type Report =
  | { kind: "started"; workerId: string; store: string; pid: number; leaseMs: number; everyMs: number }
  | { kind: "preflight"; tool: string; problem: string; detail: string }
  | { kind: "took-over"; runId: string; from: string | null; epoch: number }
  | { kind: "recovered"; runId: string }
  | { kind: "resumed"; runId: string; replayed: string[]; reconciled: string[] }
  | { kind: "held"; runId: string; reasons: ReadonlyArray<HoldReason>; found: boolean }
  | { kind: "needs-attention"; runId: string; reason: string }
  | { kind: "version-missing"; runId: string; agent: string; registered: ReadonlyArray<string> }
  | { kind: "admitted"; runId: string; chatId: string; inputId: string; reused: boolean }
  | { kind: "queued"; chatId: string; inputId: string; position: number | null; reused: boolean }
  | { kind: "refused"; line: string; reason: string }
  | { kind: "settled"; runId: string; status: RunResult["status"]; detail?: string }
  | { kind: "pass-failed"; reason: string; hint: string }
  | { kind: "watch-failed"; reason: string; hint: string }
  | {
      kind: "alert";
      runId: string;
      alert: string;
      attempt: number;
      delivered: boolean;
      gaveUp: boolean;
      error?: string;
    }
  | { kind: "stopping"; signal: string; live: number }
  | { kind: "stopped"; workerId: string };

const reasonsText = (reasons: ReadonlyArray<HoldReason>): string =>
  reasons.map((r) => `${r.callId ?? ""} ${r.code}`.trim()).join(", ");

const text = (r: Report): string => {
  switch (r.kind) {
    case "started":
      return `worker ${r.workerId} (pid ${r.pid}) on ${r.store}: lease ${r.leaseMs} ms, looking for runs whose owner died every ${r.everyMs} ms; Ctrl-C stops`;
    case "preflight":
      return `warning: ${r.detail}`;
    case "took-over":
      return `took over run ${r.runId} from ${r.from ?? "an unknown worker"} (epoch ${r.epoch})`;
    case "recovered":
      return `recovered run ${r.runId} (it had no owner)`;
    case "resumed": {
      const notes = [
        ...(r.replayed.length ? [`replayed ${r.replayed.join(", ")}`] : []),
        ...(r.reconciled.length ? [`reconciled ${r.reconciled.join(", ")}`] : []),
      ];
      return `resumed run ${r.runId}${notes.length ? ` (${notes.join("; ")})` : ""}`;
    }
    case "held":
      return r.found
        ? `run ${r.runId} is held, waiting for a decision (${reasonsText(r.reasons)})`
        : `held run ${r.runId} for a person: ${reasonsText(r.reasons)} (holdfast show ${r.runId})`;
    case "needs-attention":
      return `run ${r.runId} needs attention: ${r.reason}`;
    case "version-missing":
      return `left run ${r.runId} alone: it was admitted by ${r.agent}, this worker has version ${r.registered.join(", ")} (agent-version-missing; a worker with ${r.agent} continues it)`;
    case "admitted":
      return `${r.reused ? "already admitted" : "admitted"} run ${r.runId} (chat ${r.chatId}, input ${r.inputId})`;
    case "queued":
      return `${r.reused ? "already queued" : "queued"} input ${r.inputId} in chat ${r.chatId}${r.position === null ? "" : ` at position ${r.position}`}`;
    case "refused":
      return `refused input ${r.line}: ${r.reason}`;
    case "settled":
      return `run ${r.runId} ${r.status}${r.detail ? `: ${r.detail}` : ""}`;
    case "pass-failed":
      return `recovery pass failed: ${r.reason} (${r.hint}); trying again`;
    case "watch-failed":
      return `could not read who owns the runs left alone: ${r.reason} (${r.hint}); the next pass comes at its time`;
    case "alert":
      return r.delivered
        ? `alert ${r.alert} for run ${r.runId} delivered (attempt ${r.attempt})`
        : r.gaveUp
          ? `alert ${r.alert} for run ${r.runId} not delivered after ${r.attempt} tries: ${r.error ?? "failed"}; it stays in the journal as failed`
          : `alert ${r.alert} for run ${r.runId}: attempt ${r.attempt} failed (${r.error ?? "failed"}); trying again`;
    case "stopping":
      return `${r.signal}: stopping; waiting for ${r.live} run(s) to settle (again to quit at once)`;
    case "stopped":
      return `stopped; claims of ${r.workerId} released`;
  }
};

const isArrayOf = (value: unknown, fields: ReadonlyArray<string>): value is unknown[] =>
  Array.isArray(value) &&
  value.every(
    (item) =>
      typeof item === "object" &&
      item !== null &&
      fields.every((f) => (item as Record<string, unknown>)[f] !== undefined),
  );

/**
 * Import the module that defines what this worker can run: `export const agents = [...]`,
 * `tools = [...]`, and the secrets its runs must never store: `secrets = { NAME: value }` and/or
 * `secretEnv = ["NAME"]` (environment variables holding them), as `openRuntime({ secrets })` takes.
 */
export const loadWorkerModule = async (
  modulePath: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<{ agents: AnyAgentDef[]; tools: AnyToolDef[]; secrets: Record<string, string> }> => {
  const { path, exported } = await importUserModule(modulePath, "your `agents` and `tools` arrays");
  const agents = exported.agents ?? [];
  const tools = exported.tools ?? [];
  if (!isArrayOf(agents, ["name", "version", "run"])) {
    throw new CliError(
      ExitCode.failed,
      `${path} exports \`agents\`, but not as an array of agent definitions`,
      "export const agents = [defineAgent({ ... }), ...]",
    );
  }
  if (!isArrayOf(tools, ["name", "pin", "run"])) {
    throw new CliError(
      ExitCode.failed,
      `${path} exports \`tools\`, but not as an array of tool definitions`,
      "export const tools = [defineTool({ ... }), ...]",
    );
  }
  if (agents.length === 0) {
    throw new CliError(
      ExitCode.failed,
      `${path} exports no agents`,
      "export const agents = [...]: a worker can only resume runs of agents it has",
    );
  }
  const secrets = moduleSecrets(path, exported, env, MIN_SECRET_LENGTH);
  return { agents: agents as AnyAgentDef[], tools: tools as AnyToolDef[], secrets };
};

/**
 * Alert timings from the environment, for tests and drills (`HOLDFAST_ALERT_EVERY_MS`,
 * `HOLDFAST_ALERT_RETRY_MS`, `HOLDFAST_ALERT_STALLED_MS`); the defaults otherwise.
 */
export const alertTuning = (
  env: Readonly<Record<string, string | undefined>> = process.env,
): { everyMs?: number; firstRetryMs?: number; stalledForMs?: number } => {
  const number = (name: string) => {
    const value = env[name];
    return value === undefined || value === "" ? undefined : Number(value);
  };
  const everyMs = number("HOLDFAST_ALERT_EVERY_MS");
  const firstRetryMs = number("HOLDFAST_ALERT_RETRY_MS");
  const stalledForMs = number("HOLDFAST_ALERT_STALLED_MS");
  return {
    ...(everyMs === undefined ? {} : { everyMs }),
    ...(firstRetryMs === undefined ? {} : { firstRetryMs }),
    ...(stalledForMs === undefined ? {} : { stalledForMs }),
  };
};

const validWorkerId = (id: string): boolean => id.length > 0 && id.length <= 200 && !/\s/.test(id);

/**
 * `holdfast worker`: a long-running process that owns runs on a shared journal. It recovers every
 * run whose owner died (at once for a dead process of this host, after the lease for any other),
 * then looks again every half lease, until SIGINT or SIGTERM; then it lets its runs settle,
 * releases its claims and closes. With `--stdin` it also admits inputs, one JSON line each.
 */
export const workerCommand = async (options: WorkerOptions, io: Io): Promise<number> => {
  if (options.store !== undefined && options.db !== undefined && options.store !== options.db) {
    throw usageError(
      `--store ${maskUrl(options.store)} and --db ${maskUrl(options.db)} name two journals`,
      "give one of them (they are the same option)",
    );
  }
  const workerId = options.workerId ?? (process.env.HOLDFAST_WORKER_ID || localWorkerId());
  if (!validWorkerId(workerId)) {
    throw usageError(
      `the worker id "${workerId}" is not usable`,
      "a worker id is 1 to 200 characters without spaces (--worker-id or HOLDFAST_WORKER_ID)",
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
  if (!options.module) {
    throw usageError(
      "holdfast worker needs --module",
      "pass --module with the ES module that exports your `agents` and `tools` arrays",
    );
  }
  // Listen for the stop signals from the start: one that comes while the journal opens stops the
  // worker as soon as it is open, cleanly.
  let onStop: (signal: string) => void = () => {};
  const stopSignal = new Promise<string>((resolveSignal) => {
    onStop = resolveSignal;
  });
  const onSigint = () => onStop("SIGINT");
  const onSigterm = () => onStop("SIGTERM");
  process.once("SIGINT", onSigint);
  process.once("SIGTERM", onSigterm);
  try {
    return await runWorker(options, workerId, options.module, stopSignal, io);
  } finally {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigterm);
  }
};

const runWorker = async (
  options: WorkerOptions,
  workerId: string,
  modulePath: string,
  stopSignal: Promise<string>,
  io: Io,
): Promise<number> => {
  const { agents, tools, secrets } = await loadWorkerModule(modulePath);
  // What a worker prints goes to a log: masked like anything the journal stores (law 8).
  const masker = makeMasker(secrets);
  const emit = async (report: Report) => {
    const masked = masker.mask(report);
    await io.out.line(
      options.json ? JSON.stringify({ ...masked, at: new Date().toISOString() }) : text(masked),
    );
  };

  const store = resolveStore(options.store ?? options.db).store;
  // The findings are lines of this worker's own report (below), not process warnings besides.
  reportPreflightYourself();
  const runtime: Runtime = await openRuntime({
    store,
    agents,
    tools,
    secrets,
    workerId,
    preflight: options.preflight ?? "report",
    ...(options.allowlist === undefined ? {} : { allowlist: options.allowlist }),
    recovery: {
      onOpen: false,
      leaseMs: options.leaseMs,
      concurrency: options.concurrency,
      passEveryMs: Math.max(50, Math.floor(options.leaseMs / 2)),
    },
    ...(options.notifyUrl === undefined
      ? {}
      : {
          alerts: {
            url: options.notifyUrl,
            ...(options.panelUrl === undefined ? {} : { panelUrl: options.panelUrl }),
            ...alertTuning(),
            onAttempt: (a) => {
              void emit({
                kind: "alert",
                runId: a.runId,
                alert: a.kind,
                attempt: a.attempt,
                delivered: a.delivered,
                gaveUp: a.gaveUp,
                ...(a.error === undefined ? {} : { error: a.error }),
              }).catch(() => undefined);
            },
          },
        }),
  });
  // A second, small handle to read who owns the runs left alone, between passes.
  let watcher: Journal;
  try {
    watcher = await openStore(store, { postgres: { poolSize: 1 } });
  } catch (error) {
    await runtime.close();
    throw error;
  }
  const everyMs = Math.max(50, Math.floor(options.leaseMs / 2));
  await emit({
    kind: "started",
    workerId,
    store: runtime.location,
    pid: process.pid,
    leaseMs: options.leaseMs,
    everyMs,
  });
  for (const finding of runtime.preflight) await emit({ kind: "preflight", ...finding });

  let stopping = false;
  let wake: (() => void) | undefined;
  const live = new Set<string>();
  /** Report how a run this worker executes ends. */
  const watch = (runId: string) => {
    if (live.has(runId)) return;
    live.add(runId);
    runtime
      .wait(runId)
      .then(
        (result) =>
          emit({
            kind: "settled",
            runId,
            status: result.status,
            ...(result.status === "held" ? { detail: reasonsText(result.reasons) } : {}),
            ...(result.status === "failed" ? { detail: result.error.message } : {}),
            ...(result.status === "elsewhere" ? { detail: result.state } : {}),
          }),
        (error) => emit({ kind: "settled", runId, status: "failed", detail: describeFailure(error).reason }),
      )
      // Nothing is left to tell when the report itself cannot be written (its reader went away).
      .catch(() => undefined)
      .finally(() => live.delete(runId));
  };

  const seenHeld = new Set<string>();
  const seenMissing = new Set<string>();
  const reportPass = async (report: RecoveryReport) => {
    const interrupted = new Set(report.interrupted);
    for (const runId of report.interrupted) {
      const events = await runtime.events(runId);
      const claimed = events
        .map((e) => e.event)
        .filter((e) => e.type === "run.claimed" && e.workerId === workerId)
        .at(-1);
      if (claimed?.type === "run.claimed")
        await emit({ kind: "took-over", runId, from: claimed.previousWorkerId, epoch: claimed.epoch });
      else await emit({ kind: "recovered", runId });
    }
    for (const runId of report.resumed) {
      const inRun = (callId: string) => callId.startsWith(`${runId}/`);
      await emit({
        kind: "resumed",
        runId,
        replayed: report.replayed.filter(inRun),
        reconciled: report.reconciled.filter(inRun),
      });
      watch(runId);
    }
    // Every pass lists every held run; each is reported once.
    for (const { runId, reasons } of report.held) {
      if (seenHeld.has(runId)) continue;
      seenHeld.add(runId);
      await emit({ kind: "held", runId, reasons, found: !interrupted.has(runId) });
    }
    for (const { runId, reason } of report.needsAttention)
      await emit({ kind: "needs-attention", runId, reason });
    // Every pass lists them; each is reported once (decision 0063).
    for (const { runId, agent, registered } of report.versionMissing) {
      if (seenMissing.has(runId)) continue;
      seenMissing.add(runId);
      await emit({ kind: "version-missing", runId, agent, registered: [...registered] });
    }
  };

  // Recover, wait half a lease, recover again. Between passes the owners of the runs left alone
  // are watched: a pass starts at once when one of them is a dead process of this host, or when
  // its lease has run out, instead of at the end of the wait.
  // A lease's end is a time of the journal's clock (PostgreSQL's, for every worker): what is left
  // of it is read against that clock once, then counted down on this process's monotonic clock —
  // never against this host's wall clock, which may be an hour off (decision 0087).
  //
  // A claim whose end (or whose owner's death) started a pass early, and that the pass still left
  // alone — its expiry not trusted for a lease after a step of this host's wall clock, or its claim
  // not taken for any other reason — starts no other pass early while it stays the same: the passes
  // go back to their interval. Before, such a lease, read as over after every pass, started the next
  // one a watch later: a pass every 100 ms, each claiming under the journal's append lock
  // (decision 0087, amended).
  let spent = new Map<string, "ended" | "dead">();
  const ownersOf = async (runIds: ReadonlyArray<string>): Promise<ReadonlyArray<WatchedOwner>> => {
    if (runIds.length === 0) {
      spent = new Map();
      return [];
    }
    const wanted = new Set(runIds);
    const snapshot = await watcher.liveness();
    const readAt = performance.now();
    const owners: WatchedOwner[] = [];
    const stillSpent = new Map<string, "ended" | "dead">();
    for (const c of snapshot.claims) {
      if (!wanted.has(c.runId)) continue;
      const claim = `${c.runId}\n${c.workerId}\n${c.leaseUntil}`;
      const why = spent.get(claim);
      if (why) stillSpent.set(claim, why);
      // A dead process stays dead: nothing of that claim is left to watch.
      if (why === "dead") continue;
      owners.push({
        claim,
        workerId: c.workerId,
        endsAt: why === "ended" ? Number.POSITIVE_INFINITY : readAt + (c.leaseUntil - snapshot.now),
      });
    }
    spent = stillSpent;
    return owners;
  };
  const ended = (o: WatchedOwner): boolean => performance.now() >= o.endsAt + WATCH_MS;
  /** Whether one of the owners is gone; those that are start no other early pass while their claim stays. */
  const ownerGone = (owners: ReadonlyArray<WatchedOwner>): boolean => {
    let gone = false;
    for (const o of owners) {
      const why = isWorkerDead(o.workerId) ? "dead" : ended(o) ? "ended" : null;
      if (why === null) continue;
      spent.set(o.claim, why);
      gone = true;
    }
    return gone;
  };
  // The wait between passes is a duration: monotonic (decision 0071). Measured on the wall clock, a
  // step forward and back left a worker without a pass for the size of the step (the fault harness's
  // clock kind found it: take-overs over the bound).
  const loop = (async () => {
    while (!stopping) {
      const startedAt = performance.now();
      let owners: ReadonlyArray<WatchedOwner> = [];
      let pass: Awaited<ReturnType<typeof runtime.recover>> | undefined;
      try {
        pass = await runtime.recover();
        pass.done.catch(() => undefined);
        await reportPass(pass);
      } catch (error) {
        const failure = describeFailure(error);
        await emit({ kind: "pass-failed", reason: failure.reason, hint: failure.hint });
      }
      // The pass is reported: a failure to read its runs' owners is that read's, and only costs the
      // early start (the next pass comes at its time).
      if (pass)
        try {
          owners = await ownersOf(pass.ownedElsewhere);
        } catch (error) {
          const failure = describeFailure(error);
          await emit({ kind: "watch-failed", reason: failure.reason, hint: failure.hint });
        }
      const until = startedAt + everyMs;
      while (!stopping && performance.now() < until) {
        if (performance.now() - startedAt >= WATCH_MS && ownerGone(owners)) break;
        await new Promise<void>((resolveWait) => {
          const timer = setTimeout(resolveWait, Math.min(WATCH_MS, Math.max(1, until - performance.now())));
          wake = () => {
            clearTimeout(timer);
            resolveWait();
          };
        });
        wake = undefined;
      }
    }
  })();

  const lines = options.stdin
    ? createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY })
    : null;
  const submissions = new Set<Promise<void>>();
  /**
   * Each chat's last submission: a line waits for the previous line of its chat, so one chat's
   * inputs reach `submit` in the order they were written (a queued input's place in its queue is
   * that order); lines of different chats go on at once.
   */
  const chatTails = new Map<string, Promise<void>>();
  const submitLine = async (line: string): Promise<void> => {
    try {
      const request = JSON.parse(line) as {
        chatId: string;
        inputId: string;
        agent: string;
        agentVersion?: unknown;
        content: unknown;
        whenBusy?: unknown;
      };
      const whenBusy = request.whenBusy;
      if (whenBusy !== undefined && whenBusy !== "refuse" && whenBusy !== "queue" && whenBusy !== "interrupt")
        throw new Error(`whenBusy is "refuse", "queue" or "interrupt", not ${JSON.stringify(whenBusy)}`);
      const handle = await runtime.submit({
        chatId: request.chatId,
        inputId: request.inputId,
        agent: request.agent,
        // Checked by submit: a string naming a registered version (decision 0062).
        ...(request.agentVersion === undefined ? {} : { agentVersion: request.agentVersion as string }),
        content: request.content ?? null,
        ...(whenBusy === undefined ? {} : { whenBusy }),
      });
      if ("queued" in handle && handle.queued) {
        await emit({
          kind: "queued",
          chatId: request.chatId,
          inputId: request.inputId,
          position: handle.position,
          reused: handle.reused,
        });
        return;
      }
      await emit({
        kind: "admitted",
        runId: handle.runId,
        chatId: request.chatId,
        inputId: request.inputId,
        reused: handle.reused,
      });
      watch(handle.runId);
    } catch (error) {
      // Masked before it is cut short: a cut could leave the start of a secret that no longer matches.
      await emit({
        kind: "refused",
        line: masker.maskString(line).slice(0, 200),
        reason: describeFailure(error).reason,
      });
    }
  };
  lines?.on("line", (line) => {
    if (stopping || line.trim() === "") return;
    let chatId: string | null = null;
    try {
      const parsed = JSON.parse(line) as { chatId?: unknown };
      if (typeof parsed.chatId === "string") chatId = parsed.chatId;
    } catch {
      // Refused by submitLine, with the reason.
    }
    const before = chatId === null ? undefined : chatTails.get(chatId);
    const submission = (before ?? Promise.resolve()).then(() => submitLine(line));
    if (chatId !== null) {
      const key = chatId;
      chatTails.set(key, submission);
      void submission.finally(() => {
        if (chatTails.get(key) === submission) chatTails.delete(key);
      });
    }
    submissions.add(submission);
    void submission.catch(() => undefined).finally(() => submissions.delete(submission));
  });

  const signal = await stopSignal;
  stopping = true;
  // A second signal quits at once: the claims then run out with their lease.
  const quit = () => process.exit(130);
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
  try {
    if (lines) {
      lines.close();
      process.stdin.destroy();
    }
    await emit({ kind: "stopping", signal, live: live.size });
    wake?.();
    await loop;
    await Promise.allSettled([...submissions]);
    await watcher.close();
    await runtime.close();
    await emit({ kind: "stopped", workerId });
    return ExitCode.ok;
  } finally {
    process.off("SIGINT", quit);
    process.off("SIGTERM", quit);
  }
};
