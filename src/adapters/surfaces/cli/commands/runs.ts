import { stalledText, versionMissingText } from "../../../../runtime/liveness.js";
import type { LiveRunRow } from "../../../liveness.js";
import { InvalidRunsQuery, type RunsPage, runsPage } from "../../http/views.js";
import { usageError } from "../CliError.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import type { RunStatusFilter } from "../optionValues.js";
import { table } from "../table.js";

export interface RunsOptions {
  readonly db?: string;
  readonly id?: string;
  readonly status?: RunStatusFilter;
  readonly chat?: string;
  readonly agent?: string;
  readonly from?: string;
  readonly to?: string;
  /** `--from`/`--to` bound the last change, not the admission. */
  readonly updated?: boolean;
  /** At most this many (default 50, at most 500). */
  readonly limit?: number;
  readonly cursor?: string;
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

/** `holdfast runs`: one page of runs, newest first, searched by the run index (decision 0073). */
export const runsCommand = async (options: RunsOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    let page: RunsPage;
    const query = {
      ...(options.id === undefined ? {} : { id: options.id }),
      ...(options.status === undefined ? {} : { status: options.status }),
      ...(options.chat === undefined ? {} : { chat: options.chat }),
      ...(options.agent === undefined ? {} : { agent: options.agent }),
      ...(options.from === undefined ? {} : { from: options.from }),
      ...(options.to === undefined ? {} : { to: options.to }),
      ...(options.updated ? { time: "updated" as const } : {}),
    };
    try {
      page = await runsPage(journal, {
        ...query,
        limit: options.limit ?? (options.json && options.cursor === undefined ? 500 : 50),
        ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
      });
    } catch (error) {
      if (error instanceof InvalidRunsQuery)
        throw usageError(
          `--${error.field} ${error.message.slice(error.field.length + 2)}`,
          "see `holdfast runs --help`",
        );
      throw error;
    }
    const rows = page.runs;
    const more = [
      ...(page.next === null ? [] : [`older: --cursor ${page.next}`]),
      ...(page.prev === null ? [] : [`newer: --cursor ${page.prev}`]),
    ];
    if (options.json) {
      // One JSON array, as before paging: every matching run, oldest first — unless --limit or
      // --cursor asks for one page (newest first; `GET /api/runs` gives its `next` and `prev`).
      if (options.limit !== undefined || options.cursor !== undefined) {
        await io.out.json(rows);
        return 0;
      }
      const all = [...rows];
      for (let next = page.next; next !== null; ) {
        const more = await runsPage(journal, { ...query, limit: 500, cursor: next });
        all.push(...more.runs);
        next = more.next;
      }
      await io.out.json(all.toReversed());
      return 0;
    }
    const filtered =
      options.status !== undefined ||
      [options.id, options.chat, options.agent, options.from, options.to].some((o) => o !== undefined);
    if (rows.length === 0) {
      await io.out.line(
        filtered || options.cursor !== undefined
          ? `no ${options.status ?? ""}${options.status ? " " : ""}runs match in ${journal.location}`
          : `no runs in ${journal.location} yet; start one with \`holdfast demo\``,
      );
      return 0;
    }
    await io.out.line(
      table(
        ["run", "chat", "agent", "status", "owner", "calls", "updated"],
        // The newest page, its newest run last: next to the prompt, as before paging.
        rows
          .toReversed()
          .map((run) => [
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
    const total = page.totalCapped ? `more than ${page.total}` : String(page.total);
    await io.out.line(
      `${rows.length} of ${total} run${page.total === 1 ? "" : "s"}${filtered ? " matching" : ""}, the newest last${more.length > 0 ? `; ${more.join("; ")}` : ""}`,
    );
    if (page.held > 0) {
      const held = page.heldCapped ? `more than ${page.held}` : String(page.held);
      await io.out.line(
        `${held} held run${page.held === 1 && !page.heldCapped ? " waits" : "s wait"} for a person: \`holdfast show <runId>\` lists the decisions that apply`,
      );
    }
    const missing = rows.filter((run) => run.waitReason === "agent-version-missing").length;
    if (missing > 0) {
      await io.out.line(
        `${missing} run${missing === 1 ? " waits" : "s wait"} for ${missing === 1 ? "its" : "their"} agent's version (agent-version-missing): deploy a runtime that registers it beside the new one; nothing runs ${missing === 1 ? "it" : "them"} on other code`,
      );
    }
    if (page.stalled > 0) {
      const one = page.stalled === 1 && !page.stalledCapped;
      await io.out.line(
        `${page.stalledCapped ? `more than ${page.stalled}` : page.stalled} run${one ? " is" : "s are"} stalled: nothing runs ${one ? "it" : "them"} until a runtime with ${one ? "its" : "their"} agent opens this journal (\`holdfast show <runId>\` says which)`,
      );
    }
    return 0;
  });
