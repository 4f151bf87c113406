import type { RunRow } from "../projections/index.js";
import type { JournalReader } from "../runtime/Journal.js";
import {
  type LiveRuntime,
  livenessOf,
  liveRuntimesFor,
  type NextStep,
  otherVersionsLive,
  type RunLiveness,
  whatHappensNext,
} from "../runtime/liveness.js";
import { isWorkerDead } from "./localWorker.js";

/** A run row with who runs it now, as `runs --json`, `show --json` and the API give it. */
export type LiveRunRow = RunRow & RunLiveness;

/** What one read of the claims and the runtime registry tells about runs (decision 0052). */
export interface Liveness {
  /** The journal's clock at the read (ms since the epoch). */
  readonly now: number;
  /** The row with its owner, lease, last heartbeat and whether it is stalled. */
  of(run: RunRow): LiveRunRow;
  /** The live runtimes that have the agent. */
  runtimesFor(agent: string): LiveRuntime[];
  /**
   * The runs a live owner runs (a claim whose owner is neither gone nor past its lease): an active
   * run not among them is stalled. The run search leaves them out to find the stalled ones.
   */
  liveOwned(): string[];
  /**
   * What happens next to the run (decision 0053): `status` as it is after the action (default the
   * row's), with the live owner the read found.
   */
  next(run: RunRow, options?: { readonly status?: string; readonly hint?: string }): NextStep;
}

/**
 * Read the claims and the presence rows once; a reader only reports from them, it never claims.
 * A dead process of this host is seen at once (its id names it), another host's after its lease.
 */
export const readLiveness = async (reader: JournalReader): Promise<Liveness> => {
  const snapshot = await reader.liveness();
  const of = (run: RunRow): LiveRunRow => ({ ...run, ...livenessOf(run, snapshot, isWorkerDead) });
  const runtimesFor = (agent: string) => liveRuntimesFor(agent, snapshot, isWorkerDead);
  return {
    now: snapshot.now,
    of,
    runtimesFor,
    liveOwned: () =>
      snapshot.claims
        .filter(
          (c) =>
            !livenessOf({ runId: c.runId, status: "running", updatedAt: "" }, snapshot, isWorkerDead).stalled,
        )
        .map((c) => c.runId),
    next: (run, options = {}) => {
      const live = of(run);
      const status = options.status ?? run.status;
      // The owner counts only while it is live, and only for a status it executes.
      const owner =
        live.owner && !live.stalled ? live.owner : liveOwnerOfRequested(run, status, snapshot.claims, of);
      return whatHappensNext({
        status,
        agent: run.agent,
        owner,
        runtimes: runtimesFor(run.agent),
        // Whatever the status after the action: a decided v1 run beside v2 runtimes says so too.
        versionsLive: otherVersionsLive(run.agent, snapshot, isWorkerDead),
        ...(options.hint === undefined ? {} : { hint: options.hint }),
      });
    },
  };
};

/** A run with a cancel or pause requested keeps its projection status: its owner is read as for `running`. */
const liveOwnerOfRequested = (
  run: RunRow,
  status: string,
  claims: ReadonlyArray<{ readonly runId: string }>,
  of: (run: RunRow) => LiveRunRow,
) => {
  if (status !== "cancel-requested" && status !== "pause-requested") return null;
  if (!claims.some((c) => c.runId === run.runId)) return null;
  const live = of({ ...run, status: "running" });
  return live.stalled ? null : live.owner;
};
