import * as Data from "effect/Data";
import { makeMasker, runStreamId } from "../events/index.js";
import type { RunRow } from "../projections/index.js";
import { AgentRegistry } from "../runtime/agents.js";
import type { AnyAgentDef, AnyToolDef } from "../runtime/define.js";
import { InvalidInput } from "../runtime/errors.js";
import type { JournalReader, RunSearchKey } from "../runtime/Journal.js";
import { type ReplayDivergence, type RunReplay, replayRun } from "../runtime/replay.js";
import { openStoreReader } from "./store.js";

export type { ReplayCall, ReplayDivergence, RunReplay } from "../runtime/replay.js";

/** What `replayRuns` takes: the current agent code, the journal, and which runs. */
export interface ReplayOptions {
  /** The agents as the code now defines them (each run is replayed by the version that admitted it). */
  readonly agents: ReadonlyArray<AnyAgentDef>;
  /** The tools the agents call by name. */
  readonly tools?: ReadonlyArray<AnyToolDef>;
  /** The secrets the runtime masks (law 8): arguments in the report are masked with them. */
  readonly secrets?: Readonly<Record<string, string>>;
  /** The journal: a file path or a `postgres://` URL (default `HOLDFAST_STORE`, else `.holdfast/journal.db`). */
  readonly store?: string;
  /** The same as `store`, as the CLI names it. */
  readonly db?: string;
  /** Only these runs (not together with `since` or `status`); an id the journal does not hold is refused. */
  readonly runIds?: ReadonlyArray<string>;
  /** Only runs admitted at this time or after (ISO 8601, or a Date). */
  readonly since?: string | Date;
  /** Only runs with one of these statuses (as `holdfast runs` shows them). Default: every run. */
  readonly status?: ReadonlyArray<RunRow["status"]> | RunRow["status"];
  /** How long one run's agent may take (default 30 s). */
  readonly timeoutMs?: number;
  /** Told after each run: how many are done of how many. */
  readonly onProgress?: (progress: {
    readonly done: number;
    readonly total: number;
    readonly run: RunReplay;
  }) => void;
}

/** What `replayRuns` found. */
export interface ReplayReport {
  /** Each run replayed: those asked for by id in that order, otherwise newest first. */
  readonly runs: ReadonlyArray<RunReplay>;
  /** How many runs diverged (0: the code re-executes every run as recorded). */
  readonly divergences: number;
  /** How many could not be replayed at all. */
  readonly errors: number;
}

/** The runs to replay, newest first, a page of run rows at a time; and how many (up to 10,001). */
const selectRuns = async (
  journal: JournalReader,
  options: ReplayOptions,
): Promise<{ readonly total: number; readonly runIds: AsyncIterable<string> }> => {
  if (options.runIds) {
    if (options.status !== undefined || options.since !== undefined)
      throw new InvalidInput({
        what: "runIds",
        detail: "give the runs by id, or choose them with status/since, not both",
      });
    const ids = [...options.runIds];
    for (const id of ids)
      if ((await journal.streamHead(runStreamId(id))) === null)
        throw new InvalidInput({
          what: "run",
          detail: `the journal ${journal.location} has no run ${id}; \`holdfast runs\` lists the runs it holds`,
        });
    return {
      total: ids.length,
      runIds: (async function* () {
        yield* ids;
      })(),
    };
  }
  let from: string | undefined;
  if (options.since !== undefined) {
    const since = new Date(options.since);
    if (!Number.isFinite(since.getTime()))
      throw new InvalidInput({
        what: "since",
        detail: `${String(options.since)} is not a time; give an ISO 8601 time such as 2026-12-05T06:00:00Z`,
      });
    from = since.toISOString();
  }
  const statuses =
    options.status === undefined
      ? undefined
      : Array.isArray(options.status)
        ? options.status
        : [options.status];
  const search = {
    ...(from === undefined ? {} : { from }),
    ...(statuses === undefined ? {} : { statuses }),
  };
  const [total = 0] = await journal.countRuns([{ ...search, limit: TOTAL_CAP }]);
  async function* pages(): AsyncIterable<string> {
    let after: RunSearchKey | undefined;
    for (;;) {
      const page = await journal.searchRuns({ ...search, limit: PAGE, ...(after ? { after } : {}) });
      for (const { row } of page.rows) yield row.runId;
      after = page.rows.at(-1)?.key;
      if (!page.more || !after) return;
    }
  }
  return { total, runIds: pages() };
};

