import { type RecordedEvent, runStreamId } from "../../../../events/index.js";
import { contextOf, foldRun } from "../../../../machines/index.js";
import { type CallRow, callsOfRun, type RunRow } from "../../../../projections/index.js";
import { RunNotFound } from "../../../../runtime/errors.js";
import { stalledDetail, stalledText, versionMissingText } from "../../../../runtime/liveness.js";
import { readLiveness } from "../../../liveness.js";
import { eventLine, shortHash, summarizeEvent } from "../eventFormat.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";
import { demoHint, type HeldCommand, heldCommands } from "./decide.js";

export interface ShowOptions {
  readonly db?: string;
  readonly json?: boolean;
}

/** The decide / retry commands for a held run, made on its current version; none otherwise. */
const commandsFor = (
  run: RunRow,
  events: ReadonlyArray<RecordedEvent>,
  db: string | undefined,
): HeldCommand[] => {
  if (run.status !== "held") return [];
  try {
    return heldCommands(run.runId, contextOf(foldRun(events.map((e) => e.event))), run.heldReasons, db);
  } catch {
    // A stream the machine cannot fold is corrupt: nothing to decide, `holdfast audit` says why.
    return [];
  }
};

/** The hint the call's latest intent recorded: where a person looks to learn whether it happened. */
const checkHintOf = (events: ReadonlyArray<RecordedEvent>, callId: string): string | undefined => {
  let hint: string | undefined;
  for (const { event } of events)
    if (event.type === "call.intended" && event.callId === callId) hint = event.checkHint;
  return hint;
};

/**
 * A printed command as the reader can paste it: `npx holdfast …` when this CLI was started by
 * `npx` (npm sets `npm_command=exec`; from a checkout `holdfast` is not on the PATH), else as is.
 */
const asInvoked = (command: string): string =>
  process.env.npm_command === "exec" ? command.replace(/^holdfast\b/, "npx holdfast") : command;

/** The run's calls, or why its stream does not fold into them (corrupt: `holdfast audit` says more). */
const callsOf = (events: ReadonlyArray<RecordedEvent>): { calls: CallRow[]; problem: string | null } => {
  try {
    return { calls: callsOfRun(events), problem: null };
  } catch (error) {
    return { calls: [], problem: error instanceof Error ? error.message : String(error) };
  }
};

/**
 * `holdfast show <runId>`: the run, each call and whether its outcome is committed, its events;
 * for a held run, the stream version and the exact commands that resolve it.
 */
