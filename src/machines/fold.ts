import * as Data from "effect/Data";
import { type AnyActorScope, createActor, initialTransition, type SnapshotFrom } from "xstate";
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

/**
 * One inert actor scope per machine, reused for every event. XState's `transition()` builds a new
 * one (an actor, and with it the machine's initial snapshot) on every call, which was most of the
 * per-event cost; the run machines are pure (assign actions only, no spawn, no invoke, no delay),
 * so a scope that nothing ever starts is all they need.
 */
const scopes = new WeakMap<RunMachine, AnyActorScope>();
const scopeOf = (machine: RunMachine): AnyActorScope => {
  let scope = scopes.get(machine);
  if (!scope) {
    const self = createActor(machine);
    scope = {
      self,
      id: "",
      sessionId: "",
      logger: () => {},
      defer: () => {},
      emit: () => {},
      system: self.system,
      stopChild: () => {},
      actionExecutor: () => {},
    };
    scopes.set(machine, scope);
  }
  return scope;
};

/** Folds are immutable values, so the empty fold of each machine version is built once. */
const emptyFolds = new Map<string, RunFold>();

/** The state before any event: only `run.admitted` is accepted. */
export const emptyFold = (machineVersion: string): RunFold => {
  const known = emptyFolds.get(machineVersion);
  if (known) return known;
  const machine = runMachineFor(machineVersion);
  if (!machine) throw new RangeError(`unknown run machine version "${machineVersion}"`);
  const [snapshot] = initialTransition(machine);
  const fold = { snapshot, machine };
  emptyFolds.set(machineVersion, fold);
  return fold;
};

/**
 * Apply one event. Pure: returns the next fold, or throws `TransitionRejected` when the machine
 * does not accept the event (a guard encoding a law refused it).
 *
 * The guards run once: the event is applied and the result tells whether it was accepted. Every
 * transition of a run machine bumps `version` (an accepted event is one stream version), so an
 * accepted event is exactly one that advances it; an event no transition takes leaves the very
 * same snapshot. This is what `snapshot.can(event)` answered, without evaluating the guards twice.
 */
export const step = (fold: RunFold, event: AnyEvent): RunFold => {
  const { snapshot, machine } = fold;
  const next = machine.transition(snapshot, event, scopeOf(machine)) as RunSnapshot;
  if (next === snapshot || next.context.version !== snapshot.context.version + 1) {
    throw new TransitionRejected({
      runId: snapshot.context.runId || ("runId" in event ? String(event.runId) : "?"),
      version: snapshot.context.version + 1,
      eventType: event.type,
      state: String(snapshot.value),
      reason: "the run machine's guards refuse it",
    });
  }
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