/** Runs counted up to this many (and one more) for the total a replay announces. */
const TOTAL_CAP = 10_000;

/** Run rows read per page when choosing the runs. */
const PAGE = 200;

/**
 * Replay recorded runs against the current agent code before a deploy (decision 0082): each run is
 * re-executed with every call served from the journal and no effect allowed, and reported as
 * `same`, `continues-live` (the code reached a call past what was recorded — not a failure),
 * `divergence` (the first call, by seq, the code now makes differently, both arguments masked) or
 * `error`. The journal is opened read-only and never written; one run is in memory at a time.
 *
 * @example
 * const report = await replayRuns({ agents, tools, db: "evidence/journal.db", status: ["held", "waiting"] });
 * if (report.divergences > 0) process.exitCode = 1;
 */
export const replayRuns = async (options: ReplayOptions): Promise<ReplayReport> => {
  const agents = new AgentRegistry(options.agents);
  const tools = new Map((options.tools ?? []).map((tool) => [tool.name, tool]));
  const masker = makeMasker(options.secrets ?? {});
  const journal = await openStoreReader(options.store ?? options.db);
  try {
    const { total, runIds } = await selectRuns(journal, options);
    const runs: RunReplay[] = [];
    for await (const runId of runIds) {
      const run = await replayRun(journal, runId, {
        agents,
        tools,
        masker,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      });
      runs.push(run);
      options.onProgress?.({ done: runs.length, total: Math.max(total, runs.length), run });
    }
    return {
      runs,
      divergences: runs.filter((r) => r.result === "divergence").length,
      errors: runs.filter((r) => r.result === "error").length,
    };
  } finally {
    await journal.close();
  }
};

const json = (value: unknown): string => JSON.stringify(value) ?? "undefined";

const divergenceText = (d: ReplayDivergence): string[] => [
  `  at call ${d.seq} (${d.callId}): ${d.detail}`,
  `    recorded: ${d.recorded ? `${d.recorded.kind} "${d.recorded.name}" ${d.recorded.fingerprint.slice(0, 12)} ${json(d.recorded.args)}` : "(none)"}`,
  `    now:      ${d.now ? `${d.now.kind} "${d.now.name}" ${d.now.fingerprint.slice(0, 12)} ${json(d.now.args)}` : "(none)"}`,
];

/** The report as lines of text: one per run, and each divergence with both calls. */
export const replayReportText = (report: ReplayReport): string[] => report.runs.flatMap(runText);

const runText = (run: RunReplay): string[] => {
  if (run.result === "same") return [`${run.runId} ${run.agent}: same (${run.calls} calls)`];
  if (run.result === "continues-live")
    return [`${run.runId} ${run.agent}: continues live from call ${run.seq} (${run.detail})`];
  if (run.result === "error") return [`${run.runId} ${run.agent}: not replayed: ${run.detail}`];
  return [`${run.runId} ${run.agent}: DIVERGES`, ...divergenceText(run.divergence)];
};

/** Thrown by {@link assertReplayClean}: the report, and a message that shows every divergence. */
export class ReplayDiverged extends Data.TaggedError("ReplayDiverged")<{ readonly report: ReplayReport }> {
  override get message(): string {
    const bad = {
      ...this.report,
      runs: this.report.runs.filter((r) => r.result === "divergence" || r.result === "error"),
    };
    return `${this.report.divergences} of ${this.report.runs.length} replayed runs diverge from the current code, ${this.report.errors} could not be replayed:\n${replayReportText(bad).join("\n")}\nrestore the code the runs were recorded with, register the change as a new agent version, or decide the runs before deploying`;
  }
}

/**
 * For a test suite (vitest, node:test): replay the runs and throw {@link ReplayDiverged}, with a
 * readable report, when any run diverges or cannot be replayed. Resolves with the report otherwise.
 *
 * @example
 * test("recorded runs replay with this code", () => assertReplayClean({ agents, tools, db: "test/golden/journal.db" }));
 */
export const assertReplayClean = async (options: ReplayOptions): Promise<ReplayReport> => {
  const report = await replayRuns(options);
  if (report.divergences > 0 || report.errors > 0) throw new ReplayDiverged({ report });
  return report;
};
