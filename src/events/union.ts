import * as Schema from "effect/Schema";
import * as SchemaAST from "effect/SchemaAST";
import { CallEvent } from "./call.js";
import { DecisionEvent } from "./decision.js";
import { DocumentEvent } from "./document.js";
import { GraphEvent } from "./graph.js";
import { QueueEvent } from "./queue.js";
import { RunEvent } from "./run.js";
import { ScheduleEvent } from "./schedule.js";
import { SystemEvent } from "./system.js";
import { RunClaimed, WorkerEvent } from "./worker.js";

/** Every event holdfast writes, discriminated by `type`. */
export const AnyEvent = Schema.Union(
  RunEvent,
  CallEvent,
  DecisionEvent,
  DocumentEvent,
  GraphEvent,
  QueueEvent,
  ScheduleEvent,
  WorkerEvent,
  SystemEvent,
);
export type AnyEvent = typeof AnyEvent.Type;
/** The `type` of every event the journal records (`"call.intended"`, `"run.held"`, …). */
export type EventType = AnyEvent["type"];
export type EventOf<T extends EventType> = Extract<AnyEvent, { type: T }>;

/** Every event type, in catalogue order (docs/events.md lists each). */
export const EVENT_TYPES: ReadonlyArray<EventType> = [
  ...RunEvent.members,
  ...CallEvent.members,
  ...DecisionEvent.members,
  ...DocumentEvent.members,
  ...GraphEvent.members,
  ...QueueEvent.members,
  ...ScheduleEvent.members,
  RunClaimed,
  ...SystemEvent.members,
].map((member) => {
  const type = SchemaAST.getPropertySignatures(member.ast).find((p) => p.name === "type")?.type;
  if (!type || !SchemaAST.isLiteral(type)) throw new Error("every event has a literal `type`");
  return String(type.literal) as EventType;
});
