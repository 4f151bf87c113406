import { runStreamId } from "../../../events/index.js";
import { blockingCalls, contextOf, foldRun, type RunContext } from "../../../machines/index.js";
import type { RunRow } from "../../../projections/index.js";
import type { JournalReader } from "../../../runtime/Journal.js";
import type { NextStep } from "../../../runtime/liveness.js";
import { errorReply } from "./errors.js";
import type { OperatorPort } from "./types.js";
import { nextAfter } from "./views.js";

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
  checkBulkSelection(request.runs);
};

/** Refuse a selection that is empty, larger than {@link MAX_BULK_RUNS}, or names a run twice. */
export const checkBulkSelection = (runs: ReadonlyArray<Pick<BulkTarget, "runId">>): void => {
  if (runs.length === 0) throw new InvalidBulkRequest("runs", "select at least one run");
  if (runs.length > MAX_BULK_RUNS)
    throw new InvalidBulkRequest(
      "runs",
      `${runs.length} runs selected; at most ${MAX_BULK_RUNS} at once: narrow the selection`,
    );
  const seen = new Set<string>();
  for (const { runId } of runs) {
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
 * What a retry grant on a run would be for: the definitely failed calls its hold names (a
 * `decision-needed` reason whose call is `failed` — not a failed call its agent caught and went
 * past), and its calls in doubt, which a grant cannot resume past (each needs a decision first).
 */
export interface RetryTargets {
  readonly failed: ReadonlyArray<string>;
  readonly inDoubt: ReadonlyArray<string>;
}

/** A run's {@link RetryTargets}, read from its stream (none when it has no stream, or cannot be folded). */
export const retryTargets = async (reader: JournalReader, runId: string): Promise<RetryTargets> => {
  const events = await reader.readStream(runStreamId(runId));
  let context: RunContext;
  try {
    context = contextOf(foldRun(events.map((e) => e.event)));
  } catch {
    return { failed: [], inDoubt: [] };
  }
  if (events.length === 0) return { failed: [], inDoubt: [] };
  const failed = new Set<string>();
  for (const reason of context.heldReasons) {
    if (reason.code !== "decision-needed" || reason.callId === undefined) continue;
    if (context.calls.get(reason.callId)?.status === "failed") failed.add(reason.callId);
  }
  return { failed: [...failed], inDoubt: blockingCalls(context).map((c) => c.callId) };
};

/**
 * What the action would do to a run as the journal has it now: said on the confirm page before
 * the click. `ok: false` says it will be refused and why.
 */
export const bulkPreview = (
  action: BulkAction,
  target: BulkTarget,
  row: RunRow | null,
  version: number | undefined,
  retry: RetryTargets = { failed: [], inDoubt: [] },
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
      if (retry.inDoubt.length > 0)
        return {
          ok: false,
          text: `refused: call(s) in doubt (${retry.inDoubt.join(", ")}) need a decision first, not a retry: use its page`,
        };
      const calls = retry.failed;
      if (calls.length !== 1)
        return {
          ok: false,
          text:
            calls.length === 0
              ? `refused: it is not held for a definitely failed call (${reasons || "no reason"}); nothing to retry`
              : `refused: held for ${calls.length} failed calls (${calls.join(", ")}); grant each on the run's page`,
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
    let written: Written | BulkResult;
    try {
      written = await writeOne(reader, operator, request.action, target, by, note);
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
      continue;
    }
    if ("done" in written) {
      results.push(written);
      continue;
    }
    // Recorded: said so now, whatever the reads that follow do.
    const recorded: BulkResult = {
      ...target,
      done: true,
      code: "recorded",
      message: written.message,
      version: written.version,
      status: written.status ?? null,
      next: null,
    };
    try {
      const after = await nextAfter(reader, runId, written.status);
      const version = written.version ?? (await runVersions(reader, [runId])).get(runId) ?? null;
      results.push({ ...recorded, version, ...after });
    } catch (error) {
      console.error("holdfast serve:", error);
      results.push({
        ...recorded,
        message: `${written.message}; could not read what follows (the server's log says why): open the run's page`,
      });
    }
  }
  return results;
};

/** What one run's write left: its version (null: read after) and status when the action says it. */
interface Written {
  readonly version: number | null;
  readonly message: string;
  readonly status?: string;
}

/** Carry the action out on one run: what was written, or the run's refusal (nothing written). */
const writeOne = async (
  reader: JournalReader,
  operator: OperatorPort,
  action: BulkAction,
  target: BulkTarget,
  by: string,
  note: string,
): Promise<Written | BulkResult> => {
  const { runId, basedOnVersion } = target;
  if (action === "stop") {
    const outcome = await operator.decide(runId, { basedOnVersion, decidedBy: by, decision: "stop", note });
    outcome.result.catch(() => undefined);
    return { version: outcome.version, message: `stopped by decision at version ${basedOnVersion}` };
  }
  if (action === "cancel") {
    const outcome = await operator.cancel(runId, { by, note, basedOnVersion });
    if (!outcome.accepted)
      return refused(
        target,
        outcome.stale ? "stale" : outcome.status === "pruned" ? "pruned" : "refused",
        outcome.message,
      );
    return { version: null, message: outcome.message, status: outcome.status };
  }
  const row = await reader.projection<RunRow>("runs", runId);
  const targets = row ? await retryTargets(reader, runId) : { failed: [], inDoubt: [] };
  const preview = row ? bulkPreview("retry", target, row, basedOnVersion, targets) : null;
  if (!preview?.ok)
    return refused(
      target,
      "refused",
      preview ? preview.text.replace(/^refused: /, "") : `there is no run ${runId}`,
    );
  const callId = targets.failed[0]!;
  const outcome = await operator.grantRetry(runId, callId, {
    attempts: 1,
    grantedBy: by,
    note,
    basedOnVersion,
  });
  outcome.result.catch(() => undefined);
  return {
    version: outcome.version,
    message: `one more attempt for ${callId} granted at version ${basedOnVersion}`,
  };
};
