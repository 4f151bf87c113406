import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";

export interface PruneOptions {
  readonly db?: string;
  readonly keepRuns: number;
  readonly keepDays: number;
  readonly batch?: number;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/** A progress line on stderr every this many removed runs (a long prune is seen to move). */
const PROGRESS_EVERY = 1000;

/**
 * `holdfast prune`: remove finished runs (completed, failed, stopped) beyond the newest
 * `--keep-runs` and older than `--keep-days`; never an active, held or needs-attention run.
 * `retention.pruned` records each removed stream's head first, so the audit still verifies. Runs go
 * in batches of `--batch`, one transaction each; progress goes to stderr.
 */
export const pruneCommand = async (
  options: PruneOptions,
  io: Io,
  stderr: NodeJS.WritableStream,
): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    let told = 0;
    const report = await journal.prune({
      keepRuns: options.keepRuns,
      keepDays: options.keepDays,
      dryRun: options.dryRun ?? false,
      ...(options.batch === undefined ? {} : { batchRuns: options.batch }),
      onBatch: ({ pruned, selected }) => {
        if (pruned - told < PROGRESS_EVERY) return;
        told = pruned;
        stderr.write(`prune: ${pruned} of ${selected} runs removed…\n`);
      },
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
    const first = report.records[0];
    if (report.recorded && first && report.records.length > 1)
      await io.out.line(
        `recorded retention.pruned as system@${first.version} … system@${report.recorded.version} (${report.records.length} batches); the head digest changed: take a new anchor with \`holdfast audit\``,
      );
    else if (report.recorded)
      await io.out.line(
        `recorded retention.pruned as system@${report.recorded.version}; the head digest changed: take a new anchor with \`holdfast audit\``,
      );
    else if (report.dryRun && report.pruned.length > 0)
      await io.out.line("dry run: nothing was written; run again without --dry-run to remove them");
    return 0;
  });
