import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";

export interface RebuildOptions {
  readonly db?: string;
  readonly json?: boolean;
}

/**
 * `holdfast rebuild`: recompute every inline projection from position 0 and replace the stored
 * rows, in one write transaction. The projections are caches of the events (law 12); a rebuild
 * repairs a cache, never an event.
 */
export const rebuildCommand = async (options: RebuildOptions, io: Io): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    const projections = await journal.rebuildProjections();
    const changed = projections.filter((p) => p.changed).map((p) => p.name);
    if (options.json) {
      await io.out.json({ journal: journal.location, projections, changed: changed.length > 0 });
      return 0;
    }
    await io.out.line(
      table(
        ["projection", "rows", "changed"],
        projections.map((p) => [p.name, p.rows, p.changed ? "yes" : "no"]),
      ),
    );
    await io.out.line(
      changed.length === 0
        ? "every projection already equalled the events; nothing changed"
        : `rebuilt from the events: ${changed.join(", ")} differed and were replaced (run \`holdfast audit\` to see whether anything else is wrong)`,
    );
    return 0;
  });
