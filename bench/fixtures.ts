import { LibsqlJournal } from "../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  type AnyEvent,
  callIdOf,
  digestOf,
  fingerprintOf,
  keyedDigestOf,
  runStreamId,
} from "../src/events/index.js";
import { CURRENT_RUN_MACHINE, foldRun, statusOf } from "../src/machines/index.js";
import type { AppendRequest } from "../src/runtime/Journal.js";
import { benchAgent, noopTool } from "./workload.js";

/**
 * Recovery fixtures written straight through `LibsqlJournal.append`: the same hash chain, guards
 * and inline projections as the runtime writes, without paying for an agent execution per run.
 * Every stream shape is checked against the run machine once, so a change of the laws breaks the
 * benchmark loudly instead of measuring streams the runtime would never write.
 */

/**
 * Move everything into the main file, so a fixture can be copied as one file (a closing
 * connection does not always checkpoint and remove its WAL).
 */
const checkpoint = (journal: LibsqlJournal): void => {
  journal.unsafeDatabase().pragma("wal_checkpoint(TRUNCATE)");
};

/** Events of one finished filler run: admitted, four calls (intent + outcome), completed. */
export const FILLER_EVENTS_PER_RUN = 10;
const FILLER_CALLS = (FILLER_EVENTS_PER_RUN - 2) / 2;

interface StreamParams {
  readonly key: Uint8Array;
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly calls: number;
}

const admitted = (p: StreamParams): AnyEvent => {
  const input = { calls: p.calls };
  return {
    type: "run.admitted",
    runId: p.runId,
    chatId: p.chatId,
    inputId: p.inputId,
    inputDigest: keyedDigestOf(p.key, { content: input }),
    agent: { name: benchAgent.name, version: benchAgent.version },
    machine: CURRENT_RUN_MACHINE,
    input,
  };
};

/** The intent exactly as `turn.tool(noopTool, { i: seq })` records it, so a resumed run replays it. */
const intended = (p: StreamParams, seq: number): AnyEvent => {
  const callId = callIdOf(p.runId, seq);
  const args = { i: seq };
  return {
    type: "call.intended",
    runId: p.runId,
    callId,
    seq,
    attempt: 1,
    kind: "tool",
    name: noopTool.name,
    args,
    fingerprint: fingerprintOf(p.key, { kind: "tool", name: noopTool.name, args }),
    disposition: noopTool.disposition,
    pin: noopTool.pin,
    reconciler: null,
    idempotencyKey: `${callId}#1`,
  };
};

const NULL_DIGEST = digestOf(null);

const completed = (p: StreamParams, seq: number): AnyEvent => ({
  type: "call.completed",
  runId: p.runId,
  callId: callIdOf(p.runId, seq),
  attempt: 1,
  result: null,
  resultDigest: NULL_DIGEST,
});

const finishedCalls = (p: StreamParams, count: number): AnyEvent[] =>
  Array.from({ length: count }, (_, seq) => [intended(p, seq), completed(p, seq)]).flat();

/** A finished run, as a completed agent leaves it. */
export const fillerStream = (p: StreamParams): AnyEvent[] => [
  admitted(p),
  ...finishedCalls(p, p.calls),
  { type: "run.completed", runId: p.runId, output: p.calls, outputDigest: digestOf(p.calls) },
];

/**
 * An interrupted run. `held`: its last call has an intent and no outcome (in doubt), so recovery
 * must hold it. Otherwise every call has its outcome, so recovery resumes it and the agent's
 * re-execution serves those calls from the journal and makes the remaining one live.
 */
export const interruptedStream = (p: StreamParams, held: boolean): AnyEvent[] =>
  held
    ? [admitted(p), ...finishedCalls(p, p.calls - 1), intended(p, p.calls - 1)]
    : [admitted(p), ...finishedCalls(p, p.calls - 1)];

const stopped = (runId: string): AnyEvent => ({
  type: "run.stopped",
  runId,
  reason: "bench: not part of this recovery scenario",
});

/** Calls the agent of an interrupted run asks for; the last is the one in doubt or still to make. */
const INTERRUPTED_CALLS = 2;

const checkShapes = (key: Uint8Array): void => {
  const p = { key, runId: "shape", chatId: "shape", inputId: "shape" };
  const checks: Array<[AnyEvent[], string]> = [
    [fillerStream({ ...p, calls: FILLER_CALLS }), "completed"],
    [interruptedStream({ ...p, calls: INTERRUPTED_CALLS }, true), "running"],
    [interruptedStream({ ...p, calls: INTERRUPTED_CALLS }, false), "running"],
    [[...interruptedStream({ ...p, calls: INTERRUPTED_CALLS }, true), stopped(p.runId)], "stopped"],
  ];
  for (const [events, expected] of checks) {
    const status = statusOf(foldRun(events));
    if (status !== expected) {
      throw new Error(`bench fixture: a stream folds to "${status}", expected "${expected}"`);
    }
  }
};

export interface RecoveryFixture {
  readonly interrupted: number;
  /** Of the interrupted runs, those with a call in doubt (the rest can resume). */
  readonly held: number;
  readonly fillerEvents: number;
  readonly totalEvents: number;
}

