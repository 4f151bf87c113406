import * as Schema from "effect/Schema";
import { Json } from "./shared.js";

/**
 * A value a LangGraph serializer produced, with the serializer's type tag: JSON kept as JSON (masked
 * like any payload), other bytes that are UTF-8 as text (masked as a string), the rest (binary,
 * refused when it holds a registered secret) as base64.
 */
export const GraphValue = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("json"), json: Json }),
  Schema.Struct({ kind: Schema.Literal("text"), type: Schema.String, text: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("bytes"), type: Schema.String, base64: Schema.String }),
);
export type GraphValue = typeof GraphValue.Type;

/** A channel's value at a version, stored once: checkpoints name versions, not values. */
export const GraphChannel = Schema.Struct({
  channel: Schema.String,
  version: Schema.Union(Schema.String, Schema.Finite),
  value: GraphValue,
});
export type GraphChannel = typeof GraphChannel.Type;

/**
 * A LangGraph checkpoint of one thread and namespace, in the thread's stream `langgraph-<threadId>`.
 * The checkpoint (without its channel values), its metadata and the values of the channels that
 * changed (`newVersions`) travel in `state`, a sealed field.
 */
export const GraphCheckpointed = Schema.Struct({
  type: Schema.tag("graph.checkpointed"),
  threadId: Schema.String,
  namespace: Schema.String,
  checkpointId: Schema.String,
  parentId: Schema.NullOr(Schema.String),
  state: Schema.Struct({
    checkpoint: GraphValue,
    metadata: GraphValue,
    channels: Schema.Array(GraphChannel),
  }),
});

/** One write of a task against a checkpoint; `idx` is LangGraph's (negative for its special channels). */
export const GraphWrite = Schema.Struct({
  idx: Schema.Int,
  channel: Schema.String,
  value: GraphValue,
});
export type GraphWrite = typeof GraphWrite.Type;

/**
 * A task's pending writes against a checkpoint. The writes travel in `value`, a sealed field; the
 * first write at an index wins, except LangGraph's special channels, which the latest replaces.
 */
export const GraphWritesRecorded = Schema.Struct({
  type: Schema.tag("graph.writes-recorded"),
  threadId: Schema.String,
  namespace: Schema.String,
  checkpointId: Schema.String,
  taskId: Schema.String,
  taskPath: Schema.String,
  value: Schema.Array(GraphWrite),
});

export const GraphEvent = Schema.Union(GraphCheckpointed, GraphWritesRecorded);
export type GraphEvent = typeof GraphEvent.Type;

/** The stream of a LangGraph thread. */
export const graphStreamId = (threadId: string): string => `langgraph-${threadId}`;
export const GRAPH_STREAM_PREFIX = "langgraph-";
