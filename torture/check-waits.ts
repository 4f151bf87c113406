/**
 * The checks of the fault kinds whose runs wait (decision 0064): `sleep` and `signal`, each over a
 * journal (one trial's, or the whole multi-worker one) and what the harness did from outside.
 * Their problems fail the run as a duplicate does. A kind's check is one entry of
 * {@link WAIT_CHECKS}: `approval` and `schedule` add theirs there, and the harnesses, which only
 * iterate over the table and add up its counts, need no other change to report them.
 */
import type { RecordedEvent } from "../src/events/index.js";
import { foldRun, statusOf } from "../src/machines/index.js";
import { nextTickAfter } from "../src/runtime/schedules.js";
import type { WaitFaultKind } from "./definitions.js";

/** What one kind's check found: counters (added up over trials) and the laws it saw broken. */
export interface KindCheck {
  readonly counts: Readonly<Record<string, number>>;
  readonly problems: ReadonlyArray<string>;
}

/** A signal the harness sent, and what the runtime answered. */
export interface SignalSent {
  readonly runId: string;
  readonly signalId: string;
  readonly name: string;
  /**
   * When it was sent: `before` the run reached its wait, while it was `parked`, `again` (the same
   * id and payload a second time), `late` (after the run ended: it must be refused).
   */
  readonly moment: "before" | "parked" | "again" | "late";
  /** The answer; `null` when the sender was killed before it answered (crash point `after-signal`). */
  readonly accepted: boolean | null;
  /** Whether this send wrote `signal.received` (false: the id was recorded already). */
  readonly recorded?: boolean;
  readonly reason?: string;
}

/** When a process able to tick schedules was up: ready (its runtime open) until it ended (ms). */
export interface AliveWindow {
  readonly from: number;
  readonly to: number;
}

/** A line of the `approval` kind's outside witness: the tool's effect, with its idempotency key. */
export interface ApprovalEffect {
  readonly label: string;
  readonly amount: number;
  readonly key: string;
}

/** What the harness did around the waits, for the checks. */
export interface WaitsSeen {
  readonly signals: ReadonlyArray<SignalSent>;
  /** The `approval` kind: the witness's lines of the approved tool's effect. */
  readonly approvalEffects?: ReadonlyArray<ApprovalEffect>;
  /** The `schedule` kind: when a process with the schedules' agent was up (a tick then is owed). */
  readonly alive?: ReadonlyArray<AliveWindow>;
  /**
   * The `schedule` kind: when the harness began winding the schedules down (ms). It then waited for
   * the tick passes to cover every tick up to this moment (each recorded, or passed over by a later
   * record) before pausing them; the ticks after it, up to the pause, are not owed — a pass late
   * under load would record them after the pause cut them off. Absent: owed up to the pause.
   */
  readonly ticksOwedUntil?: number;
}

type Entry = { readonly index: number; readonly event: RecordedEvent["event"]; readonly recordedAt: string };
type Streams = Map<string, Entry[]>;

const runStreams = (events: ReadonlyArray<RecordedEvent>): Streams => {
  const streams: Streams = new Map();
  events.forEach((e, index) => {
    if (!e.streamId.startsWith("run-")) return;
    const list = streams.get(e.streamId) ?? [];
    list.push({ index, event: e.event, recordedAt: e.recordedAt });
    streams.set(e.streamId, list);
  });
  return streams;
};

const statusIn = (stream: ReadonlyArray<Entry>): string => {
  try {
    return statusOf(foldRun(stream.map((e) => e.event)));
  } catch (error) {
    return `unfoldable (${(error as Error).message})`;
  }
};

/** How much earlier than its due time a commit may be stamped (the same clock; a timer may fire a millisecond early). */
const CLOCK_SLACK_MS = 5;
const ENDED = ["completed", "failed", "held", "cancelled", "stopped"];
const STOPPED = ["cancelled", "stopped"];

/** The wait calls' names of each kind: a timer's, a signal wait's. */
const TIMER_CALLS = ["sleep", "sleepUntil"];
const SIGNAL_CALLS = ["waitFor"];

/**
 * The laws every wait obeys, for the wait calls named `callNames`: one `run.waiting` per wait call
 * and one `run.woken` per `run.waiting` (a timer never fired twice), never a wake-up without a
 * recorded due time or before it (by the waker's clock, `firedAt`, and by the commit's stamp), the
 * due time never changed, no second park after the wake-up; the wait call completed exactly once,
 * never failed nor reconciled (a wait is not in doubt); and a run that waited finished — it is not
 * left waiting, running or interrupted (lost) — unless it was cancelled or stopped. A signal wait
 * woken without taking a signal is a timeout: it had a due time, and no signal of its name was
 * buffered then (a recorded signal wins over a timeout).
 */
