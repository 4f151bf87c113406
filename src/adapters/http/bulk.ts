import { runStreamId } from "../../events/index.js";
import type { RunRow } from "../../projections/index.js";
import type { JournalReader } from "../../runtime/Journal.js";
import type { NextStep } from "../../runtime/liveness.js";
import { errorReply } from "./errors.js";
import type { OperatorPort } from "./types.js";
import { nextAfter, runView } from "./views.js";

/**
 * Bulk actions on a selection of runs (decision 0081): each run is acted on alone, through the same
 * runtime call as its single action, on the version the person looked at — a run that changed since
 * is refused alone, and the others go on.
 */
export const BULK_ACTIONS = {
  stop: "Stop held runs",
  cancel: "Cancel runs",
  retry: "Grant one more attempt",
} as const;

/** `stop` (the stop decision of a held run), `cancel`, or `retry` (one more attempt for its failed call). */
export type BulkAction = keyof typeof BULK_ACTIONS;

/** At most this many runs per bulk request: each is its own write. */
export const MAX_BULK_RUNS = 100;

/** A run of the selection and the stream version it was looked at on. */
export interface BulkTarget {
  readonly runId: string;
  readonly basedOnVersion: number;
}

/** A bulk action: what, on which runs, who asks, and why (a note is required). */
export interface BulkRequest {
  readonly action: BulkAction;
  readonly runs: ReadonlyArray<BulkTarget>;
  readonly by: string;
  readonly note: string;
}

/** What became of one run of a bulk action: `done` wrote its action; otherwise nothing was written for it. */
export interface BulkResult {
  readonly runId: string;
  readonly basedOnVersion: number;
  readonly done: boolean;
  /** `recorded`, or why not: `stale` (the run changed since), `not-held`, `refused`, … */
  readonly code: string;
  readonly message: string;
  /** The run's stream version after the action (null when nothing was written). */
  readonly version: number | null;
  /** The run's status now, and what happens next (decision 0053); null when it is not known. */
  readonly status: string | null;
  readonly next: NextStep | null;
}

/** A bulk request that cannot be carried out at all: what was wrong, and what to do. */
export class InvalidBulkRequest extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** Refuse a bulk request whose shape is wrong, before anything is written. */
export const checkBulkRequest = (request: BulkRequest): void => {
  if (!(request.action in BULK_ACTIONS))
    throw new InvalidBulkRequest("action", `choose an action: ${Object.keys(BULK_ACTIONS).join(", ")}`);
  if (request.by.trim() === "") throw new InvalidBulkRequest("by", "say who acts (by must not be empty)");
  if (request.note.trim() === "")
    throw new InvalidBulkRequest("note", "a bulk action needs a note: say why these runs, all together");
  if (request.runs.length === 0) throw new InvalidBulkRequest("runs", "select at least one run");
  if (request.runs.length > MAX_BULK_RUNS)
    throw new InvalidBulkRequest(
      "runs",
      `${request.runs.length} runs selected; at most ${MAX_BULK_RUNS} at once: narrow the selection`,
    );
  const seen = new Set<string>();
  for (const { runId } of request.runs) {
    if (seen.has(runId)) throw new InvalidBulkRequest("runs", `run ${runId} is selected twice`);
    seen.add(runId);
  }
};

/**
 * Each run's stream version now (its head): what a decision is based on. The runs row's `version`
 * is not it — events that change nothing in the row (a signal on a held run) leave it behind.
 */
export const runVersions = async (
  reader: JournalReader,
  runIds: ReadonlyArray<string>,
): Promise<ReadonlyMap<string, number>> => {
  if (runIds.length === 0) return new Map();
  const heads = await reader.streamHeads(runIds.map(runStreamId));
  const byStream = new Map(heads.map((h) => [h.streamId, h.version]));
  return new Map(
    runIds.flatMap((runId) => {
      const version = byStream.get(runStreamId(runId));
      return version === undefined ? [] : [[runId, version] as const];
    }),
  );
};

/**
 * The definitely failed calls of a held run, which a retry grant is for (a call in doubt takes a
 * decision instead): read from the run's calls, since a hold reason's code does not tell them apart.
 */
export const failedCalls = async (reader: JournalReader, runId: string): Promise<ReadonlyArray<string>> =>
  (await runView(reader, runId)).calls.flatMap((c) => (c.status === "failed" ? [c.callId] : []));

/**
 * What the action would do to a run as the journal has it now: said on the confirm page before
 * the click. `ok: false` says it will be refused and why.
 */