export const interruptedRunId = (n: number): string => `interrupted-${n}`;

/** How many run streams are handed to the group commit at once: one transaction each. */
const RUNS_PER_FLUSH = 500;

/**
 * Write `interrupted` interrupted runs (held or resumable, as `isHeld` says) and about `fillerEvents` events of
 * finished runs to a new journal file. Both are written in interleaved slices, so the active runs'
 * events are spread through the log as they would be in a long-lived journal, not packed at its end.
 */
export const writeRecoveryFixture = async (
  path: string,
  options: {
    readonly interrupted: number;
    readonly fillerEvents: number;
    /** Whether interrupted run `n` is written with a call in doubt. */
    readonly isHeld: (n: number) => boolean;
    readonly onProgress?: (done: number, total: number) => void;
  },
): Promise<RecoveryFixture> => {
  const journal = LibsqlJournal.open(path);
  try {
    const key = journal.fingerprintKey;
    checkShapes(key);
    const fillerRuns = Math.ceil(options.fillerEvents / FILLER_EVENTS_PER_RUN);
    const slices = Math.max(1, Math.min(20, options.interrupted));
    let fillerDone = 0;
    let interruptedDone = 0;
    let held = 0;
    let events = 0;
    const total = fillerRuns + options.interrupted;
    /** Appends runs `first..first+count-1` (absolute indices), RUNS_PER_FLUSH streams per commit. */
    const writeRuns = async (first: number, count: number, make: (n: number) => [string, AnyEvent[]]) => {
      for (let start = first; start < first + count; start += RUNS_PER_FLUSH) {
        const end = Math.min(first + count, start + RUNS_PER_FLUSH);
        const requests: AppendRequest[] = [];
        for (let n = start; n < end; n++) {
          const [runId, stream] = make(n);
          events += stream.length;
          requests.push({ streamId: runStreamId(runId), expectedVersion: "no-stream", events: stream });
        }
        // One request list: one savepoint for the slice instead of one per run.
        await journal.appendAll(requests);
        options.onProgress?.(fillerDone + interruptedDone + (end - first), total);
      }
    };
    for (let slice = 0; slice < slices; slice++) {
      const fillerCount = Math.floor((fillerRuns * (slice + 1)) / slices) - fillerDone;
      await writeRuns(fillerDone, fillerCount, (n) => [
        `filler-${n}`,
        fillerStream({
          key,
          runId: `filler-${n}`,
          // Many runs per chat, as in real use; each run finishes, so the one-active-run rule holds.
          chatId: `filler-chat-${n % 5000}`,
          inputId: `filler-input-${n}`,
          calls: FILLER_CALLS,
        }),
      ]);
      fillerDone += fillerCount;
      const interruptedCount = Math.floor((options.interrupted * (slice + 1)) / slices) - interruptedDone;
      await writeRuns(interruptedDone, interruptedCount, (n) => {
        const isHeld = options.isHeld(n);
        if (isHeld) held++;
        const p = {
          key,
          runId: interruptedRunId(n),
          chatId: `interrupted-chat-${n}`,
          inputId: `interrupted-input-${n}`,
          calls: INTERRUPTED_CALLS,
        };
        return [p.runId, interruptedStream(p, isHeld)];
      });
      interruptedDone += interruptedCount;
    }
    checkpoint(journal);
    return {
      interrupted: options.interrupted,
      held,
      fillerEvents: fillerRuns * FILLER_EVENTS_PER_RUN,
      totalEvents: events,
    };
  } finally {
    await journal.close();
  }
};

/** A whole run as the sequence of appends the runtime makes for it: one append per event. */
export const benchStreams = (
  key: Uint8Array,
  runId: string,
  calls: number,
): { readonly streamId: string; readonly appends: ReadonlyArray<ReadonlyArray<AnyEvent>> } => {
  const events = fillerStream({ key, runId, chatId: `chat-${runId}`, inputId: "input", calls });
  return { streamId: runStreamId(runId), appends: events.map((event) => [event]) };
};

/**
 * Finish every interrupted run of a fixture that `keep` rejects, by appending `run.stopped`: the
 * log keeps all its events and its layout, and only the kept runs are left for recovery.
 */
export const stopInterruptedRuns = async (
  path: string,
  total: number,
  keep: (n: number) => boolean,
): Promise<number> => {
  const journal = LibsqlJournal.open(path);
  let kept = 0;
  try {
    let requests: AppendRequest[] = [];
    for (let n = 0; n < total; n++) {
      if (keep(n)) {
        kept++;
        continue;
      }
      const runId = interruptedRunId(n);
      requests.push({
        streamId: runStreamId(runId),
        expectedVersion: "stream-exists",
        events: [stopped(runId)],
      });
      if (requests.length >= RUNS_PER_FLUSH) {
        await journal.appendAll(requests);
        requests = [];
      }
    }
    if (requests.length > 0) await journal.appendAll(requests);
    checkpoint(journal);
    return kept;
  } finally {
    await journal.close();
  }
};