const waitLaws = (events: ReadonlyArray<RecordedEvent>, callNames: ReadonlyArray<string>) => {
  const problems: string[] = [];
  let waitCalls = 0;
  let parked = 0;
  let woken = 0;
  let latestMs = 0;
  let finished = 0;
  for (const [streamId, stream] of runStreams(events)) {
    const waitIds = new Set<string>();
    for (const { event } of stream)
      if (event.type === "call.intended" && event.kind === "wait" && callNames.includes(event.name))
        waitIds.add(event.callId);
    if (waitIds.size === 0) continue;
    waitCalls += waitIds.size;
    const status = statusIn(stream);
    const parkedAt = new Map<string, { dueAt?: string; name?: string; n: number }>();
    const wokenAt = new Map<string, number>();
    const received: Array<{ signalId: string; name: string; index: number }> = [];
    const consumed = new Set<string>();
    const completed = new Map<string, number>();
    stream.forEach(({ event, recordedAt }, at) => {
      if (event.type === "signal.received")
        received.push({ signalId: event.signalId, name: event.name, index: at });
      if (event.type === "signal.consumed") consumed.add(event.signalId);
      const id = (event as { callId?: unknown }).callId;
      if (typeof id !== "string" || !waitIds.has(id)) return;
      if (event.type === "run.waiting") {
        parked++;
        const before = parkedAt.get(id);
        if (before) problems.push(`${streamId}: ${id} parked ${before.n + 1} times`);
        if (wokenAt.has(id)) problems.push(`${streamId}: ${id} parked again after its wake-up`);
        parkedAt.set(id, {
          ...(event.dueAt === undefined ? {} : { dueAt: event.dueAt }),
          ...(event.name === undefined ? {} : { name: event.name }),
          n: (before?.n ?? 0) + 1,
        });
      }
      if (event.type === "run.woken") {
        woken++;
        const n = (wokenAt.get(id) ?? 0) + 1;
        wokenAt.set(id, n);
        if (n > 1) problems.push(`${streamId}: ${id} woken ${n} times (a timer fired twice)`);
        const wait = parkedAt.get(id);
        if (!wait) {
          problems.push(`${streamId}: ${id} woken with no run.waiting before it`);
          return;
        }
        if (event.dueAt !== wait.dueAt)
          problems.push(
            `${streamId}: ${id} woken with due time ${event.dueAt}, it parked with ${wait.dueAt}`,
          );
        // Woken by a signal taken in the same commit (just before): due at once, whatever the timeout.
        const previous = stream[at - 1]?.event;
        const bySignal = previous?.type === "signal.consumed" && previous.callId === id;
        if (bySignal) return;
        if (wait.dueAt === undefined) {
          problems.push(`${streamId}: ${id} woken without a signal and without a due time`);
          return;
        }
        const due = Date.parse(wait.dueAt);
        const fired = Date.parse(event.firedAt);
        if (fired < due)
          problems.push(`${streamId}: ${id} fired at ${event.firedAt}, before its due time ${wait.dueAt}`);
        if (Date.parse(recordedAt) < due - CLOCK_SLACK_MS)
          problems.push(
            `${streamId}: ${id} woken in a commit of ${recordedAt}, before its due time ${wait.dueAt}`,
          );
        latestMs = Math.max(latestMs, fired - due);
        if (event.wait === "signal") {
          const buffered = received.filter(
            (r) => r.index < at && !consumed.has(r.signalId) && r.name === wait.name,
          );
          if (buffered.length > 0)
            problems.push(
              `${streamId}: ${id} timed out with signal ${buffered[0]!.signalId} recorded and not taken`,
            );
        }
      }
      if (event.type === "call.completed") completed.set(id, (completed.get(id) ?? 0) + 1);
      if (event.type === "call.failed" || event.type === "call.reconciled")
        problems.push(
          `${streamId}: the wait ${id} has a ${event.type} (a wait is never in doubt nor failed)`,
        );
    });
    for (const id of waitIds) {
      const n = completed.get(id) ?? 0;
      if (n > 1) problems.push(`${streamId}: the wait ${id} completed ${n} times`);
      if (n === 0 && !STOPPED.includes(status))
        problems.push(`${streamId}: the wait ${id} never completed (lost), the run is ${status}`);
      if (parkedAt.has(id) && !wokenAt.has(id) && !STOPPED.includes(status))
        problems.push(`${streamId}: ${id} parked and never woken, the run is ${status}`);
    }
    if (ENDED.includes(status)) finished++;
    else problems.push(`${streamId}: it waited and did not finish: it is ${status}`);
  }
  return { waitCalls, parked, woken, latestMs, finished, problems };
};

