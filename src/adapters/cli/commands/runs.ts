import type { RunRow } from "../../../projections/index.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import type { RunStatusFilter } from "../optionValues.js";
import { table } from "../table.js";

export interface RunsOptions {
  readonly db?: string;
  readonly status?: RunStatusFilter;
  readonly json?: boolean;
}

const statusText = (run: RunRow): string =>
  run.needsAttention ? `${run.status} (needs attention)` : run.status;

/** `holdfast runs`: every run and its status, oldest first. */
export const runsCommand = async (options: RunsOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const rows = (await journal.projectionRows<RunRow>("runs"))
      .filter((run) => options.status === undefined || run.status === options.status)
      .toSorted((a, b) => a.admittedAt.localeCompare(b.admittedAt) || a.runId.localeCompare(b.runId));
    if (options.json) {
      await io.out.json(rows);
      return 0;
    }
    if (rows.length === 0) {
      await io.out.line(
        options.status
          ? `no ${options.status} runs in ${journal.location}`
          : `no runs in ${journal.location} yet; start one with \`holdfast demo\``,
      );
      return 0;
    }
    await io.out.line(
      table(
        ["run", "chat", "agent", "status", "calls", "updated"],
        rows.map((run) => [run.runId, run.chatId, run.agent, statusText(run), run.calls, run.updatedAt]),
      ),
    );
    const held = rows.filter((run) => run.status === "held").length;
    if (held > 0) {
      await io.out.line(
        `${held} held run${held === 1 ? " waits" : "s wait"} for a person: \`holdfast show <runId>\` lists the decisions that apply`,
      );
    }
    return 0;
  });
