import type { RecordedEvent } from "../../../events/index.js";
import { runStreamId } from "../../../events/index.js";
import { foldRun, type RunFold } from "../../../machines/index.js";
import type { JournalReader } from "../../../runtime/Journal.js";

/** A run's stream as read so far, and its fold (null: the machine could not fold it). */
export interface ReadRun {
  readonly events: ReadonlyArray<RecordedEvent>;
  readonly fold: RunFold | null;
}

/** Streams kept per reader: the runs people have open, not the journal. */
const MAX_RUNS = 32;
/** … and at most this many events in all (a few long runs, or many short ones). */
const MAX_EVENTS = 50_000;

const kept = new WeakMap<JournalReader, Map<string, ReadRun>>();

const foldOf = (events: ReadonlyArray<RecordedEvent>, from?: RunFold): RunFold | null => {
  try {
    return foldRun(
      events.map((e) => e.event),
      from,
    );
  } catch {
    return null;
  }
};

/** How much a reader keeps (decision 0088); tests pass small ones. */
export interface KeptLimits {
  /** Runs kept at most. */
  readonly runs: number;
  /** Events kept at most, in all: a run longer than this alone is read and not kept. */
  readonly events: number;
}

const LIMITS: KeptLimits = { runs: MAX_RUNS, events: MAX_EVENTS };

/**
 * A run's stream and its fold, read once per reader and then only past what was read (decision
 * 0088): history never changes, so the events after the last one kept make the stream, and folding
 * them onto the kept fold is folding from zero (the property `foldRun` is tested for). A run page
 * refreshes on every commit and every 5 s; without this each refresh decoded and folded the whole
 * stream again. A fold that failed stays failed: the events after a rejected one cannot fold either.
 *
 * The read starts at the last event kept, and what was kept is used only when the journal still holds
 * that event with the same hash: the chain makes that hash stand for every event before it. A journal
 * restored from a copy under a running server, or a stream retention removed, is read again from zero
 * instead of being shown as it was, or extended with another history's events.
 */
export const readRun = async (
  journal: JournalReader,
  runId: string,
  limits: KeptLimits = LIMITS,
): Promise<ReadRun> => {
  let runs = kept.get(journal);
  if (!runs) {
    runs = new Map();
    kept.set(journal, runs);
  }
  const streamId = runStreamId(runId);
  let before = runs.get(runId);
  let more: ReadonlyArray<RecordedEvent>;
  const last = before?.events.at(-1);
  if (before && last) {
    const tail = await journal.readStream(streamId, { afterVersion: last.version - 1 });
    if (tail[0]?.version === last.version && tail[0].hash === last.hash) more = tail.slice(1);
    else {
      // Not the history kept: read it all again.
      before = undefined;
      more = await journal.readStream(streamId);
    }
  } else more = await journal.readStream(streamId);
  let run: ReadRun;
  if (!before) run = { events: more, fold: more.length === 0 ? null : foldOf(more) };
  else if (more.length === 0) run = before;
  else
    run = {
      events: [...before.events, ...more],
      fold: before.fold === null ? null : foldOf(more, before.fold),
    };
  // Most recently read last: the first ones are dropped first.
  runs.delete(runId);
  if (run.events.length > 0 && run.events.length <= limits.events) runs.set(runId, run);
  let total = 0;
  for (const r of runs.values()) total += r.events.length;
  for (const [id, r] of runs) {
    if (runs.size <= limits.runs && total <= limits.events) break;
    runs.delete(id);
    total -= r.events.length;
  }
  return run;
};
