import type { RecordedEvent } from "../../../events/index.js";
import {
  emptyFold,
  type RunFold,
  type RunStatus,
  runMachineFor,
  statusOf,
  step,
  TransitionRejected,
} from "../../../machines/index.js";
import { RebuildRefused } from "../../../runtime/errors.js";

const FINISHED: ReadonlySet<RunStatus> = new Set(["completed", "failed", "stopped", "cancelled"]);

/**
 * Folds every run stream through its recorded machine version while a rebuild reads the log in
 * position order, and refuses the first event a machine does not accept: the projections are a
 * fold of what the machines allow, never of an event the write path would have refused. A run
 * that finished keeps only its status, so memory follows the runs still open.
 */
export class RunFoldCheck {
  private readonly runs = new Map<string, RunFold | RunStatus>();

  accept(recorded: RecordedEvent): void {
    const { streamId, event } = recorded;
    if (!streamId.startsWith("run-")) return;
    const refuse = (reason: string) =>
      new RebuildRefused({
        streamId,
        version: recorded.version,
        position: recorded.position,
        eventType: event.type,
        reason,
      });
    let fold = this.runs.get(streamId);
    if (typeof fold === "string") throw refuse(`comes after the run ended (${fold})`);
    if (fold === undefined) {
      if (event.type !== "run.admitted")
        throw refuse("comes before run.admitted, which must start a run stream");
      if (!runMachineFor(event.machine))
        throw refuse(
          `names run machine version "${event.machine}", which this holdfast does not have (upgrade holdfast)`,
        );
      fold = emptyFold(event.machine);
    }
    try {
      fold = step(fold, event);
    } catch (error) {
      if (!(error instanceof TransitionRejected)) throw error;
      throw refuse(
        `is not accepted in state "${error.state}" of ${fold.snapshot.context.machine || "the run machine"}`,
      );
    }
    const status = statusOf(fold);
    this.runs.set(streamId, FINISHED.has(status) ? status : fold);
  }
}