/**
 * The `sleep` kind's laws ({@link waitLaws} for `turn.sleep` and `turn.sleepUntil`): no timer
 * fired twice (one `run.woken` per wait), none lost (every run that slept finished, unless
 * cancelled), none fired before its due time.
 */
export const checkSleep = (events: ReadonlyArray<RecordedEvent>): KindCheck => {
  const laws = waitLaws(events, TIMER_CALLS);
  return {
    counts: {
      sleeps: laws.waitCalls,
      parked: laws.parked,
      woken: laws.woken,
      runsFinished: laws.finished,
      latestWakeMs: laws.latestMs,
    },
    problems: laws.problems,
  };
};

/** What a signal wait's call completed with (decision 0054). */
type WaitResult = { readonly timedOut: boolean; readonly signalId?: string };

/**
 * The `signal` kind's laws: {@link waitLaws} for `turn.waitFor` (a timeout is an outcome: the call
 * completed `{ timedOut: true }` after its due time, with no signal of its name left unused); a
 * `signalId` recorded at most once and consumed at most once per run, only after it was recorded,
 * by a wait for its name; a wait that took a signal returns that signal and one that timed out took
 * none; every signal the harness sent to a run that had not ended is recorded in its stream
 * (consumed or still buffered: never lost), a second send of one id wrote nothing, and a send to a
 * run that had ended was refused (`run-ended`) and wrote nothing.
 */
export const checkSignal = (events: ReadonlyArray<RecordedEvent>, seen: WaitsSeen): KindCheck => {
  const laws = waitLaws(events, SIGNAL_CALLS);
  const problems = [...laws.problems];
  let consumed = 0;
  let takenWithoutParking = 0;
  let timedOut = 0;
  let leftBuffered = 0;
  let recorded = 0;
  const recordedIn = new Map<string, Set<string>>();
  const statuses = new Map<string, string>();
  for (const [streamId, stream] of runStreams(events)) {
    const runId = streamId.slice("run-".length);
    statuses.set(runId, statusIn(stream));
    const received = new Map<string, string>();
    const taken = new Map<string, string>();
    const waits = new Map<string, { parked: boolean }>();
    for (const { event } of stream) {
      if (event.type === "call.intended" && event.kind === "wait" && SIGNAL_CALLS.includes(event.name))
        waits.set(event.callId, { parked: false });
      if (event.type === "run.waiting" && waits.has(event.callId)) waits.set(event.callId, { parked: true });
      if (event.type === "signal.received") {
        recorded++;
        if (received.has(event.signalId))
          problems.push(`${streamId}: signal ${event.signalId} recorded twice`);
        received.set(event.signalId, event.name);
      }
      if (event.type === "signal.consumed") {
        consumed++;
        const name = received.get(event.signalId);
        if (name === undefined)
          problems.push(`${streamId}: signal ${event.signalId} consumed, never recorded before`);
        else if (name !== event.name)
          problems.push(`${streamId}: signal ${event.signalId} (${name}) consumed as "${event.name}"`);
        if (taken.has(event.signalId))
          problems.push(
            `${streamId}: signal ${event.signalId} consumed twice (${taken.get(event.signalId)}, ${event.callId})`,
          );
        taken.set(event.signalId, event.callId);
        if (!waits.has(event.callId))
          problems.push(
            `${streamId}: signal ${event.signalId} consumed by ${event.callId}, not a signal wait`,
          );
        else if (!waits.get(event.callId)!.parked) takenWithoutParking++;
      }
      if (event.type === "call.completed" && waits.has(event.callId)) {
        const result = event.result as WaitResult | null;
        const by = [...taken].find(([, callId]) => callId === event.callId)?.[0];
        if (result?.timedOut === true) {
          timedOut++;
          if (by !== undefined)
            problems.push(`${streamId}: ${event.callId} timed out, yet took signal ${by}`);
        } else if (result?.timedOut === false) {
          if (by === undefined || result.signalId !== by)
            problems.push(
              `${streamId}: ${event.callId} returned signal ${result.signalId}, it took ${by ?? "none"}`,
            );
        } else problems.push(`${streamId}: ${event.callId} completed with ${JSON.stringify(result)}`);
      }
    }
    for (const id of received.keys()) if (!taken.has(id)) leftBuffered++;
    recordedIn.set(runId, new Set(received.keys()));
  }
  for (const s of seen.signals) {
    const there = recordedIn.get(s.runId)?.has(s.signalId) ?? false;
    const what = `signal ${s.signalId} sent ${s.moment} to ${s.runId}`;
    if (s.accepted === null) continue;
    if (s.moment === "late") {
      if (s.accepted) problems.push(`${what}: accepted, the run had ended`);
      else if (s.reason !== "run-ended") problems.push(`${what}: refused (${s.reason}), not as run-ended`);
      if (there) problems.push(`${what}: refused, and recorded all the same`);
      continue;
    }
    if (!s.accepted) {
      // Refused as ended: the run must indeed have ended (a run that ended meanwhile may refuse it).
      if (
        s.reason !== "run-ended" ||
        !ENDED.filter((e) => e !== "held").includes(statuses.get(s.runId) ?? "")
      )
        problems.push(`${what}: refused (${s.reason}), the run is ${statuses.get(s.runId) ?? "unknown"}`);
      continue;
    }
    if (!there) problems.push(`${what}: accepted, not in the run's stream (lost)`);
    if (s.moment === "again" && s.recorded === true)
      problems.push(`${what}: the second send of its id wrote it again`);
  }
  return {
    counts: {
      waits: laws.waitCalls,
      parked: laws.parked,
      woken: laws.woken,
      sent: seen.signals.length,
      sentBefore: seen.signals.filter((s) => s.moment === "before").length,
      sentParked: seen.signals.filter((s) => s.moment === "parked").length,
      sentAgain: seen.signals.filter((s) => s.moment === "again").length,
      sentLate: seen.signals.filter((s) => s.moment === "late").length,
      sendersKilled: seen.signals.filter((s) => s.accepted === null).length,
      recorded,
      consumed,
      takenWithoutParking,
      timedOut,
      leftBuffered,
      runsFinished: laws.finished,
    },
    problems,
  };
};