export const showCommand = async (runId: string, options: ShowOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const row = await journal.projection<RunRow>("runs", runId);
    if (!row) throw new RunNotFound({ runId });
    const liveness = await readLiveness(journal);
    const run = liveness.of(row);
    const next = liveness.next(row, { hint: demoHint(row.agent, options.db) });
    const events = await journal.readStream(runStreamId(runId));
    const { calls, problem } = callsOf(events);
    const version = events.at(-1)?.version ?? 0;
    const commands = commandsFor(run, events, options.db);

    if (options.json) {
      await io.out.json({
        run,
        next,
        version,
        calls,
        ...(problem ? { callsProblem: problem } : {}),
        commands,
        events: events.map(eventLine),
      });
      return 0;
    }
    const { out } = io;
    await out.line(
      `run ${run.runId}  ${run.waitReason === "agent-version-missing" ? versionMissingText(run) : run.stalled ? stalledText(run.agent) : run.status}${run.needsAttention ? " (needs attention)" : ""}`,
    );
    await out.lines([
      `  chat       ${run.chatId}`,
      `  input      ${run.inputId}`,
      `  agent      ${run.agent}`,
      `  admitted   ${run.admittedAt}`,
      `  updated    ${run.updatedAt}`,
      `  calls      ${run.calls}`,
      `  conflicts  ${run.conflicts}`,
      `  version    ${version}`,
      ...(run.owner
        ? [
            `  owner      ${run.owner.host !== null ? `${run.owner.host} pid ${run.owner.pid} (worker ${run.owner.workerId})` : run.owner.workerId}`,
            `  lease      until ${run.leaseExpiresAt}`,
            `  heartbeat  ${run.lastHeartbeatAt ?? "none recorded"}`,
          ]
        : []),
    ]);
    if (run.stalled) {
      await out.line();
      await out.line(`stalled: ${stalledDetail(run, liveness.now)}`);
      await out.line(`next: ${next.text}`);
    }
    if (run.waitReason === "agent-version-missing") {
      await out.line();
      await out.line(
        `agent-version-missing: the run was admitted by ${run.agent}; live runtimes have ${run.versionsLive.join(", ")} and leave it alone (never run on other code, never failed). Keep ${run.agent} registered beside the new version in one runtime (\`openRuntime({ agents: [v1, v2] })\`) until its runs end`,
      );
      if (!run.stalled) await out.line(`next: ${next.text}`);
    }
    if (run.heldReasons.length > 0) {
      await out.line();
      await out.line("held because");
      for (const reason of run.heldReasons) {
        await out.line(`  - ${reason.callId ? `${reason.callId} ` : ""}${reason.code}: ${reason.detail}`);
        for (const interruption of reason.interruptions ?? [])
          await out.line(`      interrupted ${interruption.at}  detected by ${interruption.by}`);
      }
    }
    if (run.status === "waiting" && run.waiting?.wait === "approval") {
      const intent = events.find(
        (e) => e.event.type === "call.intended" && e.event.callId === run.waiting?.callId,
      )?.event;
      const seq = run.waiting.callId.slice(run.waiting.callId.lastIndexOf("/") + 1);
      await out.line();
      await out.lines([
        `awaiting approval: ${run.waiting.callId}${intent?.type === "call.intended" ? ` ${intent.kind} "${intent.name}"` : ""}; no process holds it, nothing has started`,
        ...(intent?.type === "call.intended"
          ? [
              ...(intent.approval?.description ? [`  what it does  ${intent.approval.description}`] : []),
              `  arguments     ${JSON.stringify(intent.args)}`,
              `  editable      ${intent.approval?.editable ? "yes (approve --args JSON --note …)" : "no"}`,
            ]
          : []),
        `  approve: ${asInvoked("holdfast")} approve ${runId} ${seq} --based-on ${version} [--note "…"]`,
        `  deny:    ${asInvoked("holdfast")} deny ${runId} ${seq} --based-on ${version} --note "…"`,
      ]);
    } else if (run.status === "waiting") {
      await out.line();
      await out.line(
        `waiting: ${run.waiting ? waitText(run.waiting) : "a wait"}; no process holds it, any worker with its agent wakes it then (\`holdfast cancel ${runId}\` ends it now)`,
      );
    }
    if (run.status === "paused") {
      await out.line();
      await out.line(
        `paused: nothing runs until \`holdfast resume ${runId}\` (or \`holdfast cancel ${runId}\`)`,
      );
    }
    if (run.status === "held") {
      await out.line();
      if (commands.length === 0) {
        await out.line(
          "no decision applies: the run needs attention (its journal entries cannot be trusted); nothing is repaired — run `holdfast audit`",
        );
      } else {
        await out.line(
          `what you can do (made on version ${version}; if the run moves first, the command is refused — show it again)`,
        );
        const decided = [
          ...new Set(commands.flatMap((c) => (c.action === "decide" && c.callId ? [c.callId] : []))),
        ];
        if (decided.length > 1) {
          await out.line(
            `  ${decided.length} calls are in doubt: decide each, together in one command, e.g. ${asInvoked("holdfast")} decide ${runId} --based-on ${version} ${decided.map((id) => `--call ${id} <decision>`).join(" ")}`,
          );
        }
        let current: string | undefined;
        for (const command of commands) {
          if (command.action === "decide" && command.callId && command.callId !== current) {
            current = command.callId;
            const call = calls.find((c) => c.callId === command.callId);
            await out.line(
              `  call ${command.callId}${call ? ` (${call.kind} "${call.name}", attempt ${call.attempt}, outcome not committed)` : ""}:`,
            );
            const hint = checkHintOf(events, command.callId);
            if (hint) await out.line(`      how to check: ${hint}`);
          }
          const indent = current === undefined ? "  " : "    ";
          await out.line(`${indent}${asInvoked(command.command)}`);
          await out.line(`${indent}    ${command.meaning}`);
        }
      }
    }
    await out.line();
    if (problem) {
      await out.line(
        `calls: not shown, the run's events do not fold into them (${problem}); run holdfast audit`,
      );
    } else if (calls.length === 0) {
      await out.line("calls: none");
    } else {
      // A policy retry waiting for its due time: the next attempt and when, from the journal.
      const scheduled = new Map<string, { attempt: number; dueAt: string }>();
      for (const { event } of events)
        if (event.type === "retry.scheduled") scheduled.set(event.callId, event);
      const nextOf = (call: CallRow): string => {
        const next = scheduled.get(call.callId);
        return next && next.attempt > call.attempt ? `; attempt ${next.attempt} due at ${next.dueAt}` : "";
      };
      await out.line("calls");
      await out.line(
        table(
          ["seq", "kind", "name", "attempt", "status", "outcome"],
          calls.map((call) => [
            call.seq,
            call.kind,
            call.name,
            call.attempt,
            `${call.error ? `${call.status}: ${call.error.message}` : call.status}${nextOf(call)}`,
            call.outcomeCommitted ? "committed" : "not committed",
          ]),
        ),
      );
    }
    await out.line();
    await out.line(`events (${runStreamId(runId)})`);
    for (const recorded of events) {
      await out.line(
        `  ${String(recorded.version).padStart(3)}  ${recorded.event.type.padEnd(22)} ${shortHash(recorded.hash)}  ${summarizeEvent(recorded.event)}`,
      );
    }
    return 0;
  });

/** What a waiting run waits for, in words: a timer's due time, or a signal's name and timeout. */
const waitText = (w: { wait: string; callId: string; dueAt?: string; name?: string }): string =>
  w.wait === "signal"
    ? `signal "${w.name ?? ""}" for ${w.callId}, ${w.dueAt ? `times out at ${w.dueAt}` : "no timeout"} (\`holdfast signal ${w.callId.slice(0, w.callId.lastIndexOf("/"))} ${w.name ?? "NAME"} --signal-id ID\` sends it)`
    : `${w.wait} ${w.callId}, due ${w.dueAt ?? "?"}`;