export const bulkPreview = (
  action: BulkAction,
  target: BulkTarget,
  row: RunRow | null,
  version: number | undefined,
  failed: ReadonlyArray<string> = [],
): { readonly ok: boolean; readonly text: string } => {
  if (!row || version === undefined) return { ok: false, text: `refused: there is no run ${target.runId}` };
  if (version !== target.basedOnVersion)
    return {
      ok: false,
      text: `refused: it changed since you looked at it (version ${target.basedOnVersion}; it is ${row.status} at version ${version} now): look at it again`,
    };
  const reasons = row.heldReasons.map((r) => `${r.code}${r.callId ? ` ${r.callId}` : ""}`).join(", ");
  switch (action) {
    case "stop":
      return row.status === "held"
        ? {
            ok: true,
            text: `the stop decision: the run ends stopped; its call(s) in doubt (${reasons}) stay unknown in the journal and never run again`,
          }
        : { ok: false, text: `refused: it is ${row.status}, not held; there is nothing to stop` };
    case "cancel":
      if (["completed", "failed", "stopped", "cancelled"].includes(row.status))
        return { ok: false, text: `nothing: it already ended (${row.status})` };
      if (row.status === "held")
        return { ok: true, text: `held: cancelled by the stop decision; its call(s) in doubt stay unknown` };
      if (row.status === "paused" || row.status === "waiting")
        return { ok: true, text: `cancelled at once (it is ${row.status}; nothing runs)` };
      return {
        ok: true,
        text: "cancel requested: its owner aborts its calls in flight and it ends cancelled (a call that does not settle holds it cancelled-in-doubt)",
      };
    case "retry": {
      if (row.status !== "held")
        return { ok: false, text: `refused: it is ${row.status}, not held; nothing to retry` };
      const calls = failed;
      if (calls.length !== 1)
        return {
          ok: false,
          text:
            calls.length === 0
              ? `refused: no definitely failed call (${reasons || "no reason"}); a call in doubt needs a decision, not a retry`
              : `refused: ${calls.length} failed calls (${calls.join(", ")}); grant each on the run's page`,
        };
      return {
        ok: true,
        text: `one more attempt for ${calls[0]}: the run continues where its agent runs`,
      };
    }
  }
};

const refused = (target: BulkTarget, code: string, message: string): BulkResult => ({
  ...target,
  done: false,
  code,
  message,
  version: null,
  status: null,
  next: null,
});

/**
 * Carry a bulk action out, run by run, each on its own version (law 9): `stop` is the stop
 * decision (`operator.decide`), `cancel` is `operator.cancel`, `retry` grants one attempt to the
 * run's one definitely failed call (`operator.grantRetry`). A run refused does not stop the others.
 *
 * @example
 * const results = await runBulk(reader, operator, {
 *   action: "stop", runs: [{ runId, basedOnVersion: 7 }], by: "ada", note: "the provider is down",
 * });
 */
export const runBulk = async (
  reader: JournalReader,
  operator: OperatorPort,
  request: BulkRequest,
): Promise<ReadonlyArray<BulkResult>> => {
  checkBulkRequest(request);
  const by = request.by.trim();
  const note = request.note.trim();
  const results: BulkResult[] = [];
  for (const target of request.runs) {
    const { runId, basedOnVersion } = target;
    try {
      let version: number | null;
      let message: string;
      let status: string | undefined;
      if (request.action === "stop") {
        const outcome = await operator.decide(runId, {
          basedOnVersion,
          decidedBy: by,
          decision: "stop",
          note,
        });
        outcome.result.catch(() => undefined);
        version = outcome.version;
        message = `stopped by decision at version ${basedOnVersion}`;
      } else if (request.action === "cancel") {
        const outcome = await operator.cancel(runId, { by, note, basedOnVersion });
        if (!outcome.accepted) {
          results.push(
            refused(
              target,
              outcome.stale ? "stale" : outcome.status === "pruned" ? "pruned" : "refused",
              outcome.message,
            ),
          );
          continue;
        }
        version = null;
        message = outcome.message;
        status = outcome.status;
      } else {
        const row = await reader.projection<RunRow>("runs", runId);
        const calls = row ? await failedCalls(reader, runId) : [];
        if (calls.length !== 1) {
          results.push(
            refused(
              target,
              "refused",
              row
                ? bulkPreview("retry", target, row, basedOnVersion, calls).text.replace(/^refused: /, "")
                : `there is no run ${runId}`,
            ),
          );
          continue;
        }
        const outcome = await operator.grantRetry(runId, calls[0]!, {
          attempts: 1,
          grantedBy: by,
          note,
          basedOnVersion,
        });
        outcome.result.catch(() => undefined);
        version = outcome.version;
        message = `one more attempt for ${calls[0]} granted at version ${basedOnVersion}`;
      }
      const after = await nextAfter(reader, runId, status);
      if (version === null) version = (await runVersions(reader, [runId])).get(runId) ?? null;
      results.push({ ...target, done: true, code: "recorded", message, version, ...after });
    } catch (error) {
      const reply = errorReply(error);
      if (reply.status === 500) console.error("holdfast serve:", error);
      const code = String(reply.body.error.code);
      results.push(
        refused(
          target,
          code === "stale-decision" ? "stale" : code,
          code === "stale-decision"
            ? `it changed since you looked at it (version ${basedOnVersion}; it is at version ${String(reply.body.error.currentVersion ?? "?")} now): look at it again`
            : String(reply.body.error.message),
        ),
      );
    }
  }
  return results;
};
