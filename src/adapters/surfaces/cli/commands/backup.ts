import { backupJournal } from "../../../stores/libsql/backup.js";
import { LibsqlJournal } from "../../../stores/libsql/LibsqlJournal.js";
import { CliError, ExitCode } from "../CliError.js";
import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";

export interface BackupOptions {
  readonly db?: string;
  readonly json?: boolean;
}

/**
 * `holdfast backup PATH`: a verified copy of a libSQL journal (`VACUUM INTO`, mode 0600, never over
 * an existing file), integrity-checked and audited before success is reported and recorded.
 */
export const backupCommand = async (
  target: string,
  options: BackupOptions,
  io: Io,
  stderr: NodeJS.WritableStream,
): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    if (!(journal instanceof LibsqlJournal)) {
      throw new CliError(
        ExitCode.failed,
        `holdfast backup copies libSQL journal files; ${journal.location} is a PostgreSQL journal`,
        "back it up with PostgreSQL's own tools, e.g. `pg_dump --schema=<schema> --format=custom`, then audit a restored copy with `holdfast audit`",
      );
    }
    const report = await backupJournal(journal, target, {
      onProgress: (events) => {
        stderr.write(`backup: audited ${events} events of the copy…\n`);
      },
    });
    if (options.json) {
      const { audit, ...rest } = report;
      await io.out.json({
        journal: journal.location,
        ...rest,
        headDigest: audit.headDigest,
        lastPosition: audit.lastPosition,
        events: audit.events,
        clean: audit.clean,
      });
      return ExitCode.ok;
    }
    await io.out.lines([
      `backup written: ${report.path} (${report.bytes} bytes, mode ${report.mode})`,
      `verified: integrity check ok; audit clean over ${report.audit.events} events`,
      `head digest: ${report.audit.headDigest}@${report.audit.lastPosition}`,
      `recorded backup.written as system@${report.recorded.version} in ${journal.location}`,
    ]);
    return ExitCode.ok;
  });
