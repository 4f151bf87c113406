import type { RunRow } from "../../../projections/index.js";
import { stalledText, versionMissingText } from "../../../runtime/liveness.js";
import { type LiveRunRow, readLiveness } from "../../liveness.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import type { RunStatusFilter } from "../optionValues.js";
import { table } from "../table.js";

export interface RunsOptions {
  readonly db?: string;
  readonly status?: RunStatusFilter;
  readonly json?: boolean;
}

const statusText = (run: LiveRunRow): string =>
  run.status === "waiting" && run.waiting?.wait === "approval"
    ? "awaiting approval"
    : run.waitReason === "agent-version-missing"
      ? versionMissingText(run)
      : run.stalled
        ? stalledText(run.agent)
        : run.needsAttention
          ? `${run.status} (needs attention)`
          : run.status;

/** Who runs it: host and pid (the full worker id is in `--json`). */
const ownerColumn = (run: LiveRunRow): string =>
  run.owner ? (run.owner.host !== null ? `${run.owner.host} pid ${run.owner.pid}` : run.owner.workerId) : "";

const matches = (run: LiveRunRow, status: RunStatusFilter | undefined): boolean =>
  status === undefined || (status === "stalled" ? run.stalled : run.status === status);

/** `holdfast runs`: every run, its status and who runs it, oldest first. */
export const runsCommand = async (options: RunsOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const liveness = await readLiveness(journal);
    const rows = (await journal.projectionRows<RunRow>("runs"))
      .map(liveness.of)
      .filter((run) => matches(run, options.status))
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
        ["run", "chat", "agent", "status", "owner", "calls", "updated"],
        rows.map((run) => [
          run.runId,
          run.chatId,
          run.agent,
          statusText(run),
          ownerColumn(run),
          run.calls,
          run.updatedAt,
        ]),
      ),
    );
    const held = rows.filter((run) => run.status === "held").length;
    if (held > 0) {
      await io.out.line(
        `${held} held run${held === 1 ? " waits" : "s wait"} for a person: \`holdfast show <runId>\` lists the decisions that apply`,
      );
    }
    const missing = rows.filter((run) => run.waitReason === "agent-version-missing").length;
    if (missing > 0) {
      await io.out.line(
        `${missing} run${missing === 1 ? " waits" : "s wait"} for ${missing === 1 ? "its" : "their"} agent's version (agent-version-missing): deploy a runtime that registers it beside the new one; nothing runs ${missing === 1 ? "it" : "them"} on other code`,
      );
    }
    const stalled = rows.filter((run) => run.stalled).length;
    if (stalled > 0) {
      await io.out.line(
        `${stalled} run${stalled === 1 ? " is" : "s are"} stalled: nothing runs ${stalled === 1 ? "it" : "them"} until a runtime with ${stalled === 1 ? "its" : "their"} agent opens this journal (\`holdfast show <runId>\` says which)`,
      );
    }
    return 0;
  });
