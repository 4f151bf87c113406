import { Data } from "effect";
import { initialTransition, type SnapshotFrom, transition } from "xstate";
import type { AnyEvent } from "../events/index.js";
import type { RunContext, RunStatus } from "./context.js";
import { runMachineFor } from "./registry.js";
import type { RunMachine } from "./run.js";

export type RunSnapshot = SnapshotFrom<RunMachine>;

/** The machine refused an event: the laws forbid it in the run's current state. */
export class TransitionRejected extends Data.TaggedError("TransitionRejected")<{
  readonly runId: string;
  readonly version: number;
  readonly eventType: string;
  readonly state: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `run ${this.runId}: event ${this.eventType} (version ${this.version}) is not accepted in state "${this.state}": ${this.reason}`;
  }
}

/** A run as folded from its events: the machine snapshot plus the stream version it reflects. */
export interface RunFold {
  readonly snapshot: RunSnapshot;
  readonly machine: RunMachine;
}

export const statusOf = (fold: RunFold): RunStatus => fold.snapshot.value as RunStatus;
export const contextOf = (fold: RunFold): RunContext => fold.snapshot.context;

/** The state before any event: only `run.admitted` is accepted. */
export const emptyFold = (machineVersion: string): RunFold => {
  const machine = runMachineFor(machineVersion);
  if (!machine) throw new RangeError(`unknown run machine version "${machineVersion}"`);
  const [snapshot] = initialTransition(machine);
  return { snapshot, machine };
};

/**
 * Apply one event. Pure: returns the next fold, or throws `TransitionRejected` when the machine
 * does not accept the event (a guard encoding a law refused it).
 */
export const step = (fold: RunFold, event: AnyEvent): RunFold => {
  const { snapshot, machine } = fold;
  if (!snapshot.can(event)) {
    throw new TransitionRejected({
      runId: snapshot.context.runId || ("runId" in event ? String(event.runId) : "?"),
      version: snapshot.context.version + 1,
      eventType: event.type,
      state: String(snapshot.value),
      reason: "the run machine's guards refuse it",
    });
  }
  const [next] = transition(machine, snapshot, event);
  return { snapshot: next, machine };
};

/** Pure rehydration: fold events from zero (or from an earlier fold). */
export const foldRun = (events: Iterable<AnyEvent>, from?: RunFold): RunFold => {
  let fold = from;
  for (const event of events) {
    if (!fold) {
      if (event.type !== "run.admitted") {
        throw new TransitionRejected({
          runId: "runId" in event ? String(event.runId) : "?",
          version: 1,
          eventType: event.type,
          state: "admitting",
          reason: "a run stream must start with run.admitted",
        });
      }
      fold = emptyFold(event.machine);
    }
    fold = step(fold, event);
  }
  if (!fold) throw new RangeError("cannot fold an empty run stream");
  return fold;
};