/**
 * How long after its time a tick is owed by a process up all along: the 300 ms tick pass, the
 * admission and the record, on a shared, loaded machine.
 */
export const TICK_OWED_MS = 2_500;

const RUN_ENDS = ["run.completed", "run.failed", "run.cancelled", "run.stopped"];

/**
 * The `schedule` kind's laws (decisions 0060, 0064), over every schedule stream and the runs of
 * the schedules' chats (`schedule-<id>`):
 *  - **no tick recorded twice**: a stream's `schedule.ticked` in strictly increasing tick order,
 *    each under `<id>@<tickAt>`, each the recorded next tick or a later one with the ticks between
 *    counted `missed` (catch-up walks, decision 0060), its `nextDueAt` the tick after it, never
 *    recorded before its time, never `missed` with catch-up `latest`;
 *  - **no tick admitted or run twice**: one run per chat and input id; every run of a schedule's
 *    chat is a tick's (`<id>@<tick>`), named by that tick's record (`admitted`, or `queued` then
 *    admitted by the queue) — or it is the tick still pending (admitted, its record not written
 *    when the schedule was paused); a tick recorded `admitted` names the run admitted for it;
 *    a tick recorded `skipped` or `missed`, or passed over, whose run stands is named by a
 *    `schedule.tick-corrected` (the race of two workers at one version, decision 0060): at most one
 *    per tick, never for a tick recorded `admitted` or `queued`, its `was` what the stream said;
 *  - **no tick lost while a process was up**: a tick at T is recorded when a process with the agent
 *    was up from before T to T + {@link TICK_OWED_MS} and the schedule was active then — or passed
 *    over by a later record that counted it missed (a tick pass late by more than a period under
 *    load: counted in `passedOverWhileUp`, not a failure); up to `seen.ticksOwedUntil` when the
 *    harness gives it (the moment it began winding the schedules down); every tick's run finished;
 *  - **overlap `skip`**: no two runs of the schedule active at once (by journal order: the next
 *    admitted only after the previous one ended; a held run stays active).
 */
