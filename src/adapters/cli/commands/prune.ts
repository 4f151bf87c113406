import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";

export interface PruneOptions {
  readonly db?: string;
  readonly keepRuns: number;
  readonly keepDays: number;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/**
 * `holdfast prune`: remove finished runs (completed, failed, stopped) beyond the newest
 * `--keep-runs` and older than `--keep-days`; never an active, held or needs-attention run.
 * `retention.pruned` records each removed stream's head first, so the audit still verifies.
 */
export const pruneCommand = async (options: PruneOptions, io: Io): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    const report = await journal.prune({
      keepRuns: options.keepRuns,
      keepDays: options.keepDays,
      dryRun: options.dryRun ?? false,
    });
    if (options.json) {
      await io.out.json({
        journal: journal.location,
        keepRuns: options.keepRuns,
        keepDays: options.keepDays,
        ...report,
      });
      return 0;
    }
    const verb = report.dryRun ? "would remove" : "removed";
    if (report.pruned.length === 0) {
      await io.out.line(
        `nothing to prune: ${report.kept} finished run${report.kept === 1 ? "" : "s"} kept (newest ${options.keepRuns}, or finished within ${options.keepDays} days)`,
      );
    } else {
      await io.out.line(
        table(
          ["run", "chat", "status", "events", "finished"],
          report.pruned.map((r) => [r.runId, r.chatId, r.status, r.version, r.finishedAt]),
        ),
      );
      await io.out.line(
        `${verb} ${report.pruned.length} finished run${report.pruned.length === 1 ? "" : "s"}; kept ${report.kept} (newest ${options.keepRuns}, or finished within ${options.keepDays} days)`,
      );
    }
    for (const s of report.skipped) await io.out.line(`left alone: run ${s.runId}: ${s.reason}`);
    if (report.recorded)
      await io.out.line(
        `recorded retention.pruned as system@${report.recorded.version}; the head digest changed: take a new anchor with \`holdfast audit\``,
      );
    else if (report.dryRun && report.pruned.length > 0)
      await io.out.line("dry run: nothing was written; run again without --dry-run to remove them");
    return 0;
  });