/**
 * A run recovery has held: admitted, one call in doubt (an intent without outcome), interrupted,
 * held for that call. This is what the Recovery panel's "Needs you" list shows.
 */
export const heldStream = (p: StreamParams): AnyEvent[] => {
  const callId = callIdOf(p.runId, 0);
  return [
    admitted(p),
    intended(p, 0),
    { type: "run.interrupted", runId: p.runId, detectedBy: "bench-recovery", inDoubt: [callId] },
    {
      type: "run.held",
      runId: p.runId,
      reasons: [
        {
          code: "in-doubt",
          callId,
          detail: `tool "${noopTool.name}" attempt 1 has an intent but no outcome`,
        },
      ],
    },
  ];
};

export const heldRunId = (n: number): string => `held-${n}`;

/** The run of `writeRunsFixture`'s `longRunCalls` option. */
export const LONG_RUN_ID = "long-0";

/**
 * A long run recovery has held: admitted, `calls - 1` finished calls, the last call in doubt,
 * interrupted, held for it. The run page an operator opens on a long run: every call in the table
 * and the timeline, the decision forms for the one in doubt.
 */
export const longHeldStream = (p: StreamParams): AnyEvent[] => {
  const last = p.calls - 1;
  const callId = callIdOf(p.runId, last);
  return [
    admitted(p),
    ...finishedCalls(p, last),
    intended(p, last),
    { type: "run.interrupted", runId: p.runId, detectedBy: "bench-recovery", inDoubt: [callId] },
    {
      type: "run.held",
      runId: p.runId,
      reasons: [
        {
          code: "in-doubt",
          callId,
          detail: `tool "${noopTool.name}" attempt 1 has an intent but no outcome`,
        },
      ],
    },
  ];
};

export interface RunsFixtureOptions {
  readonly runs: number;
  readonly heldEvery: number;
  /** Also write one held run of this many calls, `LONG_RUN_ID`, in the middle of the log. */
  readonly longRunCalls?: number;
  readonly onProgress?: (done: number, total: number) => void;
}

export interface RunsFixture {
  readonly runs: number;
  readonly held: number;
  readonly events: number;
}

/**
 * A journal of `runs` runs for the server's list: every `heldEvery`-th run held (a call in doubt),
 * the others completed with one call, so each run is 4 events; written `RUNS_PER_FLUSH` runs per
 * commit, held runs spread through the log.
 */
export const writeRunsFixture = async (path: string, options: RunsFixtureOptions): Promise<RunsFixture> => {
  const journal = LibsqlJournal.open(path);
  try {
    const fixture = await writeRuns(journal, options);
    checkpoint(journal);
    return fixture;
  } finally {
    await journal.close();
  }
};

/** `writeRunsFixture`'s runs, appended to an open journal of either engine (PostgreSQL's too). */
export const writeRuns = async (
  journal: {
    readonly fingerprintKey: Uint8Array;
    appendAll(requests: ReadonlyArray<AppendRequest>): Promise<unknown>;
  },
  options: RunsFixtureOptions,
): Promise<RunsFixture> => {
  const key = journal.fingerprintKey;
  const shape = { key, runId: "shape", chatId: "shape", inputId: "shape", calls: 1 };
  for (const [events, expected] of [
    [heldStream(shape), "held"],
    [fillerStream(shape), "completed"],
    [longHeldStream({ ...shape, calls: 3 }), "held"],
  ] as const) {
    const status = statusOf(foldRun(events));
    if (status !== expected)
      throw new Error(`bench fixture: a stream folds to "${status}", expected "${expected}"`);
  }
  let held = 0;
  let longHeld = 0;
  let events = 0;
  for (let start = 0; start < options.runs; start += RUNS_PER_FLUSH) {
    const requests: AppendRequest[] = [];
    for (let n = start; n < Math.min(options.runs, start + RUNS_PER_FLUSH); n++) {
      const isHeld = n % options.heldEvery === 0;
      const runId = isHeld ? heldRunId(held++) : `done-${n}`;
      const p = { key, runId, chatId: `chat-${runId}`, inputId: "input", calls: 1 };
      const stream = isHeld ? heldStream(p) : fillerStream(p);
      events += stream.length;
      requests.push({ streamId: runStreamId(runId), expectedVersion: "no-stream", events: stream });
    }
    if (
      options.longRunCalls !== undefined &&
      start === Math.floor(options.runs / 2 / RUNS_PER_FLUSH) * RUNS_PER_FLUSH
    ) {
      const p = {
        key,
        runId: LONG_RUN_ID,
        chatId: `chat-${LONG_RUN_ID}`,
        inputId: "input",
        calls: options.longRunCalls,
      };
      const stream = longHeldStream(p);
      events += stream.length;
      longHeld = 1;
      requests.push({ streamId: runStreamId(LONG_RUN_ID), expectedVersion: "no-stream", events: stream });
    }
    await journal.appendAll(requests);
    options.onProgress?.(Math.min(options.runs, start + RUNS_PER_FLUSH), options.runs);
  }
  return { runs: options.runs + longHeld, held: held + longHeld, events };
};