export const checkSchedule = (events: ReadonlyArray<RecordedEvent>, seen: WaitsSeen): KindCheck => {
  const problems: string[] = [];
  const counts = {
    schedules: 0,
    ticks: 0,
    admitted: 0,
    queued: 0,
    queuedBehindHeld: 0,
    skipped: 0,
    missedTicks: 0,
    owed: 0,
    passedOverWhileUp: 0,
    runs: 0,
    runsFinished: 0,
    pendingAtEnd: 0,
    corrected: 0,
  };
  type Run = { runId: string; inputId: string; admittedAt: number; endedAt: number | null; status: string };
  const runsByChat = new Map<string, Run[]>();
  const streams = runStreams(events);
  for (const [streamId, stream] of streams) {
    const first = stream[0];
    if (first?.event.type !== "run.admitted" || !first.event.chatId.startsWith("schedule-")) continue;
    const end = stream.find((e) => RUN_ENDS.includes(e.event.type));
    const list = runsByChat.get(first.event.chatId) ?? [];
    list.push({
      runId: first.event.runId,
      inputId: first.event.inputId,
      admittedAt: first.index,
      endedAt: end?.index ?? null,
      status: statusIn(stream),
    });
    runsByChat.set(first.event.chatId, list);
    void streamId;
  }
  const queuedInputs = new Set<string>();
  for (const { event } of events)
    if (event.type === "input.queued") queuedInputs.add(`${event.chatId} ${event.inputId}`);
  const scheduleStreams = new Map<string, Entry[]>();
  events.forEach((e, index) => {
    if (!e.streamId.startsWith("schedule-")) return;
    const list = scheduleStreams.get(e.streamId) ?? [];
    list.push({ index, event: e.event, recordedAt: e.recordedAt });
    scheduleStreams.set(e.streamId, list);
  });
  for (const [streamId, stream] of scheduleStreams) {
    counts.schedules++;
    const upsert = stream.find((e) => e.event.type === "schedule.upserted")?.event;
    if (upsert?.type !== "schedule.upserted") {
      problems.push(`${streamId}: no schedule.upserted`);
      continue;
    }
    const id = upsert.scheduleId;
    const chatId = `schedule-${id}`;
    const timing = {
      cron: upsert.cron,
      everyMs: upsert.everyMs,
      timezone: upsert.timezone,
    } as Parameters<typeof nextTickAfter>[0];
    const next = (ms: number) => nextTickAfter(timing, ms);
    const runs = runsByChat.get(chatId) ?? [];
    const byInput = new Map<string, Run[]>();
    for (const run of runs) byInput.set(run.inputId, [...(byInput.get(run.inputId) ?? []), run]);
    for (const [inputId, list] of byInput)
      if (list.length > 1)
        problems.push(
          `${streamId}: tick ${inputId} admitted ${list.length} times (${list.map((r) => r.runId).join(", ")})`,
        );
    // Walk the stream: the recorded next tick, the ticks recorded, when it was active.
    let due: number | null = upsert.nextDueAt === null ? null : Date.parse(upsert.nextDueAt);
    let lastTick = -Infinity;
    let activeSince: number | null = upsert.paused ? null : Date.parse(stream[0]!.recordedAt);
    const active: Array<{ from: number; to: number }> = [];
    const recorded = new Map<number, { outcome: string; corrected?: boolean }>();
    for (const { event, recordedAt } of stream) {
      const at = Date.parse(recordedAt);
      if (event.type === "schedule.paused" || event.type === "schedule.deleted") {
        if (activeSince !== null) active.push({ from: activeSince, to: at });
        activeSince = null;
        due = null;
      }
      if (event.type === "schedule.resumed") {
        activeSince = at;
        due = Date.parse(event.nextDueAt);
      }
      if (event.type === "schedule.upserted" && event !== upsert && !event.paused && activeSince === null) {
        activeSince = at;
        due = event.nextDueAt === null ? null : Date.parse(event.nextDueAt);
      }
      if (event.type === "schedule.tick-corrected") {
        // The worker whose run of a tick stands corrected what the stream said of it (decision 0060).
        counts.corrected++;
        const tick = Date.parse(event.tickAt);
        const what = `${streamId}: tick ${event.tickAt} corrected`;
        const before = recorded.get(tick);
        if (event.inputId !== `${id}@${event.tickAt}`)
          problems.push(`${what} under input id ${event.inputId}`);
        if (before?.corrected) problems.push(`${what} twice`);
        else if (before?.outcome === "admitted" || before?.outcome === "queued")
          problems.push(`${what}, it was recorded ${before.outcome}`);
        else if ((event.was === "skipped" || event.was === "missed") !== (before !== undefined))
          problems.push(`${what} as once ${event.was}, recorded ${before?.outcome ?? "nowhere"}`);
        else if (before !== undefined && before.outcome !== event.was)
          problems.push(`${what} as once ${event.was}, recorded ${before.outcome}`);
        if (event.outcome === "admitted") {
          const list = byInput.get(event.inputId) ?? [];
          if (event.admittedRunId !== list[0]?.runId)
            problems.push(`${what} to run ${event.admittedRunId}, its run is ${list[0]?.runId ?? "none"}`);
        }
        recorded.set(tick, { outcome: event.outcome, corrected: true });
        continue;
      }
      if (event.type !== "schedule.ticked") continue;
      counts.ticks++;
      const tick = Date.parse(event.tickAt);
      const what = `${streamId}: tick ${event.tickAt}`;
      if (tick <= lastTick)
        problems.push(`${what} recorded again or out of order (after ${new Date(lastTick).toISOString()})`);
      lastTick = Math.max(lastTick, tick);
      if (event.inputId !== `${id}@${event.tickAt}`)
        problems.push(`${what} recorded under input id ${event.inputId}`);
      if (at < tick - CLOCK_SLACK_MS) problems.push(`${what} recorded at ${recordedAt}, before its time`);
      if (event.nextDueAt !== new Date(next(tick) ?? 0).toISOString())
        problems.push(`${what}: next tick ${event.nextDueAt}, not the one after it`);
      if (due === null) problems.push(`${what} recorded while the schedule was not active`);
      else if (tick !== due || event.missed !== 0) {
        // Passed over ticks: from the recorded next tick up to this one, each counted missed.
        let walked = 0;
        for (let t = due; t < tick && walked <= 100_000; t = next(t) ?? Infinity) walked++;
        if (tick < due) problems.push(`${what} before the recorded next tick ${new Date(due).toISOString()}`);
        else if (walked !== event.missed)
          problems.push(
            `${what}: ${event.missed} missed recorded, ${walked} ticks passed over since ${new Date(due).toISOString()}`,
          );
      }
      counts.missedTicks += event.missed;
      if (event.outcome === "missed" && upsert.catchUp === "latest")
        problems.push(`${what} recorded missed, the schedule catches up the latest`);
      if (event.outcome === "admitted") {
        counts.admitted++;
        const list = byInput.get(event.inputId) ?? [];
        if (list.length === 0)
          problems.push(`${what} recorded admitted, no run admitted for ${event.inputId}`);
        else if (event.admittedRunId !== list[0]!.runId)
          problems.push(`${what} recorded admitted as ${event.admittedRunId}, its run is ${list[0]!.runId}`);
      }
      if (event.outcome === "queued") {
        counts.queued++;
        // Queued: its run admitted from the queue, or still queued behind a held run (never lost).
        if ((byInput.get(event.inputId) ?? []).length === 0) {
          const inQueue = queuedInputs.has(`${chatId} ${event.inputId}`);
          const heldRun = runs.some((r) => r.status === "held");
          if (!inQueue) problems.push(`${what} recorded queued, not in the chat's queue and no run (lost)`);
          else if (!heldRun)
            problems.push(`${what} still queued at the end, no held run keeps its chat busy`);
          else counts.queuedBehindHeld++;
        }
      }
      if (event.outcome === "skipped") counts.skipped++;
      recorded.set(tick, { outcome: event.outcome });
      due = Date.parse(event.nextDueAt);
    }
    if (activeSince !== null) active.push({ from: activeSince, to: Infinity });
    // Every run of the chat is a recorded tick's, or the pending one.
    for (const run of runs) {
      counts.runs++;
      const prefix = `${id}@`;
      const tick = run.inputId.startsWith(prefix) ? Date.parse(run.inputId.slice(prefix.length)) : Number.NaN;
      const rec = recorded.get(tick);
      if (Number.isNaN(tick))
        problems.push(`${streamId}: run ${run.runId} under input id ${run.inputId}, not a tick's`);
      else if (!rec) {
        if (due !== null && tick === due) counts.pendingAtEnd++;
        else if (
          !stream.some((e) => e.event.type === "schedule.paused" || e.event.type === "schedule.deleted") ||
          tick < lastPendingTick(stream)
        )
          problems.push(`${streamId}: run ${run.runId} for tick ${run.inputId}, no tick record of it`);
        else counts.pendingAtEnd++;
      } else if (rec.outcome === "skipped" || rec.outcome === "missed")
        problems.push(`${streamId}: run ${run.runId} for tick ${run.inputId}, recorded ${rec.outcome}`);
      if (["completed", "failed", "held", "cancelled", "stopped"].includes(run.status)) counts.runsFinished++;
      else
        problems.push(
          `${streamId}: the run ${run.runId} of tick ${run.inputId} did not finish: it is ${run.status}`,
        );
    }
    // Overlap skip: one run of the schedule active at a time.
    if (upsert.overlap === "skip") {
      const ordered = [...runs].sort((a, b) => a.admittedAt - b.admittedAt);
      for (let i = 1; i < ordered.length; i++) {
        const before = ordered[i - 1]!;
        const run = ordered[i]!;
        if (before.endedAt === null || before.endedAt > run.admittedAt)
          problems.push(
            `${streamId}: overlap skip, yet ${run.runId} (${run.inputId}) admitted while ${before.runId} (${before.inputId}) was active`,
          );
      }
    }
    // Ticks owed: a process was up from their time to well after it, and the schedule was active.
    const first = upsert.nextDueAt === null ? null : Date.parse(upsert.nextDueAt);
    if (first === null || !seen.alive) continue;
    const end = Math.min(Math.max(...seen.alive.map((w) => w.to), 0), seen.ticksOwedUntil ?? Infinity);
    for (let t = first; t <= end; t = next(t) ?? Infinity) {
      const up = seen.alive.some((w) => w.from <= t && w.to >= t + TICK_OWED_MS);
      const on = active.some((w) => w.from <= t && w.to > t + TICK_OWED_MS);
      if (!up || !on) continue;
      counts.owed++;
      // Passed over by a later record (counted missed, the walk checked above): a tick pass late by
      // more than a period on a loaded machine — reported, not a loss. Lost: nothing recorded it.
      if (!recorded.has(t) && lastTick > t) counts.passedOverWhileUp++;
      else if (!recorded.has(t))
        problems.push(
          `${streamId}: tick ${new Date(t).toISOString()} lost: a process was up from it to ${TICK_OWED_MS} ms after, no record of it`,
        );
    }
  }
  return { counts, problems };
};

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * The `approval` kind's laws (decisions 0057, 0064), over every run stream and the witness:
 *  - **no effect before its approval**: a call whose first attempt awaits approval has a later
 *    attempt intended only after an `approval.recorded` approving it; each witness line of the tool
 *    names an attempt intended after that approval (never the awaiting attempt);
 *  - **at most once per attempt**: no attempt's key witnessed twice; one decision per call;
 *  - **a denied call never runs**: no later attempt, no witness line;
 *  - **the edit is what runs**: an approved attempt's arguments equal the edit when edited;
 *  - **no run left waiting**: every run that awaited approval ended, unless cancelled or stopped.
 */
