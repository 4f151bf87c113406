import { subscribe } from "../../../../runtime/subscribe.js";
import { eventLine, shortHash } from "../eventFormat.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";

export interface EventsOptions {
  readonly db?: string;
  readonly after: number;
  readonly limit?: number;
  readonly json?: boolean;
  /** Keep going: print new events as they are committed, until interrupted. */
  readonly follow?: boolean;
}

/** Events are read this many at a time, so a long journal streams through bounded memory. */
export const EVENTS_BATCH = 500;

/** `holdfast events`: every event after a position, in position order. */
export const eventsCommand = async (options: EventsOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    let after = options.after;
    let remaining = options.limit ?? Number.POSITIVE_INFINITY;
    let printed = 0;
    while (remaining > 0) {
      const limit = Math.min(EVENTS_BATCH, remaining);
      const batch = await journal.readAll({ after, limit });
      if (!options.json && printed === 0 && batch.length > 0) {
        await io.out.line(
          `${"position".padStart(8)}  ${"stream@version".padEnd(34)} ${"type".padEnd(22)} hash`,
        );
      }
      for (const recorded of batch) {
        if (options.json) {
          await io.out.line(JSON.stringify(eventLine(recorded)));
        } else {
          const where = `${recorded.streamId}@${recorded.version}`;
          await io.out.line(
            `${String(recorded.position).padStart(8)}  ${where.padEnd(34)} ${recorded.event.type.padEnd(22)} ${shortHash(recorded.hash)}`,
          );
        }
      }
      printed += batch.length;
      remaining -= batch.length;
      const last = batch.at(-1);
      if (last) after = last.position;
      if (!last || batch.length < limit) break;
    }
    if (options.follow) {
      // The same cursor continues live: no gap and no duplicate between what was printed and what follows.
      const live = subscribe(journal, { after, bufferSize: EVENTS_BATCH });
      const stop = () => void live.return?.();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      try {
        for await (const recorded of live) {
          if (options.json) await io.out.line(JSON.stringify(eventLine(recorded)));
          else {
            const where = `${recorded.streamId}@${recorded.version}`;
            await io.out.line(
              `${String(recorded.position).padStart(8)}  ${where.padEnd(34)} ${recorded.event.type.padEnd(22)} ${shortHash(recorded.hash)}`,
            );
          }
          if (--remaining <= 0) break;
        }
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        await live.return?.();
      }
      return 0;
    }
    if (!options.json && printed === 0) await io.out.line(`no events after position ${options.after}`);
    return 0;
  });
