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

/**
 * A run's stream and its fold, read once per reader and then only past what was read (decision
 * 0088): history never changes, so the events after the last one kept make the stream, and folding
 * them onto the kept fold is folding from zero (the property `foldRun` is tested for). A run page
 * refreshes on every commit and every 5 s; without this each refresh decoded and folded the whole
 * stream again. A fold that failed stays failed: the events after a rejected one cannot fold either.
 */
export const readRun = async (journal: JournalReader, runId: string): Promise<ReadRun> => {
  let runs = kept.get(journal);
  if (!runs) {
    runs = new Map();
    kept.set(journal, runs);
  }
  const before = runs.get(runId);
  const after = before?.events.at(-1)?.version;
  const more = await journal.readStream(
    runStreamId(runId),
    after === undefined ? undefined : { afterVersion: after },
  );
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
  if (run.events.length > 0) runs.set(runId, run);
  let total = 0;
  for (const r of runs.values()) total += r.events.length;
  for (const [id, r] of runs) {
    if (runs.size <= MAX_RUNS && total <= MAX_EVENTS) break;
    if (id === runId) continue;
    runs.delete(id);
    total -= r.events.length;
  }
  return run;
};