export const checkApproval = (events: ReadonlyArray<RecordedEvent>, seen: WaitsSeen): KindCheck => {
  const problems: string[] = [];
  const counts = { awaited: 0, approved: 0, edited: 0, denied: 0, effects: 0, finished: 0 };
  const effects = seen.approvalEffects ?? [];
  const witnessed = new Map<string, number>();
  for (const e of effects) witnessed.set(e.key, (witnessed.get(e.key) ?? 0) + 1);
  for (const [key, n] of witnessed) if (n > 1) problems.push(`effect of ${key} witnessed ${n} times`);
  // Each awaiting call's story: where its decision was, and its later attempts' intents.
  const known = new Set<string>();
  for (const [streamId, stream] of runStreams(events)) {
    const awaiting = new Map<
      string,
      { args: unknown; decision?: { at: number; approved: boolean; args?: unknown } }
    >();
    const attempts = new Map<string, number>();
    for (const { index: at, event } of stream) {
      if (event.type === "call.intended") {
        if (event.approval !== undefined && event.attempt === 1) {
          awaiting.set(event.callId, { args: event.args });
          counts.awaited++;
          continue;
        }
        const story = awaiting.get(event.callId);
        if (story === undefined) continue;
        attempts.set(event.idempotencyKey, at);
        if (story.decision === undefined || story.decision.at > at)
          problems.push(
            `${streamId}: attempt ${event.attempt} of ${event.callId} intended before its approval`,
          );
        else if (!story.decision.approved)
          problems.push(
            `${streamId}: attempt ${event.attempt} of ${event.callId} intended, the call was denied`,
          );
        else {
          const want = story.decision.args ?? story.args;
          if (!sameJson(event.args, want))
            problems.push(
              `${streamId}: attempt ${event.attempt} of ${event.callId} ran with ${JSON.stringify(event.args)}, approved ${JSON.stringify(want)}`,
            );
        }
      }
      if (event.type === "approval.recorded") {
        const story = awaiting.get(event.callId);
        if (story === undefined) {
          problems.push(`${streamId}: approval of ${event.callId} recorded, the call awaits none`);
          continue;
        }
        if (story.decision !== undefined) problems.push(`${streamId}: ${event.callId} decided twice`);
        story.decision = {
          at,
          approved: event.decision === "approved",
          ...(event.args === undefined ? {} : { args: event.args }),
        };
        if (event.decision === "approved") counts.approved++;
        else counts.denied++;
        if (event.args !== undefined) counts.edited++;
      }
    }
    for (const callId of awaiting.keys()) known.add(callId);
    for (const [callId, story] of awaiting) {
      for (const e of effects.filter((x) => x.key.startsWith(`${callId}#`))) {
        if (story.decision === undefined || !story.decision.approved)
          problems.push(`${streamId}: ${callId} took effect (${e.key}) without an approval`);
        else if (!attempts.has(e.key))
          problems.push(
            `${streamId}: ${callId} took effect (${e.key}), not an attempt intended after its approval`,
          );
        else if (
          story.decision.args !== undefined &&
          (story.decision.args as { amount?: unknown }).amount !== e.amount
        )
          problems.push(
            `${streamId}: ${callId} paid ${e.amount}, the approver edited it to ${JSON.stringify(story.decision.args)}`,
          );
      }
    }
    if (awaiting.size > 0) {
      const status = statusIn(stream);
      if (ENDED.includes(status)) {
        if (!STOPPED.includes(status)) counts.finished++;
      } else problems.push(`${streamId}: awaited approval and was left ${status}`);
    }
  }
  for (const e of effects) {
    counts.effects++;
    const callId = e.key.slice(0, e.key.lastIndexOf("#"));
    if (!known.has(callId)) problems.push(`effect ${e.key} of a call that never awaited approval`);
  }
  return { counts, problems };
};

/**
 * The tick a schedule stream was about to handle when it was last paused or deleted: a run for it,
 * or for a later tick a worker caught up to, admitted by a worker that died before recording it,
 * is pending (a paused schedule records no tick).
 */
const lastPendingTick = (stream: ReadonlyArray<Entry>): number => {
  let due = Number.NaN;
  for (const { event } of stream) {
    if (event.type === "schedule.upserted" && event.nextDueAt !== null) due = Date.parse(event.nextDueAt);
    if (event.type === "schedule.resumed" || event.type === "schedule.ticked")
      due = Date.parse(event.nextDueAt);
  }
  return due;
};

/**
 * Each wait kind's check: the harnesses run the ones of the kinds they play. `approval` and
 * `schedule` add an entry (and a member of `WAIT_KINDS` in torture/definitions.ts).
 */
export const WAIT_CHECKS: Record<
  WaitFaultKind,
  (events: ReadonlyArray<RecordedEvent>, seen: WaitsSeen) => KindCheck
> = {
  sleep: (events) => checkSleep(events),
  signal: checkSignal,
  schedule: checkSchedule,
  approval: checkApproval,
};

/** The checks of `kinds` over one journal. */
export const checkWaitKinds = (
  kinds: ReadonlyArray<WaitFaultKind>,
  events: ReadonlyArray<RecordedEvent>,
  seen: WaitsSeen,
): Partial<Record<WaitFaultKind, KindCheck>> =>
  Object.fromEntries(kinds.map((kind) => [kind, WAIT_CHECKS[kind](events, seen)]));

/**
 * Several trials' checks of one kind added up (a `latest…` count is the largest), each problem
 * prefixed with its trial.
 */
export const sumKindChecks = (
  checks: ReadonlyArray<{ readonly trial: number; readonly check: KindCheck }>,
): { counts: Record<string, number>; problems: string[] } => {
  const counts: Record<string, number> = {};
  for (const { check } of checks)
    for (const [k, n] of Object.entries(check.counts))
      counts[k] = k.startsWith("latest") ? Math.max(counts[k] ?? 0, n) : (counts[k] ?? 0) + n;
  return {
    counts,
    problems: checks.flatMap(({ trial, check }) => check.problems.map((p) => `trial ${trial}: ${p}`)),
  };
};
